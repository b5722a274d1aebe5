"""Claims from the fine-tuning evaluations' accuracies (Phang et al. 2021, §4): skipping an upper
block costs less than skipping the first; the fine-tuned model's intermediate layers carry the
task better than its base's. Accuracies have no replicates: binomial intervals (Wilson; Newcombe
for a difference), or a t interval over fine-tuned models when there are enough of them."""

from __future__ import annotations

from reprsim.design.relations import finetuned_from
from reprsim.stages.findings.context import Setup, Tables
from reprsim.stages.findings.intervals import MIN_UNITS, correct_count, newcombe, t_interval
from reprsim.stages.findings.table import Claim, judged, not_applicable

SKIP = Claim(
    "skip_upper_cheaper", "Upper layers can be skipped at less cost than lower ones",
    "Phang et al. 2021, §4.1 (Figure 4)",
    "accuracy with the last block skipped − accuracy with the first block skipped (no further training; "
    "skipping block L gives the same model as truncating at layer L − 1, UNTUNED)")
TUNED_VS_ORIG = Claim(
    "finetuned_layers_carry_the_task", "A fine-tuned model's intermediate layers carry the task better than its "
    "base model's", "Phang et al. 2021, §4 (Figure 3: TUNED vs TUNEDORIG)",
    "accuracy of a fresh head on the fine-tuned model's middle layer ⌈L/2⌉ (TUNED) − on the base model's "
    "(TUNEDORIG)")
METRIC = "accuracy"  # binomial: the only score with an interval from counts


def _difference(claim: Claim, counts: dict[str, tuple[int, int, int]], setup: Setup, what: str,
                dataset: str) -> dict:
    """counts: model -> (k_first, k_second, n) for first − second. Pooled counts with Newcombe's
    interval, or a t interval over models when there are MIN_UNITS or more."""
    models = ", ".join(counts)
    if len(counts) >= MIN_UNITS:
        values = [(k1 - k2) / n for k1, k2, n in counts.values()]
        estimate, low, high = t_interval(values, setup.confidence)
        method = f"t interval over the {len(counts)} fine-tuned models as independent units ({what})"
    else:
        k1, k2, n = (sum(c[i] for c in counts.values()) for i in range(3))
        estimate, low, high = newcombe(k1, n, k2, n, setup.confidence)
        method = (f"{what}: {k1}/{n} vs {k2}/{n} correct" + (" (counts pooled over models)" if len(counts) > 1
                                                             else "")
                  + "; Newcombe hybrid-score interval from the two Wilson intervals, which treats the two "
                  "accuracies as independent: conservative (too wide) for these paired ones on the same examples")
    n_examples = sum(c[2] for c in counts.values())
    return judged(claim, estimate=estimate, low=low, high=high, n=n_examples, models=models, measure=METRIC,
                  method=method, confidence=setup.confidence, dataset=dataset)


def _paired_counts(scores, first, second, problem: str) -> tuple[int, int, int]:
    """(correct of `first`, correct of `second`, n) from rows indexed by first/second with value and n;
    both must be scored on the same n examples (else `problem` is raised)."""
    n = int(scores.loc[first, "n"])
    if int(scores.loc[second, "n"]) != n:
        raise ValueError(problem)
    return correct_count(scores.loc[first, "value"], n), correct_count(scores.loc[second, "value"], n), n


def _dataset(setup: Setup, models) -> str:
    return ", ".join(sorted({str(setup.models[m].get("dataset", "")) for m in models if m in setup.models}))


def skip_upper_cheaper(tables: Tables, setup: Setup) -> list[dict]:
    finetuned = finetuned_from(setup.models)
    if not finetuned:
        return [not_applicable(SKIP, "no model is fine-tuned (source: finetune)")]
    if tables.skip is None or tables.skip.empty:
        return [not_applicable(SKIP, "no skip tables: finetune_eval.skip is false")]
    counts = {}
    for model, rows in tables.skip[tables.skip["metric"] == METRIC].groupby("model"):
        depth = int(rows["end"].max())
        single = rows[(rows["start"] == rows["end"]) & rows["start"].isin([1, depth])].set_index("start")
        if depth < 2 or not {1, depth} <= set(single.index):
            continue
        counts[model] = _paired_counts(single, depth, 1,
                                       f"skip table of {model}: the two spans were scored on different examples")
    if not counts:
        return [not_applicable(SKIP, "no fine-tuned model has 2 blocks or more with single-block skip rows")]
    return [_difference(SKIP, counts, setup, "last block skipped vs first block skipped", _dataset(setup, counts))]


def finetuned_layers_carry_the_task(tables: Tables, setup: Setup) -> list[dict]:
    finetuned = finetuned_from(setup.models)
    if not finetuned:
        return [not_applicable(TUNED_VS_ORIG, "no model is fine-tuned (source: finetune)")]
    if tables.truncation is None or tables.truncation.empty:
        return [not_applicable(TUNED_VS_ORIG, "no truncation tables: finetune_eval.truncation is false")]
    rows = tables.truncation[(tables.truncation["metric"] == METRIC)
                             & tables.truncation["mode"].isin(["TUNED", "TUNEDORIG"])]
    if rows.empty:
        return [not_applicable(TUNED_VS_ORIG, "the truncation tables have no TUNED / TUNEDORIG rows: "
                               "finetune_eval.heads.enabled is false")]
    counts, middles = {}, set()
    for model, model_rows in rows.groupby("model"):
        depth = int(tables.truncation.loc[tables.truncation["model"] == model, "layer"].max())
        middle = -(-depth // 2)  # ⌈L/2⌉: an intermediate layer, as Phang et al.'s claim is about them
        at = model_rows[model_rows["layer"] == middle].set_index("mode")
        if depth < 1 or not {"TUNED", "TUNEDORIG"} <= set(at.index):
            continue
        counts[model] = _paired_counts(at, "TUNED", "TUNEDORIG", f"truncation table of {model}: TUNED and "
                                       "TUNEDORIG were scored on different examples")
        middles.add(middle)
    if not counts:
        return [not_applicable(TUNED_VS_ORIG, "no fine-tuned model has TUNED and TUNEDORIG rows at its middle layer")]
    at_layers = "/".join(str(m) for m in sorted(middles))
    return [_difference(TUNED_VS_ORIG, counts, setup, f"TUNED vs TUNEDORIG at layer {at_layers}",
                        _dataset(setup, counts))]

