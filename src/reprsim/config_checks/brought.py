"""Brought models (source: activations): their dataset and splits, where they are compared, and the sections that
need a network they do not have."""

from __future__ import annotations

from collections.abc import Iterator

from reprsim.config_checks.architectures import FROM_CONFIG
from reprsim.workflow.brought import NO_NETWORK, brought_models


def _no_network(key: str, name: str, section: str) -> str:
    return (f"key '{key}' names {name!r}: model {name!r} is brought activations (source: activations) and has no "
            f"network, so it cannot take part in {section}")


def _brought_errors(config: dict, models: dict, datasets: dict) -> Iterator[str]:
    """Brought models (source: activations): their dataset and splits are extracted ones; where they are compared
    (similarity pairs, aligners) they bring the splits read and the representation compared is their pooling; a
    section that needs a network (reprsim.workflow.brought.NO_NETWORK) may not name one."""
    brought = brought_models(models)
    if not brought:
        return
    extraction, similarity, align = config.get("extraction", {}), config.get("similarity", {}), config.get("align", {})
    extracted_splits = extraction.get("splits", [])
    for name in brought:
        spec, key = models[name], f"models.{name}"
        dataset = spec.get("dataset")
        if dataset not in datasets:
            yield (f"key '{key}.dataset' is {dataset!r}, which is not a dataset in this config; defined datasets: "
                   f"{', '.join(sorted(datasets))}")
        elif extraction.get("datasets") and dataset not in extraction["datasets"]:
            yield (f"key '{key}.dataset' is {dataset!r}, which extraction.datasets = {extraction['datasets']} leaves "
                   "out: the brought activations are imported as a store on that dataset; add it there")
        for split in spec.get("splits", {}):
            if split not in extracted_splits:
                yield (f"key '{key}.splits.{split}': extraction.splits = {extracted_splits} does not extract that "
                       "split, so no model is compared on it; add it there or leave the split out")
    # where the workflow compares them
    pairs = similarity.get("pairs")
    representations = similarity.get("representations", [])
    for name in brought:
        spec, key = models[name], f"models.{name}"
        named = isinstance(pairs, list) and any(name in pair for pair in pairs)
        if named and spec.get("pooling") not in representations:
            yield (f"key 'similarity.pairs' names {name!r}, brought activations of pooling {spec.get('pooling')!r}, "
                   f"which similarity.representations = {representations} does not compare (a brought model is "
                   f"compared at its pooling only); add {spec.get('pooling')!r} there or leave {name!r} out")
        elif (named or pairs is None and spec.get("pooling") in representations) and \
                similarity.get("split") not in spec.get("splits", {}):
            yield (f"key '{key}.splits' brings no {similarity.get('split')!r} split (similarity.split), which its "
                   f"pairs compare; add {key}.splits.{similarity.get('split')}"
                   + ("" if named else f", or name similarity.pairs without {name!r}"))
    if align.get("enabled"):
        representation, roles = align.get("representation"), align.get("splits", {})
        named = {n for pair in align.get("pairs") or [] for n in pair}
        named |= set(align.get("synthetic", {}).get("models", []))
        for name in brought:
            spec, key = models[name], f"models.{name}"
            if name in named and spec.get("pooling") != representation:
                yield (f"key 'align.pairs' or 'align.synthetic.models' names {name!r}, brought activations of pooling "
                       f"{spec.get('pooling')!r}, but align.representation is {representation!r}; a brought model is "
                       "aligned at its pooling only")
                continue
            aligned = name in named or (align.get("pairs") is None and spec.get("pooling") == representation)
            for role in ("fit", "select", "score") if aligned else ():
                if roles.get(role) not in spec.get("splits", {}):
                    yield (f"key '{key}.splits' brings no {roles.get(role)!r} split (align.splits.{role}), which the "
                           f"aligners of its pairs need; add {key}.splits.{roles.get(role)}, or name align.pairs "
                           f"without {name!r} (or set align.enabled: false)")
    # what needs the network itself
    for name, spec in models.items():
        if spec.get("source") == "finetune" and spec.get("base") in brought:
            yield _no_network(f"models.{name}.base", spec["base"], NO_NETWORK["finetune"].format(model=name))
        tokenizer = spec.get("tokenizer")
        if spec.get("source") in FROM_CONFIG and isinstance(tokenizer, str) and tokenizer in brought:
            yield _no_network(f"models.{name}.tokenizer", spec["tokenizer"], NO_NETWORK["tokenizer"].format(model=name))
    attention, tokens = similarity.get("attention") or {}, similarity.get("tokens") or {}
    grounding = config.get("grounding") or {}
    named = [("stitching.pairs", "stitching", (config.get("stitching") or {}).get("pairs")),
             ("similarity.attention.pairs", "attention", attention.get("pairs")),
             ("similarity.tokens.pairs", "tokens", tokens.get("pairs")),
             ("similarity.word.pairs", "word", similarity.get("word", {}).get("pairs"))]
    named = [(key, section, [n for pair in pairs or [] for n in pair]) for key, section, pairs in named]
    if grounding.get("enabled", True):
        named += [("grounding.monotonicity_models", "monotonicity", grounding.get("monotonicity_models")),
                  ("grounding.deletion.models", "deletion", (grounding.get("deletion") or {}).get("models")),
                  ("grounding.prediction.models", "prediction", (grounding.get("prediction") or {}).get("models"))]
    for key, section, names in named:
        for name in dict.fromkeys(names or []):
            if name in brought:
                yield _no_network(key, name, NO_NETWORK[section])
