"""One stitching job: the bottom model f stitched into the top model g (g_{>m} ∘ φ ∘ f_{≤l}) at each
layer pair and for each stitching map φ, trained (φ only) and scored (Bansal et al. 2021; Brown
et al. 2023). docs/numerics.md §12a has the conventions; in short:

- layers: l = 1..L_f (after each block); m = round(l·L_g/L_f) (reprsim.tables.layers.matching_layer: "matching"
  relative depth) or
  every m = 1..L_g ("all"), every m = 0..L_g from f's layers at its relative depth ("reference": the universality
  study's functional sense), or explicit [l, m] pairs;
- φ: identity (equal widths only), affine, or affine after a LayerNorm; a learned φ starts at the
  identity where the shapes allow and at the least-squares map from f's stream to g's otherwise (or, with
  `start="least_squares"`, always at the least-squares map),
  and is trained on the train split (g's own task loss or next-token loss), every map on the same
  seeded sequence of batches, with the optimiser and schedule asked for;
- scores on the evaluation split: value (the stitched model), top_score (g alone), penalty
  (top_score − value, or value − top_score for a loss: positive = worse than g), each with a
  half-sample interval over evaluation rows (the same rows for both, so the penalty's interval is
  paired); chance (the metric with the correspondence between predictions and targets broken,
  reprsim.stages.stitch.objectives); self_stitch and self_penalty (f into itself at the same
  layer l: the optimisation's own share of a penalty, from the self-stitch job's table) and
  excess_penalty = penalty − self_penalty.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import AutoConfig, get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

from reprsim.inference.resampling import METHOD, half_samples, interval, subsample_size
from reprsim.io.datasets import read_meta
from reprsim.io.device import describe
from reprsim.io.logs import progress
from reprsim.nets.loading import load_causal_lm, load_classifier, load_encoder, load_tokenizer, n_layers
from reprsim.nets.streams import model_inputs, residual_stream, streams_and_output
from reprsim.stages.stitch.objectives import HIGHER_IS_BETTER, OBJECTIVES, Classification, LanguageModeling
from reprsim.stages.stitch.stitched import (
    PHI_KINDS,
    check_widths,
    freeze,
    is_identity,
    least_squares_start,
    make_phi,
    starts_at_identity,
    stitched_forward,
)
from reprsim.tables.layers import matching_layer, reference_pairs

COLUMNS = ["dataset", "objective", "model_a", "model_b", "layer_a", "layer_b", "n_layers_a", "n_layers_b", "phi",
           "seed", "metric", "higher_is_better", "value", "chance", "ci_low", "ci_high", "top_score", "top_low",
           "top_high", "penalty", "penalty_low", "penalty_high", "self_stitch", "self_penalty", "excess_penalty",
           "start", "steps", "first_loss", "final_loss", "heldout_start_loss", "heldout_trained_loss", "kept",
           "seconds", "split", "n", "n_resamples", "interval_method", "device"]
REPLICATE_COLUMNS = ["dataset", "model_a", "model_b", "layer_a", "layer_b", "phi", "seed", "metric", "replicate",
                     "value", "penalty", "n", "m"]
OPTIMIZERS = ("sgd_nesterov", "sgd", "adam")
SCHEDULES = ("linear", "constant")
# a learned map's start: the identity where the widths agree, else least squares (auto); least squares always
STARTS = ("auto", "least_squares")
# the optimiser of Brown et al. (2023, appendix C.1, after the tuned lens): SGD with Nesterov momentum,
# learning rate 1.0, 200 warm-up steps of 2,000
BROWN_OPTIMIZER = {"name": "sgd_nesterov", "learning_rate": 1.0, "momentum": 0.9, "warmup_steps": 200,
                   "schedule": "linear", "weight_decay": 0.0, "max_grad_norm": None}


def layer_pairs(layers, depth_a: int, depth_b: int) -> list[tuple[int, int]]:
    """(l, m) pairs: "matching" relative depth, "reference" (every top layer m = 0..L_g, from the bottom layer at
    the same relative depth, or the two around it: reprsim.tables.layers.reference_pairs, as the universality study
    reads them), "all" (every l, every m), or explicit pairs."""
    if layers == "matching":
        return [(l, matching_layer(l, depth_a, depth_b)) for l in range(1, depth_a + 1)]
    if layers == "reference":
        return reference_pairs(depth_a, depth_b)
    if layers == "all":
        return [(l, m) for l in range(1, depth_a + 1) for m in range(1, depth_b + 1)]
    pairs = [(int(l), int(m)) for l, m in layers]
    bad = [(l, m) for l, m in pairs if not (0 <= l <= depth_a and 0 <= m <= depth_b)]
    if bad:
        raise ValueError(f"stitching.layers: {bad} outside the models' layers 0..{depth_a} and 0..{depth_b}")
    return pairs


def make_optimizer(parameters, spec: dict, steps: int):
    spec = {**BROWN_OPTIMIZER, **spec}
    name, lr, decay = spec["name"], float(spec["learning_rate"]), float(spec["weight_decay"])
    if name in ("sgd_nesterov", "sgd"):
        optimizer = torch.optim.SGD(parameters, lr=lr, momentum=float(spec["momentum"]), nesterov=name == "sgd_nesterov",
                                    weight_decay=decay)
    elif name == "adam":
        optimizer = torch.optim.Adam(parameters, lr=lr, weight_decay=decay)
    else:
        raise ValueError(f"stitching.optimizer.name {name!r}: expected one of {', '.join(OPTIMIZERS)}")
    warmup = min(int(spec["warmup_steps"]), steps)
    if spec["schedule"] == "linear":
        schedule = get_linear_schedule_with_warmup(optimizer, warmup, max(steps, 1))
    elif spec["schedule"] == "constant":
        schedule = get_constant_schedule_with_warmup(optimizer, warmup)
    else:
        raise ValueError(f"stitching.optimizer.schedule {spec['schedule']!r}: expected one of {', '.join(SCHEDULES)}")
    return optimizer, schedule, spec["max_grad_norm"]


def _width(model) -> int:
    return int(model.config.hidden_size)


def _check_head(objective: str, top_dir) -> None:
    """The top model must carry the head the objective scores: a task head fine-tuned on the dataset, or a
    language-model head (a model saved without one would get a randomly initialised head)."""
    wanted = "ForSequenceClassification" if objective == "classification" else ("LMHeadModel", "ForCausalLM")
    architectures = AutoConfig.from_pretrained(top_dir).architectures or []
    if not any(name.endswith(wanted) for name in architectures):
        kind = "a task head (a fine-tuned classifier, source finetune)" if objective == "classification" else \
            "a language-model head (source pretrain, or a causal LM saved with its head)"
        raise ValueError(f"{top_dir}: {objective} stitching needs a top model with {kind}; its config.json "
                         f"names {architectures or 'no architecture'}")


def _load(objective: str, bottom_dir, top_dir, device):
    _check_head(objective, top_dir)
    loader = load_classifier if objective == "classification" else load_causal_lm
    top = loader(top_dir, device)
    same = Path(bottom_dir).resolve() == Path(top_dir).resolve()
    bottom = top if same else load_encoder(bottom_dir, device)
    freeze(bottom, top)
    tokenizers = (load_tokenizer(bottom_dir), load_tokenizer(top_dir)) if not same else (load_tokenizer(top_dir),)
    return bottom, top, tokenizers


def _objective(objective: str, dataset_dir, top_dir, tokenizers, split, device, max_length, context, max_examples,
               train_split, heldout):
    if objective == "classification":
        if max_length is None:
            max_length = read_meta(top_dir).get("spec", {}).get("max_length")
        if max_length is None:
            raise ValueError(f"{top_dir}: no max_length in its meta.json spec; set stitching.max_length")
        return Classification(dataset_dir, tokenizers, split, max_length, device, max_examples=max_examples,
                              train_split=train_split, heldout=heldout)
    if context is None:
        context = read_meta(top_dir).get("spec", {}).get("context")
    if context is None:
        raise ValueError(f"{top_dir}: no context in its meta.json spec; set stitching.context")
    return LanguageModeling(dataset_dir, tokenizers, split, int(context), device, max_examples=max_examples,
                            train_split=train_split, heldout=heldout)


def _start_maps(keys, bottom, top, task, batch_size, seed, init_tokens, start: str = "auto"):
    """Every learned map at its start: with `start` auto the identity where the shapes allow, else (and with
    least_squares always) the least-squares map from f's stream at l to g's at m on the first `init_tokens`
    (non-padding) training tokens."""
    if start not in STARTS:
        raise ValueError(f"stitching start {start!r}: expected one of {', '.join(STARTS)}")
    d_in, d_out = _width(bottom), _width(top)
    device = next(bottom.parameters()).device  # the maps train where the models run
    maps = {key: make_phi(key[2], d_in, d_out).to(device) for key in keys}
    fitted = [key for key in keys if start == "least_squares" or not starts_at_identity(key[2], d_in, d_out)]
    if not fitted:
        return maps, {key: "identity" for key in keys}
    sources = {l: [] for l, _, _ in fitted}
    targets = {m: [] for _, m, _ in fitted}
    taken = 0
    for batch in task.train_batches(batch_size, np.random.default_rng([seed, 1])):
        mask = batch["attention_mask"].bool()
        if top is bottom:  # a self-stitch: one forward pass gives both sides
            f_streams = g_streams = residual_stream(bottom, batch, sorted(set(sources) | set(targets)))
        else:
            f_streams, g_streams = residual_stream(bottom, batch, list(sources)), residual_stream(top, batch, list(targets))
        for l in sources:
            sources[l].append(f_streams[l][mask])
        for m in targets:
            targets[m].append(g_streams[m][mask])
        taken += int(mask.sum())
        if taken >= init_tokens:
            break
    residuals = {}
    for key in fitted:
        l, m, _ = key
        residuals[key] = least_squares_start(maps[key], torch.cat(sources[l]), torch.cat(targets[m]))
    return maps, {key: ("identity" if key not in residuals else f"least squares (residual {residuals[key]:.3f})")
                  for key in keys}


def _train(maps, bottom, top, task, steps, batch_size, optimizer_spec, seed, label):
    """Train every map on the same seeded batches; returns per map (first loss, final loss, seconds)."""
    record = {key: {"losses": [], "seconds": 0.0} for key in maps}
    if steps == 0 or not maps:
        return {key: (np.nan, np.nan, 0.0) for key in maps}
    optimizers = {key: make_optimizer(list(phi.parameters()), optimizer_spec, steps) for key, phi in maps.items()}
    layers = sorted({l for l, _, _ in maps})
    batches = task.train_batches(batch_size, np.random.default_rng(seed))
    bar = progress(range(1, steps + 1), unit="step", desc=f"stitch {label}: {len(maps)} maps")
    for _ in bar:
        batch = next(batches)
        streams = residual_stream(bottom, batch, layers)
        for key, phi in maps.items():
            started = time.perf_counter()
            optimizer, schedule, clip = optimizers[key]
            loss = task.loss(stitched_forward(top, key[1], phi, streams[key[0]], batch), batch)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(phi.parameters(), float(clip))
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            record[key]["losses"].append(loss.item())
            record[key]["seconds"] += time.perf_counter() - started
        bar.set_postfix(loss=f"{np.mean([r['losses'][-1] for r in record.values()]):.4f}")
    bar.close()
    window = max(1, min(10, steps // 5))
    return {key: (float(np.mean(r["losses"][:window])), float(np.mean(r["losses"][-window:])), r["seconds"])
            for key, r in record.items()}


def _pass_of(name, l: int, m: int, phi, self_stitch: bool):
    """Which forward pass gives a stitched model: a map equal to the identity gives the identity's model at its
    (l, m), which for a model stitched into itself at l = m is the model itself ("top": the same operations on the
    same inputs, reprsim.nets.streams); any other map its own."""
    if is_identity(phi):
        return ("top",) if self_stitch and l == m else ("identity", l, m)
    return ("map", name)


@torch.no_grad()
def _measured(maps: dict, bottom, top, batch: dict, measure, with_top: bool = False) -> dict:
    """`measure(output)` on `batch` of every stitched model in `maps` ({name: (l, m, φ)}), and of g alone ("top",
    with `with_top`), each distinct model's forward pass run once: f's streams in one pass for every map (for a
    self-stitch, the pass that gives g's own output too), one pass per distinct map (_pass_of)."""
    passes = {name: _pass_of(name, l, m, phi, bottom is top) for name, (l, m, phi) in maps.items()}
    distinct = {}
    for name, kind in passes.items():
        distinct.setdefault(kind, maps[name])
    own_needed = with_top or ("top",) in distinct
    stitched = {kind: spec for kind, spec in distinct.items() if kind != ("top",)}
    layers = sorted({l for l, _, _ in stitched.values()})
    measures = {}
    if own_needed and bottom is top and layers:
        streams, own = streams_and_output(top, batch, layers)
    else:
        streams = residual_stream(bottom, batch, layers) if layers else {}
        own = top(**model_inputs(batch), use_cache=False) if own_needed else None
    if own is not None:
        measures[("top",)] = measure(own)
        del own  # a language model's logits are large: one model's output alive at a time
    for kind, (l, m, phi) in stitched.items():
        measures[kind] = measure(stitched_forward(top, m, phi, streams[l], batch))
    result = {name: measures[kind] for name, kind in passes.items()}
    if with_top:
        result["top"] = measures[("top",)]
    return result


def _heldout_losses(maps: dict, bottom, top, task) -> dict:
    """The training loss on the held-out rows of the training split (the mean over rows or blocks) of every
    stitched model in `maps` ({name: (l, m, φ)}), each pass once per batch (_measured)."""
    totals, rows = dict.fromkeys(maps, 0.0), 0
    for batch in task.heldout_batches:
        size = len(batch["input_ids"])
        weighted = _measured(maps, bottom, top, batch, lambda output: float(task.loss(output, batch)) * size)
        for name, loss in weighted.items():
            totals[name] += loss
        rows += size
    return {name: total / rows for name, total in totals.items()}


def _placed(maps: dict) -> dict:
    """{name: (l, m, φ)} for maps named (seed, l, m, kind)."""
    return {name: (name[1], name[2], phi) for name, phi in maps.items()}


def _keep_improved(trained: dict, starts: dict, bottom, top, task) -> dict:
    """Whether each trained map (named (seed, l, m, kind)) or its start (`starts`: copies of the maps before
    training) is kept: its start where training did not lower its loss on the held-out rows of the training split,
    so a learned map never ends worse there than where it started. Both states of every map are scored on the same
    passes of f. Returns per map (held-out loss at the start, after training, "trained" or "start")."""
    both = {**{("trained", *name): spec for name, spec in _placed(trained).items()},
            **{("start", *name): spec for name, spec in _placed(starts).items()}}
    losses = _heldout_losses(both, bottom, top, task)
    outcome = {}
    for name in trained:
        start_loss, trained_loss = losses[("start", *name)], losses[("trained", *name)]
        outcome[name] = (start_loss, trained_loss, "trained" if trained_loss < start_loss else "start")
    return outcome


@torch.no_grad()
def _evaluate(maps: dict, bottom, top, task, label: str) -> tuple[dict, dict]:
    """Per-row statistics of g alone and of every stitched model (maps named (seed, l, m, kind)) on the evaluation
    batches, each distinct model's pass once per batch (_measured): a map equal to the identity takes the
    identity's statistics at its (l, m), and a model stitched into itself there the model's own."""
    stats = {name: [] for name in [*maps, "top"]}
    for batch in progress(task.eval_batches, unit="batch", desc=f"evaluate {label}"):
        for name, row_stats in _measured(_placed(maps), bottom, top, batch,
                                         lambda output: task.row_stats(output, batch), with_top=True).items():
            stats[name].append(row_stats)
    joined = {name: {stat: np.concatenate([part[stat] for part in parts]) for stat in parts[0]}
              for name, parts in stats.items()}
    return joined.pop("top"), joined


def stitch_pair(
    bottom_dir: str | Path, top_dir: str | Path, dataset_dir: str | Path, *, objective: str,
    layers="matching", phis=("identity", "affine"), steps: int = 100, batch_size: int = 32,
    optimizer: dict | None = None, split: str = "validation", train_split: str = "train", seeds=(0,),
    resamples: int = 40, confidence: float = 0.95, interval_seed: int = 0, chance_permutations: int = 100,
    chance_seed: int = 0, max_length: int | None = None, context: int | None = None, max_examples: int | None = None,
    init_tokens: int = 20000, heldout: int = 0, start: str = "auto", on_width_mismatch: str = "refuse",
    device: torch.device | None = None,
    names: tuple[str, str] | None = None, dataset: str | None = None, self_table: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stitching table and its half-sample replicates for bottom model f (`bottom_dir`, model_a)
    stitched into top model g (`top_dir`, model_b); `self_table` is f's self-stitch table (None when
    f is g: this job is the baseline). The models stay bit-identical: only the maps are trained."""
    if objective not in OBJECTIVES:
        raise ValueError(f"stitching objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    unknown = [kind for kind in phis if kind not in PHI_KINDS]
    if unknown:
        raise ValueError(f"stitching.phi: unknown {unknown}; expected some of {', '.join(PHI_KINDS)}")
    device = device or torch.device("cpu")
    names = names or (Path(bottom_dir).name, Path(top_dir).name)
    label = f"{names[0]} -> {names[1]}"
    bottom, top, tokenizers = _load(objective, bottom_dir, top_dir, device)
    d_in, d_out = _width(bottom), _width(top)
    phis = list(phis)
    if "identity" in phis and d_in != d_out:
        if on_width_mismatch != "skip":
            check_widths("identity", d_in, d_out, f" ({label})")
        print(f"{label}: no identity stitching: widths {d_in} and {d_out} differ", flush=True)
        phis.remove("identity")
    depth_a, depth_b = n_layers(bottom.config), n_layers(top.config)
    pairs = layer_pairs(layers, depth_a, depth_b)
    task = _objective(objective, dataset_dir, top_dir, tokenizers, split, device, max_length, context, max_examples,
                      train_split, heldout)
    n = task.n
    subsets = half_samples(n, resamples, seed=interval_seed)
    m = subsample_size(n)

    learned = [kind for kind in phis if kind != "identity"]
    # every seed's maps, named (seed, l, m, kind), in the table's order: each seed's learned maps, the identity
    # after the first seed's (it needs no training: scored once, under the first seed)
    maps, untrained, starts, records = {}, {}, {}, {}
    for index, seed in enumerate(map(int, seeds)):
        torch.manual_seed(seed)
        keys = [(l, mm, kind) for l, mm in pairs for kind in learned]
        fitted, start_of = (_start_maps(keys, bottom, top, task, batch_size, seed, init_tokens, start) if keys
                            else ({}, {}))
        copies = {key: copy.deepcopy(phi) for key, phi in fitted.items()}
        record = _train(fitted, bottom, top, task, steps, batch_size, optimizer or {}, seed, f"{label}, seed {seed}")
        for key, phi in fitted.items():
            name = (seed, *key)
            maps[name], untrained[name] = phi, copies[key]
            starts[name], records[name] = start_of[key], record[key]
        if index == 0 and "identity" in phis:
            for l, mm in pairs:
                name = (seed, l, mm, "identity")
                maps[name], starts[name] = make_phi("identity", d_in, d_out), "identity"
                records[name] = (np.nan, np.nan, 0.0)
    # every seed's learned maps in one held-out check and all maps in one evaluation: f's streams once per batch
    trained = {name: maps[name] for name in untrained}
    kept = (_keep_improved(trained, untrained, bottom, top, task) if trained and task.heldout_batches and steps else
            {name: (np.nan, np.nan, "trained") for name in trained})
    for name, (_, _, which) in kept.items():
        if which == "start":
            maps[name] = untrained[name]
    for phi in maps.values():
        phi.eval()
    top_stats, stitched = _evaluate(maps, bottom, top, task, label)
    top_scores = task.scores(top_stats)
    top_replicates = [task.scores(top_stats, rows_) for rows_ in subsets]

    rows, replicate_rows = [], []
    for name, stats in stitched.items():
        seed, l, mm, kind = name
        scores = task.scores(stats)
        chance = task.chance(stats, chance_permutations, chance_seed)
        replicates = [task.scores(stats, rows_) for rows_ in subsets]
        first_loss, final_loss, seconds = records[name]
        heldout_start, heldout_trained, kept_map = kept.get(name, (np.nan, np.nan, ""))
        for metric in task.metrics:
            sign = 1.0 if HIGHER_IS_BETTER[metric] else -1.0
            values = np.array([r[metric] for r in replicates])
            tops = np.array([r[metric] for r in top_replicates])
            penalties = sign * (tops - values)
            penalty = sign * (top_scores[metric] - scores[metric])
            low, high = interval(scores[metric], values, n, m, confidence)
            top_low, top_high = interval(top_scores[metric], tops, n, m, confidence)
            penalty_low, penalty_high = interval(penalty, penalties, n, m, confidence)
            rows.append({
                "layer_a": l, "layer_b": mm, "phi": kind, "seed": seed, "metric": metric,
                "higher_is_better": HIGHER_IS_BETTER[metric], "value": scores[metric], "chance": chance[metric],
                "ci_low": low, "ci_high": high, "top_score": top_scores[metric], "top_low": top_low,
                "top_high": top_high, "penalty": penalty, "penalty_low": penalty_low, "penalty_high": penalty_high,
                "start": starts[name], "steps": 0 if kind == "identity" else steps, "first_loss": first_loss,
                "final_loss": final_loss, "heldout_start_loss": heldout_start,
                "heldout_trained_loss": heldout_trained, "kept": kept_map, "seconds": round(seconds, 2),
            })
            replicate_rows += [{"layer_a": l, "layer_b": mm, "phi": kind, "seed": seed, "metric": metric,
                                "replicate": r, "value": v, "penalty": p}
                               for r, (v, p) in enumerate(zip(values, penalties))]
    table = pd.DataFrame(rows)
    table = with_self_stitch(table, self_table)
    table["dataset"], table["objective"] = dataset, objective
    table["model_a"], table["model_b"] = names
    table["n_layers_a"], table["n_layers_b"] = depth_a, depth_b
    table["split"], table["n"], table["n_resamples"], table["interval_method"] = split, n, resamples, METHOD
    table["device"] = describe(device)
    replicates = pd.DataFrame(replicate_rows, columns=[c for c in REPLICATE_COLUMNS if c not in
                                                       ("dataset", "model_a", "model_b", "n", "m")])
    replicates["dataset"], replicates["model_a"], replicates["model_b"] = dataset, *names
    replicates["n"], replicates["m"] = n, m
    return table[COLUMNS], replicates[REPLICATE_COLUMNS]


def with_self_stitch(table: pd.DataFrame, self_table: pd.DataFrame | None) -> pd.DataFrame:
    """Add f's self-stitch at the same bottom layer l (same map, seed, metric): its value, its penalty,
    and this table's excess penalty over it. Without a self table this job is the self-stitch."""
    if self_table is None:
        table["self_stitch"], table["self_penalty"] = table["value"], table["penalty"]
    else:
        keys = ["layer_a", "phi", "seed", "metric"]
        baseline = self_table.loc[self_table["layer_a"] == self_table["layer_b"], keys + ["value", "penalty"]]
        baseline = baseline.rename(columns={"value": "self_stitch", "penalty": "self_penalty"})
        table = table.merge(baseline, on=keys, how="left", validate="many_to_one")
    table["excess_penalty"] = table["penalty"] - table["self_penalty"]
    return table
