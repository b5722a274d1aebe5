"""The names researchers already type for reprsim's measures: the shipped configurations' labels, the standard IDs
of similarity-repository (Cloos et al. 2024, github.com/nacloos/similarity-repository), and the peers' short names
(platonic-rep, anatome, netrep, ReSi) with their parameter names (`topk` for `k`, ...).

One table, :data:`ALIASES`: each name means a registry measure at fixed parameters, the measure the peer means by it;
where the peer's own code computes another number under the name (ReSi's second-order cosine filled with
distances), a note says how reprsim's differs. `reprsim.compare` and the
configuration's `measures:` section both resolve through :func:`resolve_spec`, so the workflow only ever sees
registry names; docs/measures.md prints the table (reprsim.metrics.catalogue), and tests/unit/test_measure_aliases.py
resolves every row and checks that every shipped configuration's label resolves to what that configuration computes.

Torch-free, as the registry.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from reprsim.measure_registry import MEASURES

WHERE = "the alias table: reprsim.aliases() or the measures reference (docs/measures.md, \"Names from other libraries\")"


@dataclass(frozen=True)
class Alias:
    name: str  # as typed; "{param}" stands for a parameter given in the name (mutual_knn-topk={k})
    measure: str  # the registry name
    params: dict = field(default_factory=dict)  # what the name fixes
    source: str = ""
    note: str = ""  # where the peer's own code computes something else under this name

    def pattern(self) -> re.Pattern:
        parts = re.split(r"(\{\w+\})", self.name)
        regex = "".join(f"(?P<{part[1:-1]}>[0-9.eE+-]+)" if part.startswith("{") else re.escape(part)
                        for part in parts)
        return re.compile(regex + r"\Z", re.I)

    def templated(self) -> tuple[str, ...]:
        return tuple(re.findall(r"\{(\w+)\}", self.name))


LINEAR_BIASED = {"kernel": "linear", "estimator": "biased"}
LINEAR_UNBIASED = {"kernel": "linear", "estimator": "unbiased"}
CONFIGS = "reprsim configurations"
SIMREPO = "similarity-repository"

ALIASES: tuple[Alias, ...] = (
    # the shipped configurations' labels (config/*.yaml): what every table and the report print
    Alias("linear_cka", "cka", LINEAR_BIASED, CONFIGS),
    Alias("unbiased_cka", "cka", LINEAR_UNBIASED, f"{CONFIGS}, platonic-rep"),
    Alias("rbf_cka", "cka", {"kernel": "rbf", "estimator": "biased", "threshold": 1.0}, CONFIGS,
          "bandwidth σ = threshold × the median distance between rows"),
    Alias("shape_metric_a05", "shape_metric", {"alpha": 0.5}, CONFIGS),
    # similarity-repository's standard IDs (also accepted with their "measure/<repository>/" prefix)
    Alias("cka-kernel=linear-hsic=gretton-score", "cka", LINEAR_BIASED, SIMREPO),
    Alias("cka-kernel=linear-hsic=song-score", "cka", LINEAR_UNBIASED, SIMREPO),
    Alias("cca-score", "cca", {}, SIMREPO),
    Alias("svcca-var={threshold}-score", "svcca", {}, SIMREPO, "var: the share of variance the kept directions hold"),
    Alias("svcca-dim={pca_dims}-score", "svcca", {"threshold": 1.0}, SIMREPO,
          "CCA on the top dim principal directions of each side"),
    Alias("pwcca-score", "pwcca", {}, SIMREPO,
          "PWCCA is asymmetric: reprsim's rows give each direction (a->b, b->a)"),
    Alias("procrustes-distance=angular", "procrustes", {}, SIMREPO),
    Alias("shape_metric-alpha={alpha}-distance=angular", "shape_metric", {}, SIMREPO),
    *(Alias(f"rsa-rdm={rdm}-compare={outer}", "rsa", {"rdm": rdm, "outer": outer}, SIMREPO)
      for rdm in ("correlation", "cosine", "euclidean") for outer in ("spearman", "pearson")),
    Alias("mutual_knn-topk={k}", "mutual_knn", {}, SIMREPO),
    Alias("cknna-topk={k}", "cknna", {}, SIMREPO),
    Alias("distance_correlation", "dcor", {}, SIMREPO),
    Alias("eigenspace_overlap_score", "eigenspace_overlap", {}, SIMREPO),
    Alias("aligned_cosine_similarity", "aligned_cosine", {}, SIMREPO),
    Alias("jaccard_similarity", "jaccard_knn", {}, SIMREPO),
    Alias("second_order_cosine_similarity", "second_order_cosine", {}, SIMREPO,
          "ReSi's code (which similarity-repository wraps) fills the vectors with distances, reprsim with cosine "
          "similarities"),
    Alias("orthogonal_angular_shape_metric_centered", "procrustes", {}, SIMREPO),
    # platonic-rep (Huh et al. 2024, metrics.py) names cka, unbiased_cka (above), mutual_knn and cknna as reprsim
    # does, with topk for k (the parameter aliases below)
    # anatome (Hayase)
    Alias("lincka", "cka", LINEAR_BIASED, "anatome"),
    # netrep (Williams et al. 2021): LinearMetric(alpha) with the angular score
    Alias("LinearMetric", "shape_metric", {}, "netrep", "netrep's default alpha is 1 (reprsim's too); "
          "score_method='angular'"),
    # ReSi's class names (Klabunde et al. 2024)
    Alias("OrthogonalAngularShapeMetricCentered", "procrustes", {}, "ReSi"),
    Alias("ProcrustesSizeAndShapeDistance", "procrustes_size_shape", {}, "ReSi"),
    Alias("AlignedCosineSimilarity", "aligned_cosine", {}, "ReSi"),
    Alias("JaccardSimilarity", "jaccard_knn", {}, "ReSi"),
    Alias("RankSimilarity", "rank_similarity", {}, "ReSi"),
    Alias("SecondOrderCosineSimilarity", "second_order_cosine", {}, "ReSi",
          "ReSi's code fills the vectors with distances, reprsim with cosine similarities"),
    Alias("EigenspaceOverlapScore", "eigenspace_overlap", {}, "ReSi"),
    Alias("DistanceCorrelation", "dcor", {}, "ReSi"),
    Alias("RSMNormDifference", "rsm_norm_difference", {}, "ReSi"),
    Alias("UniformityDifference", "uniformity_difference", {}, "ReSi",
          "ReSi's code uses the raw rows; reprsim puts them on the unit sphere"),
)


@dataclass(frozen=True)
class ParameterAlias:
    name: str  # the peer's parameter
    param: str  # reprsim's
    measures: tuple[str, ...]
    source: str
    values: dict | None = None  # the peer's value -> reprsim's (None: the same value)


PARAMETER_ALIASES: tuple[ParameterAlias, ...] = (
    ParameterAlias("topk", "k", ("mutual_knn", "cknna", "jaccard_knn", "second_order_cosine", "rank_similarity"),
                   "platonic-rep, similarity-repository"),
    ParameterAlias("unbiased", "estimator", ("cka",), "platonic-rep", {True: "unbiased", False: "biased"}),
    ParameterAlias("kernel_metric", "kernel", ("cka",), "platonic-rep", {"ip": "linear", "rbf": "rbf"}),
    ParameterAlias("var", "threshold", ("svcca",), "similarity-repository"),
    ParameterAlias("dim", "pca_dims", ("svcca", "cca", "pwcca", "mixedsim"), "similarity-repository"),
    ParameterAlias("compare", "outer", ("rsa",), "similarity-repository"),
    ParameterAlias("method", "outer", ("rsa",), "rsatoolbox", {"spearman": "spearman",
                                                                                   "corr": "pearson"}),
)


class UnknownMeasure(ValueError):
    """A measure name neither the registry nor the alias table knows; the message lists the close names."""


def names() -> list[str]:
    """Every name a measure can be given by: the registry's and the alias table's."""
    return sorted({*MEASURES, *(alias.name for alias in ALIASES)})


def _number(text: str):
    value = float(text)
    return int(value) if value.is_integer() and re.fullmatch(r"[0-9]+", text) else value


def _strip_repository(name: str) -> str:
    """similarity-repository's full ID, measure/<repository>/<name>, as its name."""
    match = re.fullmatch(r"measure/[\w.-]+/(.+)", name)
    return match.group(1) if match else name


def find(name: str) -> tuple[str, dict, Alias | None]:
    """(registry name, parameters the name fixes, the alias used or None) for a measure name; UnknownMeasure
    with the close names otherwise. A registry name is itself; an alias is matched exactly, then by its
    template, then regardless of case."""
    if not isinstance(name, str):
        raise UnknownMeasure(f"a measure name must be a string; got {name!r}")
    if name in MEASURES:
        return name, {}, None
    short = _strip_repository(name)
    for alias in ALIASES:
        match = alias.pattern().match(short) if alias.measure in MEASURES else None
        if match is None:
            continue
        given = {param: _number(match.group(param)) for param in alias.templated()}
        return alias.measure, {**alias.params, **given}, alias
    folded = {registered.lower(): registered for registered in MEASURES}
    if short.lower() in folded:
        return folded[short.lower()], {}, None
    close = difflib.get_close_matches(short, names(), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise UnknownMeasure(f"unknown measure {name!r}{hint}; the names reprsim knows: reprsim.measures() and {WHERE}")


def _translated(params: dict, measure: str, where: str) -> tuple[dict, list[str]]:
    """`params` with the peers' parameter names in reprsim's, and the problems (a name given both ways)."""
    out, problems = {}, []
    by_name = {(alias.name, m): alias for alias in PARAMETER_ALIASES for m in alias.measures}
    own = MEASURES[measure].params
    for key, value in params.items():
        alias = by_name.get((key, measure))
        if alias is None or key in own:
            out[key] = value
            continue
        if alias.param in params:
            problems.append(f"key '{where}.params.{key}': {alias.source}'s name of {alias.param!r}, which is "
                            f"given too; they are the same parameter")
            continue
        if alias.values is not None:
            if value not in alias.values:
                problems.append(f"key '{where}.params.{key}': {value!r} has no counterpart in reprsim's "
                                f"{alias.param!r} (accepted: {', '.join(map(repr, alias.values))})")
                continue
            value = alias.values[value]
        out[alias.param] = value
    return out, problems


def resolve_spec(spec: dict, where: str = "measures") -> tuple[dict, list[str]]:
    """A `measures:` entry ({measure, params, ...}) with a registry name and reprsim's parameter names, and the
    problems found (an unknown name with its close names, a parameter that contradicts what the name fixes).
    The spec's other keys pass through; a spec without problems is what the workflow computes."""
    if not isinstance(spec, dict) or not isinstance(spec.get("measure"), str):
        return spec, []  # the schema names what is missing or of the wrong type
    try:
        measure, fixed, alias = find(spec["measure"])
    except UnknownMeasure as error:
        return spec, [f"key '{where}.measure': {error}"]
    given = spec.get("params") or {}
    if not isinstance(given, dict):
        return spec, []  # the schema names a params that is not a mapping
    translated, problems = _translated(given, measure, where)
    for key, value in fixed.items():
        if key in translated and translated[key] != value:
            problems.append(f"key '{where}.params.{key}': {translated[key]!r} contradicts the measure's name "
                            f"{spec['measure']!r}, which means {key} = {value!r} (use measure: {measure} with the "
                            f"parameters you want)")
    resolved = {**spec, "measure": measure}
    if fixed or translated or "params" in spec:
        resolved["params"] = {**fixed, **translated}
    return resolved, problems


def resolve_section(measures) -> list[str]:
    """Resolve a configuration's `measures:` section in place (label -> spec); the problems found."""
    problems = []
    if not isinstance(measures, dict):
        return problems
    for label, spec in measures.items():
        resolved, found = resolve_spec(spec, f"measures.{label}")
        problems += found
        if not found and isinstance(spec, dict) and resolved is not spec:
            spec.clear()
            spec.update(resolved)
    return problems


def table() -> list[dict]:
    """The alias table, a dict per name: name, measure, params, source, note (docs/measures.md prints it)."""
    rows = [{"name": alias.name, "measure": alias.measure, "params": dict(alias.params), "source": alias.source,
             "note": alias.note} for alias in ALIASES if alias.measure in MEASURES]
    rows += [{"name": f"{alias.name}= (parameter)", "measure": ", ".join(alias.measures),
              "params": {alias.param: "…" if alias.values is None else dict(alias.values)}, "source": alias.source,
              "note": f"the parameter {alias.param!r}"} for alias in PARAMETER_ALIASES]
    return rows
