"""Every similarity measure reprsim computes, with the properties it declares (docs/measures.md is generated
from this table: `reprsim measures --markdown`; tests/unit/test_measure_registry.py checks each declaration).

A measure declares: similarity or distance, its range and its value on identical inputs, symmetry, the
invariances it claims among the five below (derived from the formula as reprsim computes it, at the given
params, not copied from ReSi's class flags, github.com/mklabunde/resi, some of which the algebra contradicts), whether it uses the row
correspondence at all (the statistics measures compare each point cloud's summary, so permuting rows changes
nothing and their permutation null is the value itself), the rows it needs, its cost, and its reference.

Invariances are of one argument at a time (the other held fixed); an asymmetric measure declares those that hold
on both sides (linear regression's predictor is invariant to invertible maps, its target is not: IL undeclared).

Two kinds of input (a measure's `inputs`): MEASURES take activations, (n, d) matrices whose rows are the same inputs
on both sides; they are what `similarity.measures`, `reprsim.compare` and the pair engine accept. ATTENTION_MEASURES
(family "attention", Wu et al. 2020) take attention maps, one (heads, t, t) array per sentence
(reprsim.metrics.attention), and only `similarity.attention` configures them (reprsim.stages.compare.attention); their
invariances are of the maps (ATTENTION_INVARIANCES). REGISTRY holds both.

Torch-free: the CLI, the config check and the docs read it without loading the measures.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

INVARIANCES = {
    "PU": "permutation of units (X → XP)",
    "OT": "orthogonal transform (X → XQ)",
    "IS": "isotropic scaling (X → sX, s > 0)",
    "IL": "invertible linear map (X → XA)",
    "TR": "translation (X → X + 1bᵀ)",
}
ALL = frozenset(INVARIANCES)  # of activation measures; the attention measures' are ATTENTION_INVARIANCES
# Transforms of one side's attention maps A = [A_i (H, t_i, t_i)] that leave them maps (rows distributions)
ATTENTION_INVARIANCES = {
    "PH": "permutation of heads (A_i → A_i[π], one π for every sentence)",
    "MH": "invertible mixing of heads (A_i[h] → Σ_g M_hg A_i[g], M row-stochastic and invertible)",
}
# what a measure compares (Measure.inputs)
ACTIVATIONS, ATTENTION_MAPS = "activations", "attention maps"
# families in the order the report shows them; the attention measures' last
FAMILIES = ("CKA", "CCA family", "RSM", "alignment", "neuron-level", "neighbourhood", "statistics", "attention")
COSTS_FILE = Path(__file__).with_name("metrics") / "measure_costs.json"  # written by benchmarks/measure_costs.py


def _fixed(*names: str) -> Callable[[dict], frozenset]:
    held = frozenset(names)
    return lambda params: held


@dataclass(frozen=True)
class Measure:
    name: str
    label: str  # how figures and pages name it
    family: str
    # "module:attribute" of the (Xs, Ys, **params) -> ((L1, L2), meta) layer function; of an attention measure, the
    # (A, B, config_name, **params) -> Result function of reprsim.metrics.attention
    function: str
    kind: str  # similarity | distance
    range: tuple[float, float]
    identical: float  # the value on identical inputs (maximum similarity or zero distance)
    symmetric: bool
    invariances: Callable[[dict], frozenset]
    params: dict  # name -> default
    rows: str  # what n the measure needs, in words
    cost: str  # per layer pair (per layer where said), O() terms
    reference: str
    correspondence: bool = True  # False: compares each cloud's statistic; rows may be permuted independently
    n_by_n: bool = False  # works on n × n matrices (memory grows with n²)
    rows_per_dimension: float | None = None  # needs n > rows_per_dimension · d (d: the dimensions compared; None: any n)
    notes: str = ""
    inputs: str = ACTIVATIONS  # ACTIVATIONS or ATTENTION_MAPS: what the measure compares
    config_name: str = ""  # an attention measure: its name under similarity.attention's `measure:` (pearson, ..., cka)
    # relative cost of one evaluation for n rows, width d, L1 × L2 layers (benchmarks/measure_costs.py scales the
    # seconds it measured at the default's shape to other shapes by it)
    work: Callable[[int, int, int, int], float] = field(kw_only=True)

    def load(self) -> Callable:
        module, attribute = self.function.split(":")
        return getattr(importlib.import_module(module), attribute)

    def declared(self, params: dict | None = None) -> frozenset:
        return self.invariances({**self.params, **(params or {})})

    @property
    def vocabulary(self) -> dict[str, str]:
        """The invariances its declaration is drawn from: of activations or of attention maps."""
        return ATTENTION_INVARIANCES if self.inputs == ATTENTION_MAPS else INVARIANCES

    @property
    def head_level(self) -> bool:
        """An attention measure of head pairs, matched by best head (attnsim); else a measure of all heads at once."""
        return self.function == _ATTNSIM


def _shape_invariances(params: dict) -> frozenset:
    alpha = float(params.get("alpha", 1.0))
    if alpha == 0.0:
        return ALL
    return frozenset({"PU", "OT", "TR"} | ({"IS"} if alpha == 1.0 else set()))


def _svcca_invariances(params: dict) -> frozenset:
    full = float(params.get("threshold", 0.99)) >= 1.0 and params.get("pca_dims") is None
    return ALL if full else frozenset({"PU", "OT", "IS", "TR"})


def _cca_invariances(params: dict) -> frozenset:
    return ALL if params.get("pca_dims") is None else frozenset({"PU", "OT", "IS", "TR"})


def _gulp_invariances(params: dict) -> frozenset:
    return ALL if float(params.get("lam", 0.0)) == 0.0 else frozenset({"PU", "OT", "IS", "TR"})


def _soft_matching_invariances(params: dict) -> frozenset:
    return frozenset({"PU", "TR", "IS"} if params.get("normalize", False) else {"PU", "TR"})


def _rsa_invariances(params: dict) -> frozenset:
    rdm = params.get("rdm", "correlation")
    if rdm == "euclidean":  # distances scale with X, and both outer correlations ignore a common scale
        return frozenset({"PU", "OT", "IS", "TR"})
    if rdm == "cosine":
        return frozenset({"PU", "OT", "IS"})
    return frozenset({"PU", "IS"})  # correlation between rows: a shift 1bᵀ changes each row's own centring


def _rsm_norm_invariances(params: dict) -> frozenset:
    return frozenset({"PU", "OT", "TR"} if params.get("rsm", "euclidean") == "euclidean" else {"PU", "OT"})


def _nn(n, d, a, b):  # n × n per layer, then per layer pair
    return (a + b) * n * n * d + a * b * n * n


def _neighbour_lists(n, d, a, b):  # n × n similarities per layer, then k = 10 overlaps per row and layer pair
    return (a + b) * n * n * d + a * b * n * 10


def _basis_then_products(n, d, a, b):  # an SVD per layer, then one n × d × d product per layer pair
    return (a + b) * n * d * d + a * b * n * d * d


def _basis_then_decompositions(n, d, a, b):  # an SVD per layer, then a product and a d³ decomposition per pair
    return (a + b) * n * d * d + a * b * (n * d * d + d ** 3)


def _linear(n, d, a, b):  # one statistic per layer
    return (a + b) * n * d


def _cross(n, d, a, b):  # one d × d cross product per layer pair, then a d³ decomposition
    return a * b * (n * d * d + d ** 3)


_MEASURES = [
    # ---- CKA
    Measure("cka", "CKA", "CKA", "reprsim.metrics.cka:cka_layers", "similarity", (0.0, 1.0), 1.0, True,
            _fixed("PU", "OT", "IS", "TR"), {"kernel": "linear", "estimator": "biased", "threshold": 1.0},
            "any n (the biased estimator is inflated at small n/d)", "O(n²d) per layer (Grams), O(n²) per layer pair",
            "Kornblith et al. 2019; unbiased HSIC: Song et al. 2012", work=_nn,
            notes="RBF kernel: the bandwidth is a multiple of the median distance, so IS still holds; unbiased "
                  "estimator can go slightly below 0"),
    Measure("cka_minibatch", "minibatch CKA", "CKA", "reprsim.metrics.api:cka_minibatch_layers", "similarity", (-1.0, 1.0), 1.0, True,
            _fixed("PU", "OT", "IS", "TR"), {"batch_size": 1024, "kernel": "linear", "threshold": 1.0},
            "batch_size ≥ 4 rows per batch", "O(n·b·d) per layer, O(n·b) per layer pair",
            "Nguyen, Raghu & Kornblith 2021", work=lambda n, d, a, b: (a + b) * n * 1024 * d + a * b * n * 1024),
    # ---- CCA family
    Measure("cca", "mean CCA", "CCA family", "reprsim.metrics.api:cca_layers", "similarity", (0.0, 1.0), 1.0, True,
            _cca_invariances, {"pca_dims": None}, "n − 1 > d_x + d_y (else pca_dims)",
            "O(nd²) per layer (SVD), O(nd² + d³) per layer pair", "Hotelling 1936; Raghu et al. 2017",
            rows_per_dimension=2.0, work=_basis_then_decompositions),
    Measure("svcca", "SVCCA", "CCA family", "reprsim.metrics.api:svcca_layers", "similarity", (0.0, 1.0), 1.0, True,
            _svcca_invariances, {"threshold": 0.99, "pca_dims": None}, "n − 1 > k_x + k_y (kept directions)",
            "O(nd²) per layer, O(nk² + k³) per layer pair", "Raghu et al. 2017", rows_per_dimension=2.0,
            work=_basis_then_decompositions,
            notes="the variance cut is not invariant to invertible maps; threshold 1 (no cut) is CCA"),
    Measure("pwcca", "PWCCA", "CCA family", "reprsim.metrics.api:pwcca_layers", "similarity", (0.0, 1.0), 1.0,
            False, _fixed("PU", "IS", "TR"), {"direction": "min", "pca_dims": None}, "n − 1 > k_x + k_y",
            "O(nd²) per layer, O(nk² + k³ + k²d) per layer pair", "Morcos, Raghu & Bengio 2018",
            rows_per_dimension=2.0, work=lambda n, d, a, b: (a + b) * n * d * d + a * b * (n * d * d + 8 * d ** 3),
            notes="weights from the neurons' projections: a rotation of the neurons changes them"),
    # ---- alignment
    Measure("procrustes", "Procrustes (angular)", "alignment", "reprsim.metrics.procrustes:procrustes_layers",
            "distance", (0.0, math.pi / 2), 0.0, True, _fixed("PU", "OT", "IS", "TR"), {}, "any n",
            "O(nd²) per layer pair + O(d³) singular values", "Williams et al. 2021 (α = 1); Ding et al. 2021",
            work=_cross, notes="the shape metric at α = 1"),
    Measure("shape_metric", "shape metric", "alignment", "reprsim.metrics.alignment:shape_metric_layers", "distance",
            (0.0, math.pi / 2), 0.0, True, _shape_invariances, {"alpha": 1.0},
            "any n at α = 1; n − 1 > d for α < 1 (whitening)", "O(nd² + d³) per layer, O(nd² + d³) per layer pair",
            "Williams, Kunz, Kornblith & Linderman 2021", work=lambda n, d, a, b: (a + b) * (n * d * d + d ** 3)
            + _cross(n, d, a, b), notes="α = 0 is full whitening (mean canonical correlation); for 0 < α < 1 the "
            "mix of identity and whitening depends on the data's scale, so IS fails"),
    Measure("procrustes_size_shape", "Procrustes size-and-shape", "alignment",
            "reprsim.metrics.alignment:procrustes_size_shape_layers", "distance", (0.0, math.inf), 0.0, True,
            _fixed("PU", "OT", "TR"), {}, "any n", "O(nd²) per layer pair + O(d³)", "Williams et al. 2021; "
            "Dryden & Mardia 2016", work=_cross),
    Measure("permutation_procrustes", "permutation Procrustes", "alignment",
            "reprsim.metrics.alignment:permutation_procrustes_layers", "distance", (0.0, math.inf), 0.0, True,
            _fixed("PU"), {}, "any n", "O(nd²) per layer pair + O(d³) assignment", "Williams et al. 2021",
            work=_cross),
    Measure("aligned_cosine", "aligned cosine", "alignment", "reprsim.metrics.alignment:aligned_cosine_layers",
            "similarity", (-1.0, 1.0), 1.0, True, _fixed("PU", "OT", "IS"), {}, "any n",
            "O(nd²) per layer pair + O(d³) SVD", "Hamilton, Leskovec & Jurafsky 2016", work=_cross),
    Measure("linear_regression", "linear regression R²", "alignment",
            "reprsim.metrics.alignment:linear_regression_layers", "similarity", (0.0, 1.0), 1.0, False,
            _fixed("PU", "OT", "IS", "TR"), {"ridge": 0.0}, "n − 1 > d of the predictor (ridge 0)",
            "O(nd²) per layer (QR), O(nd²) per layer pair", "Li et al. 2016; Kornblith et al. 2019",
            rows_per_dimension=1.0, work=_basis_then_products,
            notes="a → b: a's layer predicts b's (the target); the predictor side alone is invariant to IL"),
    Measure("hard_correlation_match", "hard correlation match", "neuron-level",
            "reprsim.metrics.alignment:hard_correlation_match_layers", "similarity", (-1.0, 1.0), 1.0, True,
            _fixed("PU", "IS", "TR"), {}, "any n", "O(nd²) per layer pair + O(d³) assignment", "Li et al. 2016",
            work=_cross, notes="signed correlations, one-to-one; also invariant to per-unit positive scaling"),
    Measure("soft_matching", "soft matching", "neuron-level", "reprsim.metrics.alignment:soft_matching_layers",
            "distance", (0.0, math.inf), 0.0, True, _soft_matching_invariances, {"normalize": False}, "any n",
            "O(nd²) per layer pair + exact transport O(d³ log d)", "Khosla & Williams 2023", work=_cross,
            notes="W₂ between the units' empirical distributions; normalize: units scaled to unit norm (IS)"),
    # ---- neuron-level (Wu et al.)
    Measure("neuronsim", "neuronsim", "neuron-level", "reprsim.metrics.neuron:neuronsim_layers", "similarity",
            (0.0, 1.0), 1.0, False, _fixed("PU", "IS", "TR"), {}, "any n",
            "O(nd²) per layer pair", "Wu et al. 2020", work=lambda n, d, a, b: a * b * n * d * d,
            notes="|Pearson r|: also invariant to per-unit sign flips and scaling"),
    Measure("mixedsim", "mixedsim", "neuron-level", "reprsim.metrics.neuron:mixedsim_layers", "similarity",
            (0.0, 1.0), 1.0, False, _fixed("PU", "IS", "TR"), {"pca_dims": None}, "n > d_y (else pca_dims)",
            "O(nd²) per layer, O(nd²) per layer pair", "Wu et al. 2020", rows_per_dimension=1.0,
            work=_basis_then_products,
            notes="X's neurons one at a time (not OT); Y's span only (IL on Y's side)"),
    # ---- RSM based
    Measure("rsa", "RSA", "RSM", "reprsim.metrics.rsm:rsa_layers", "similarity", (-1.0, 1.0), 1.0, True,
            _rsa_invariances, {"rdm": "correlation", "outer": "spearman"}, "any n", "O(n²d + n² log n) per layer, "
            "O(n²) per layer pair", "Kriegeskorte, Mur & Bandettini 2008", n_by_n=True,
            work=lambda n, d, a, b: (a + b) * (n * n * d + n * n * math.log2(n)) + a * b * n * n,
            notes="correlation RDM: invariant to per-row scaling and per-row shifts, not to a shift 1bᵀ (ReSi "
                  "declares TR)"),
    Measure("rsm_norm_difference", "RSM norm difference", "RSM", "reprsim.metrics.rsm:rsm_norm_difference_layers",
            "distance", (0.0, math.inf), 0.0, True, _rsm_norm_invariances, {"rsm": "euclidean", "norm": "frobenius"},
            "any n", "O(n²d) per layer, O(n²) per layer pair (spectral: O(n³))", "Shahbazi et al. 2021; Yin & Shen "
            "2018", n_by_n=True, work=_nn),
    Measure("dcor", "distance correlation", "RSM", "reprsim.metrics.rsm:dcor_layers", "similarity", (0.0, 1.0), 1.0,
            True, _fixed("PU", "OT", "IS", "TR"), {}, "any n", "O(n²d) per layer, O(n²) per layer pair",
            "Székely, Rizzo & Bakirov 2007", n_by_n=True, work=_nn,
            notes="V-statistic; dCor, not dCor² (ReSi declares IS wrongly as absent)"),
    Measure("gulp", "GULP", "RSM", "reprsim.metrics.rsm:gulp_layers", "distance", (0.0, math.inf), 0.0, True,
            _gulp_invariances, {"lam": 0.0}, "n − 1 > d (λ = 0)", "O(nd² + d³) per layer, O(nd²) per layer pair",
            "Boix-Adserà, Lawrence, Stepaniants & Rigollet 2022", rows_per_dimension=1.0,
            work=lambda n, d, a, b: (a + b) * (n * d * d + d ** 3) + a * b * n * d * d,
            notes="the distance d_λ (square root of the plug-in d̂²_λ that ReSi returns)"),
    Measure("eigenspace_overlap", "eigenspace overlap", "RSM", "reprsim.metrics.rsm:eigenspace_overlap_layers",
            "similarity", (0.0, 1.0), 1.0, True, _fixed("PU", "OT", "IS", "IL"), {}, "n > d",
            "O(nd²) per layer (SVD), O(nd²) per layer pair", "May, Zhang, Dao & Ré 2019", rows_per_dimension=1.0,
            work=_basis_then_products,
            notes="uncentred column spaces, normalised by max(d_x, d_y)"),
    # ---- neighbourhood
    Measure("mutual_knn", "mutual k-NN", "neighbourhood", "reprsim.metrics.knn:mutual_knn_layers", "similarity",
            (0.0, 1.0), 1.0, True, _fixed("PU", "OT", "IS"), {"k": 10}, "n > k + 1",
            "O(n²d) per layer, O(nk) per layer pair", "Huh, Cheung, Wang & Isola 2024", n_by_n=True,
            work=_neighbour_lists),
    Measure("cknna", "CKNNA", "neighbourhood", "reprsim.metrics.cknna:cknna_layers", "similarity",
            (-math.inf, math.inf), 1.0, False, _fixed("PU", "OT", "IS"), {"k": 10}, "n > k ≥ 2, n ≥ 4",
            "O(n²d) per layer, O(nk log nk) per layer pair", "Huh, Cheung, Wang & Isola 2024 (platonic-rep's cknna)",
            n_by_n=True, work=_neighbour_lists,
            notes="unbiased HSIC of the cosine kernels masked to the neighbours both spaces share, over each side's "
                  "own (platonic-rep's defaults unbiased=True, distance_agnostic=False; its biased variant counts a "
                  "row among its own neighbours, and its distance-agnostic one is mutual k-NN's question, so neither "
                  "is offered); no 1e-6 in the denominator; asymmetric through HSIC's 1ᵀAB1 term (~1e-3); not "
                  "bounded by 1 where few neighbour pairs are mutual (hubs); k = n − 1: unbiased linear CKA of the "
                  "unit rows"),
    Measure("jaccard_knn", "Jaccard k-NN", "neighbourhood", "reprsim.metrics.neighbourhood:jaccard_knn_layers",
            "similarity", (0.0, 1.0), 1.0, True, _fixed("PU", "OT", "IS"), {"k": 10}, "n > k + 1",
            "O(n²d) per layer, O(nk) per layer pair", "Schumacher et al. 2021; Klabunde et al. 2023", n_by_n=True,
            work=_neighbour_lists),
    Measure("second_order_cosine", "second-order cosine", "neighbourhood",
            "reprsim.metrics.neighbourhood:second_order_cosine_layers", "similarity", (-1.0, 1.0), 1.0, True,
            _fixed("PU", "OT", "IS"), {"k": 10}, "n > k + 1", "O(n²d) per layer, O(n²) per layer pair",
            "Hamilton, Leskovec & Jurafsky 2016", n_by_n=True, work=_nn,
            notes="vectors of cosine similarities to the union of both neighbour sets (ReSi fills them with distances)"),
    Measure("rank_similarity", "rank similarity", "neighbourhood",
            "reprsim.metrics.neighbourhood:rank_similarity_layers", "similarity", (0.0, 1.0), 1.0, True,
            _fixed("PU", "OT", "IS"), {"k": 10}, "n > k + 1", "O(n²d) per layer, O(nk²) per layer pair",
            "Wang et al. 2020 (TKDE)", n_by_n=True, work=_nn),
    # ---- statistics of each point cloud (no row correspondence)
    Measure("magnitude_difference", "magnitude difference", "statistics",
            "reprsim.metrics.statistics:magnitude_difference_layers", "distance", (0.0, math.inf), 0.0, True,
            _fixed("PU", "OT"), {}, "any n", "O(nd) per layer", "Wang et al. 2020 (TKDE)", correspondence=False,
            work=_linear, notes="norm of the mean row"),
    Measure("concentricity_difference", "concentricity difference", "statistics",
            "reprsim.metrics.statistics:concentricity_difference_layers", "distance", (0.0, 2.0), 0.0, True,
            _fixed("PU", "OT", "IS"), {}, "any n", "O(nd) per layer", "Wang et al. 2020 (TKDE)", correspondence=False,
            work=_linear, notes="mean cosine of the rows to their mean"),
    Measure("uniformity_difference", "uniformity difference", "statistics",
            "reprsim.metrics.statistics:uniformity_difference_layers", "distance", (0.0, math.inf), 0.0, True,
            _fixed("PU", "OT", "IS"), {"t": 2.0}, "any n", "O(n²d) per layer", "Wang & Isola 2020",
            correspondence=False, n_by_n=True, work=lambda n, d, a, b: (a + b) * n * n * d,
            notes="rows on the unit sphere, distinct pairs (ReSi: raw rows, which underflow for hidden states)"),
]
MEASURES: dict[str, Measure] = {m.name: m for m in _MEASURES}


# ---- attention maps (Wu et al. 2020; reprsim.metrics.attention, docs/numerics.md §7a)
_ATTNSIM = "reprsim.metrics.attention:attnsim"
_DISTRIBUTED = "reprsim.metrics.attention:distributed_similarity"
ATTENTION_ROW_TOLERANCE = 1e-3  # |row sum − 1| a map may have: float16-stored maps sum to 1 within ~5e-4
_HEAD_ROWS = "the same sentences and words on both sides (the null re-pairs sentences of equal length)"
_HEAD_COST = "O(H_a·H_b·Σt_i²) per layer pair"


def _head_pairs(n, d, a, b):  # n: Σ t_i² map entries, d: heads; every head of A against every head of B
    return a * b * n * d * d


def _head_level(name: str, label: str, kind: str, value_range: tuple[float, float], identical: float, notes: str
                ) -> Measure:
    """attnsim of one head-level comparison: the mean over A's heads of the best head of B (max for a similarity,
    min for a distance). Best-head matching makes it invariant to permuting either side's heads, and asymmetric."""
    return Measure(f"attn_{name}", label, "attention", _ATTNSIM, kind, value_range, identical, False, _fixed("PH"),
                   {"tol": ATTENTION_ROW_TOLERANCE}, _HEAD_ROWS, _HEAD_COST, "Wu et al. 2020 (§3.4, attnsim)",
                   work=_head_pairs, notes=notes, inputs=ATTENTION_MAPS, config_name=name)


def _distributed(name: str) -> Measure:
    """The activation measure `name` on distributed(A): rows are the word pairs of every sentence, columns the heads.
    Permuting heads permutes its units (PU → PH); mixing heads is an invertible linear map of them (IL → MH)."""
    base = MEASURES[name]

    def invariances(params: dict) -> frozenset:
        declared = base.declared(params)
        return frozenset(({"PH"} if "PU" in declared else set()) | ({"MH"} if "IL" in declared else set()))

    return Measure(f"attn_{name}", f"distributed attention, {base.label}", "attention", _DISTRIBUTED, base.kind,
                   base.range, base.identical, base.symmetric, invariances, dict(base.params),
                   f"{base.rows}, with n = Σt_i² word pairs and d = heads",
                   f"{base.cost}, with n = Σt_i² word pairs and d = heads",
                   f"Wu et al. 2020 (§3.5, distributed attention similarity); {base.reference}",
                   rows_per_dimension=base.rows_per_dimension, n_by_n=base.n_by_n, work=base.work,
                   notes=f"{base.label} of distributed(A): one row per word pair (j, k) of every sentence, one column "
                         f"per head; its parameters and degenerate cases are {name}'s"
                         + (f" ({base.notes})" if base.notes else ""), inputs=ATTENTION_MAPS,
                   config_name=name)


_ATTENTION = [
    _head_level("pearson", "attnsim, Pearson", "similarity", (-1.0, 1.0), 1.0,
                "per word, Pearson ρ of the two heads' rows over the t keys, averaged over the words whose rows are "
                "non-constant on both sides; NaN where a head of A has no such word against any head of B. Wu et "
                "al.'s released code gives ≈ 0.88 on identical maps; reprsim gives 1"),
    _head_level("js", "attnsim, Jensen–Shannon", "distance", (0.0, math.log(2.0)), 0.0,
                "Jensen–Shannon divergence (natural log) of the two heads' rows, averaged over the words"),
    _head_level("frobenius", "attnsim, Frobenius", "distance", (0.0, math.inf), 0.0,
                "‖A_i[h] − B_i[h']‖_F averaged over the sentences; no fixed top (at most √(2t) for sentences of t words)"),
    _distributed("cka"),
    _distributed("svcca"),
    _distributed("pwcca"),
]
ATTENTION_MEASURES: dict[str, Measure] = {m.name: m for m in _ATTENTION}
# by the name similarity.attention's `measure:` gives them (pearson, js, frobenius, cka, svcca, pwcca)
ATTENTION_BY_CONFIG_NAME: dict[str, Measure] = {m.config_name: m for m in _ATTENTION}
REGISTRY: dict[str, Measure] = {**MEASURES, **ATTENTION_MEASURES}  # every measure, activations' first
# How a reader sees a measure: a registry name by its label, and the measure labels of the shipped configurations
# that are not registry names (one CKA measure, two estimators) by these; the report and the recorded run's pages
# both name measures through it.
CONFIG_LABEL_NAMES = {"linear_cka": "linear CKA", "unbiased_cka": "unbiased linear CKA", "rbf_cka": "RBF CKA"}
DISPLAY_NAMES = {**{m.name: m.label for m in _MEASURES}, **CONFIG_LABEL_NAMES}
# The attention measures by their labels: the registry's names (attn_pearson, ..., attn_pwcca) are also the labels the
# shipped configurations give them under similarity.attention.measures (schema.yaml's default: attn_pearson, attn_js,
# attn_frobenius, attn_cka). Kept out of DISPLAY_NAMES, which names the activation measures' labels.
ATTENTION_DISPLAY_NAMES = {m.name: m.label for m in _ATTENTION}

# What reprsim leaves out, and why (docs/measures.md prints it).
LEFT_OUT = {
    "Geometry Score (Khrulkov & Oseledets 2018)": "the reference code (GitHub only, no licence; PyPI's `gs` is an "
        "unrelated package) draws 64 landmarks 1,000 times per cloud and builds a witness complex each time (gudhi): "
        "minutes per layer pair, and a permutation null and an interval multiply that by 60; it ignores the row "
        "correspondence, as the statistics measures do",
    "IMD (Tsitsulin et al. 2020)": "stochastic Lanczos quadrature with 8,000 probe vectors per cloud (ReSi's "
        "setting) is 640 kB of basis per row; it ignores the row correspondence, so its null is its value",
    "RTD (Barannikov et al. 2022)": "needs Vietoris–Rips persistence up to H1 on 1,000-point block matrices (ReSi "
        "runs ripser++ on CUDA and returns NaN without it); ten trials per value make the null and interval "
        "impractical on a CPU",
    "soft correlation match (ReSi)": "neuronsim (Wu et al. 2020) is its one-directional, |r| form; hard correlation "
        "match and soft matching cover the matched forms",
}


def get(name: str) -> Measure:
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; available: {', '.join(sorted(MEASURES))}")
    return MEASURES[name]


@functools.lru_cache(maxsize=1)
def measured_costs() -> dict:
    """Seconds per measure from benchmarks/measure_costs.py ({} before it has run); read once per process
    (`reprsim plan` prices every pair job from it)."""
    return json.loads(COSTS_FILE.read_text()) if COSTS_FILE.exists() else {}
