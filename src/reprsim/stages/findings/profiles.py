"""Claims about how similarity varies with depth, from the pair tables' CKA values:
adjacent vs distant layers within a model; lower vs upper layers across seeds; fine-tuning
changing the upper layers most."""

from __future__ import annotations

from reprsim.design.relations import finetuned_from, seed_pairs
from reprsim.stages.findings.cells import cell, mean_difference, mean_of_units, select, weighted
from reprsim.stages.findings.context import Setup, Tables, compared_pairs, pair_blocks
from reprsim.stages.findings.table import Claim, judged, not_applicable
from reprsim.tables.layers import model_depths

# why a layer pair has no value: the pair table's meta says which ("undefined")
UNDEFINED = "constant layers, or the measure undefined on these rows"

ADJACENT = Claim(
    "adjacent_layers", "Adjacent layers of a model are more similar than distant ones",
    "Phang et al. 2021, §3 (ORIG–ORIG); Ren et al. 2023, §5.1 (Figure 3)",
    "mean over models of [mean CKA of layer pairs 1 apart − mean CKA of layer pairs ≥ 2 apart], "
    "each model with itself")
LOWER_ACROSS_SEEDS = Claim(
    "lower_layers_across_seeds", "Lower layers are more similar across seeds than upper ones",
    "Ren et al. 2023, §5.1 (Figure 2); Wu et al. 2020, §5.1",
    "mean over seed pairs of [mean CKA of matching lower blocks − mean CKA of matching upper blocks] "
    "(blocks 1..L, lower = 1..⌊L/2⌋, upper = the top ⌊L/2⌋; the embedding layer 0 left out)")
FINETUNING_UPPER_ATTENTION = Claim(
    "finetuning_changes_upper_attention", "Fine-tuning changes the attention of the upper layers most",
    "Wu et al. 2020, §6.1 (Figure 6)",
    "mean over (fine-tuned, base) pairs of [mean distributed attention CKA of matching lower blocks − mean of "
    "matching upper blocks] (word-level attention maps; blocks 1..L, lower = 1..⌊L/2⌋, upper = the top ⌊L/2⌋)")
FINETUNING_UPPER = Claim(
    "finetuning_changes_upper_layers", "Fine-tuning changes the upper layers most (FT–ORIG diagonal falls with depth)",
    "Wu et al. 2020, §6.1; Phang et al. 2021, §3 (FT–ORIG)",
    "mean over (fine-tuned, base) pairs of [mean CKA of matching lower blocks − mean CKA of matching upper "
    "blocks] (blocks 1..L, lower = 1..⌊L/2⌋, upper = the top ⌊L/2⌋; layer 0 left out)")


def halves(depth: int) -> tuple[list[int], list[int]]:
    """Lower and upper blocks of a model with `depth` blocks: 1..⌊L/2⌋ and the top ⌊L/2⌋ (an odd
    L leaves the middle block out). Layer 0, the embeddings, is not a block: fine-tuning barely
    moves it, and Ren et al. compare the 12 hidden layers."""
    half = depth // 2
    return list(range(1, half + 1)), list(range(depth - half + 1, depth + 1))


def adjacent_layers(tables: Tables, setup: Setup) -> list[dict]:
    """Claim: each model with itself; pooled over models (they are not seed units), replicate interval."""
    if setup.measure is None:
        return [not_applicable(ADJACENT, NO_CKA)]
    rows = []
    for dataset, representation, pairs, replicates in pair_blocks(tables):
        compared = compared_pairs(pairs)
        deep = {m: d for m, d in model_depths(pairs).items() if d >= 2 and (m, m) in compared}
        if not deep:
            rows.append(not_applicable(ADJACENT, "no model compared with itself has 3 layers or more (layer "
                                       "pairs ≥ 2 apart)", dataset, representation))
            continue
        wanted = [cell(m, m, i, j) for m, d in deep.items() for i in range(d + 1) for j in range(i + 1, d + 1)]
        cells = select(pairs, replicates, wanted, setup.measure)
        units = {}
        for m, d in deep.items():
            near = cells.defined([cell(m, m, i, i + 1) for i in range(d)])
            far = cells.defined([cell(m, m, i, j) for i in range(d + 1) for j in range(i + 2, d + 1)])
            if near and far:
                units[m] = weighted(cells, mean_difference(near, far))
        if not units:
            rows.append(not_applicable(ADJACENT, f"every model's layer pairs are undefined ({UNDEFINED})",
                                       dataset, representation))
            continue
        estimate, low, high, method = mean_of_units(cells, units, setup.confidence, "models", independent=False)
        rows.append(judged(ADJACENT, estimate=estimate, low=low, high=high, n=cells.n, models=", ".join(units),
                           measure=setup.measure, method=method, confidence=setup.confidence,
                           dataset=dataset, representation=representation))
    return rows or [not_applicable(ADJACENT, NO_PAIRS)]


def _lower_minus_upper(claim: Claim, tables: Tables, setup: Setup, model_pairs: list[tuple[str, str]],
                       unit_name: str, absent: str, blocks=None, measure: str | None = None,
                       no_measure: str = "") -> list[dict]:
    """Matching-layer (diagonal) values of each model pair, lower half minus upper half; the mean over
    pairs, with seed-pair units when there are enough of them. By default the CKA of the pair tables;
    `blocks` (dataset, representation, pairs, replicates) and `measure` name other tables of the same
    format (the attention tables)."""
    measure = setup.measure if blocks is None else measure
    if measure is None:
        return [not_applicable(claim, no_measure or NO_CKA)]
    if not model_pairs:
        return [not_applicable(claim, absent)]
    rows = []
    for dataset, representation, pairs, replicates in (pair_blocks(tables) if blocks is None else blocks):
        depth = model_depths(pairs)
        compared = compared_pairs(pairs)
        usable = [(a, b) for a, b in model_pairs if a in depth and b in depth and tuple(sorted((a, b))) in compared]
        if not usable:
            rows.append(not_applicable(claim, f"none of the {unit_name} ({_listed(model_pairs)}) is in the pair "
                                       "tables of this dataset and representation", dataset, representation))
            continue
        unequal = [(a, b) for a, b in usable if depth[a] != depth[b]]
        shallow = [(a, b) for a, b in usable if depth[a] < 2]
        usable = [(a, b) for a, b in usable if depth[a] == depth[b] >= 2]
        if not usable:
            why = "of unequal depth" if unequal else "with fewer than 2 blocks (no lower and upper half)"
            rows.append(not_applicable(claim, f"the {unit_name} ({_listed(unequal or shallow)}) are models {why}",
                                       dataset, representation))
            continue
        wanted = [cell(a, b, layer, layer) for a, b in usable for layer in range(1, depth[a] + 1)]
        cells = select(pairs, replicates, wanted, measure)
        units = {}
        for a, b in usable:
            lower, upper = halves(depth[a])
            lower = cells.defined([cell(a, b, layer, layer) for layer in lower])
            upper = cells.defined([cell(a, b, layer, layer) for layer in upper])
            if lower and upper:
                units[f"{a} vs {b}"] = weighted(cells, mean_difference(lower, upper))
        if not units:
            rows.append(not_applicable(claim, f"every matching layer pair is undefined ({UNDEFINED})",
                                       dataset, representation))
            continue
        estimate, low, high, method = mean_of_units(cells, units, setup.confidence, unit_name)
        rows.append(judged(claim, estimate=estimate, low=low, high=high, n=cells.n, models="; ".join(units),
                           measure=measure, method=method, confidence=setup.confidence,
                           dataset=dataset, representation=representation))
    return rows or [not_applicable(claim, NO_PAIRS)]


def lower_layers_across_seeds(tables: Tables, setup: Setup) -> list[dict]:
    return _lower_minus_upper(LOWER_ACROSS_SEEDS, tables, setup, seed_pairs(setup.models), "seed pairs",
                              "no two models differ only in seed (the same spec but `seed`)")


def finetuning_changes_upper_layers(tables: Tables, setup: Setup) -> list[dict]:
    pairs = [tuple(sorted((model, base))) for model, base in finetuned_from(setup.models).items()]
    return _lower_minus_upper(FINETUNING_UPPER, tables, setup, pairs, "(fine-tuned, base) pairs",
                              "no model is fine-tuned (source: finetune)")


def finetuning_changes_upper_attention(tables: Tables, setup: Setup) -> list[dict]:
    pairs = [tuple(sorted((model, base))) for model, base in finetuned_from(setup.models).items()]
    blocks = None
    if tables.attention is not None and tables.attention_replicates is not None:
        blocks = pair_blocks(Tables(pairs=tables.attention, replicates=tables.attention_replicates))
    if blocks is None:
        return [not_applicable(FINETUNING_UPPER_ATTENTION, "no attention tables (similarity.attention is not set)")]
    return _lower_minus_upper(FINETUNING_UPPER_ATTENTION, tables, setup, pairs, "(fine-tuned, base) pairs",
                              "no model is fine-tuned (source: finetune)", blocks, setup.attention_measure,
                              "no distributed attention CKA among similarity.attention.measures (measure: cka)")


def _listed(model_pairs) -> str:
    return "; ".join(f"{a} vs {b}" for a, b in model_pairs)


NO_CKA = ("no CKA measure is configured (a `measures` entry with measure: cka; report.distance_measure "
          "names the one the claims read)")
NO_PAIRS = "no pair tables"
