"""The measures of attention maps in the registry (reprsim.measure_registry.ATTENTION_MEASURES): every declaration
checked as tests/unit/test_measure_registry.py checks the activation measures', on random maps.

- each declared invariance of the maps (ATTENTION_INVARIANCES) holds on either side, each undeclared one fails on
  some input;
- identical maps give the declared value; values lie in the declared range; declared symmetry holds, and an
  asymmetric measure is asymmetric on some input; re-pairing the sentences changes the value (every one uses the
  sentence correspondence);
- they stay apart from the activation measures: not in MEASURES, so not accepted by the configuration's measures,
  reprsim.compare or the pair engine; the attention pair job, the schema, the measures reference and the figures'
  labels read them from the registry.
"""

import math

import numpy as np
import pytest

from reprsim import measure_registry as registry
from reprsim.measure_registry import (ACTIVATIONS, ATTENTION_BY_CONFIG_NAME, ATTENTION_INVARIANCES,
                                      ATTENTION_MAPS, ATTENTION_MEASURES, INVARIANCES, MEASURES)

NAMES = list(ATTENTION_MEASURES)
# every measure at its defaults, and SVCCA without its variance cut (then CCA: invariant to mixing the heads too)
CASES = [(name, {}) for name in NAMES] + [("attn_svcca", {"threshold": 1.0})]
LENGTHS = (3, 3, 4, 4, 4, 5, 5, 6, 6, 3, 5, 4)
TOLERANCE = 1e-9


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _maps(seed: int, heads_a: int = 4, heads_b: int = 4, related: bool = True) -> tuple[list, list]:
    """Two sides' maps of the same sentences: heads from sharp to nearly uniform (so the heads' variances differ, as
    a real layer's do), B's heads a noisy mix of A's (or independent of them)."""
    rng = np.random.default_rng(seed)
    sharp_a = np.linspace(3.0, 0.2, heads_a)[:, None, None]
    mix = rng.normal(size=(heads_b, heads_a))
    A, B = [], []
    for t in LENGTHS:
        logits = rng.normal(size=(heads_a, t, t))
        source = np.einsum("gh,hjk->gjk", mix, logits) if related else rng.normal(size=(heads_b, t, t))
        A.append(_softmax(sharp_a * logits))
        B.append(_softmax(source + 0.7 * rng.normal(size=(heads_b, t, t))))
    return A, B


def _transform(kind: str, maps: list, rng: np.random.Generator) -> list:
    heads = maps[0].shape[0]
    if kind == "PH":
        order = rng.permutation(heads)
        return [m[order] for m in maps]
    if kind == "MH":  # row-stochastic and diagonally dominant: invertible, and the rows stay distributions
        mixing = 0.6 * np.eye(heads) + 0.4 * rng.dirichlet(np.ones(heads), size=heads)
        return [np.einsum("hg,gjk->hjk", mixing, m) for m in maps]
    raise AssertionError(kind)


def _value(name: str, A, B, params: dict | None = None) -> float:
    spec = ATTENTION_MEASURES[name]
    return float(spec.load()(A, B, spec.config_name, **{**spec.params, **(params or {})}).value)


def _changes(name: str, params: dict, kind: str, seed: int) -> list[float]:
    """|value after − value before| with the transform on A, then on B."""
    A, B = _maps(seed)
    rng = np.random.default_rng(100 + seed)
    before = _value(name, A, B, params)
    return [abs(_value(name, _transform(kind, A, rng), B, params) - before),
            abs(_value(name, A, _transform(kind, B, rng), params) - before)]


def _invariance_cases(declared: bool):
    return [(name, params, kind) for name, params in CASES for kind in ATTENTION_INVARIANCES
            if (kind in ATTENTION_MEASURES[name].declared(params)) == declared]


@pytest.mark.parametrize("name,params,kind", _invariance_cases(True))
def test_declared_invariance_holds(name, params, kind):
    for seed in (0, 1):
        A, B = _maps(seed)
        scale = max(1.0, abs(_value(name, A, B, params)))
        assert max(_changes(name, params, kind, seed)) <= 1e-7 * scale, f"{name} is not invariant to {kind}"


@pytest.mark.parametrize("name,params,kind", _invariance_cases(False))
def test_undeclared_invariance_fails_somewhere(name, params, kind):
    assert max(max(_changes(name, params, kind, seed)) for seed in (0, 1, 2)) > 1e-5, \
        f"{name} looks invariant to {kind} ({ATTENTION_INVARIANCES[kind]}), which its registry entry does not declare"


def test_every_invariance_is_tested_both_ways():
    """Each attention invariance is declared by some measure and left undeclared by another, so neither test above
    is empty for it."""
    for kind in ATTENTION_INVARIANCES:
        held = {kind in ATTENTION_MEASURES[name].declared(params) for name, params in CASES}
        assert held == {True, False} or kind == "PH", kind
    assert all("PH" in spec.declared() for spec in ATTENTION_MEASURES.values())  # best-head matching, heads as units


@pytest.mark.parametrize("name", NAMES)
def test_identical_maps_give_the_declared_value(name):
    A, _ = _maps(3)
    assert _value(name, A, A) == pytest.approx(ATTENTION_MEASURES[name].identical, abs=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_values_lie_in_the_declared_range(name):
    low, high = ATTENTION_MEASURES[name].range
    for seed in range(3):
        for related in (True, False):
            A, B = _maps(seed, heads_b=3, related=related)
            value = _value(name, A, B)
            assert low - 1e-9 <= value <= high + 1e-9, f"{name} = {value} outside [{low}, {high}]"


@pytest.mark.parametrize("name", NAMES)
def test_symmetry_is_as_declared(name):
    gaps = []
    for seed in range(3):
        A, B = _maps(seed)
        gaps.append(abs(_value(name, A, B) - _value(name, B, A)))
    if ATTENTION_MEASURES[name].symmetric:
        assert max(gaps) < TOLERANCE
    else:
        assert max(gaps) > 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_every_one_uses_the_sentence_correspondence(name):
    """B's sentences re-paired within equal lengths (the pair job's null) change the value."""
    assert ATTENTION_MEASURES[name].correspondence
    A, B = _maps(4)
    lengths = np.array(LENGTHS)
    order = np.arange(len(B))
    for t in np.unique(lengths):
        group = np.flatnonzero(lengths == t)
        order[group] = np.roll(group, 1)
    assert abs(_value(name, A, [B[i] for i in order]) - _value(name, A, B)) > 1e-6


# ---- apart from the activation measures, read from the registry --------------------------------------------------

def test_the_attention_measures_are_a_family_of_their_own():
    assert registry.FAMILIES[-1] == "attention"
    assert registry.FAMILIES[:-1] == ("CKA", "CCA family", "RSM", "alignment", "neuron-level", "neighbourhood",
                                      "statistics")
    assert not set(ATTENTION_MEASURES) & set(MEASURES)
    assert registry.REGISTRY == {**MEASURES, **ATTENTION_MEASURES}
    assert {spec.inputs for spec in MEASURES.values()} == {ACTIVATIONS}
    assert {spec.family for spec in MEASURES.values()} <= set(registry.FAMILIES[:-1])
    assert not set(ATTENTION_INVARIANCES) & set(INVARIANCES) and registry.ALL == frozenset(INVARIANCES)
    assert list(ATTENTION_BY_CONFIG_NAME) == ["pearson", "js", "frobenius", "cka", "svcca", "pwcca"]
    for name, spec in ATTENTION_MEASURES.items():
        assert spec.family == "attention" and spec.inputs == ATTENTION_MAPS and spec.vocabulary is ATTENTION_INVARIANCES
        assert ATTENTION_BY_CONFIG_NAME[spec.config_name] is spec and name == f"attn_{spec.config_name}"
        assert spec.declared() <= set(ATTENTION_INVARIANCES) and spec.declared({"threshold": 1.0}) <= set(
            ATTENTION_INVARIANCES)
        assert spec.kind in ("similarity", "distance") and spec.reference and spec.cost and spec.rows and spec.label
        assert spec.range[0] <= spec.identical <= spec.range[1]
        assert spec.identical == (spec.range[0] if spec.kind == "distance" else spec.identical)
        assert not math.isnan(spec.work(872, 12, 7, 7))
        if not spec.head_level:  # the activation measure on distributed(A): its kind, symmetry and parameters
            base = MEASURES[spec.config_name]
            assert (spec.kind, spec.symmetric, spec.params, spec.range) == (base.kind, base.symmetric, base.params,
                                                                            base.range)


def test_the_numeric_module_and_the_pair_job_read_the_registry():
    from reprsim.metrics import attention
    from reprsim.stages.compare import attention as job

    assert attention.MEASURES == {n: s.kind for n, s in ATTENTION_BY_CONFIG_NAME.items() if s.head_level}
    assert attention.ROW_TOLERANCE == ATTENTION_MEASURES["attn_pearson"].params["tol"] == 1e-3
    assert job.HEAD_MEASURES == ("pearson", "js", "frobenius")
    assert job.DISTRIBUTED_MEASURES == ("cka", "svcca", "pwcca")
    specs = job._specs({name: {"measure": spec.config_name} for name, spec in ATTENTION_MEASURES.items()})
    for name, made in specs.items():
        spec = ATTENTION_MEASURES[name]
        assert made["kind"] == spec.kind and made["head"] == spec.head_level
        assert made["directions"] == (["symmetric"] if spec.symmetric else ["a->b", "b->a"])
    with pytest.raises(ValueError, match=r"has no parameter\(s\) \['k'\]; allowed: tol"):
        job._specs({"x": {"measure": "js", "params": {"k": 3}}})
    with pytest.raises(ValueError, match="unknown measure 'attn_js'; head level: pearson, js, frobenius"):
        job._specs({"x": {"measure": "attn_js"}})


def test_the_schema_offers_the_registrys_attention_measures():
    from reprsim.config import SCHEMA_PATH, load_yaml

    section = load_yaml(SCHEMA_PATH)["properties"]["similarity"]["properties"]["attention"]["properties"]["measures"]
    assert section["additionalProperties"]["properties"]["measure"]["enum"] == list(ATTENTION_BY_CONFIG_NAME)
    # the default labels are the registry's names of the measures they configure
    assert {label: ATTENTION_MEASURES[label].config_name for label in section["default"]} == \
        {label: spec["measure"] for label, spec in section["default"].items()}


def test_activation_entry_points_refuse_them():
    from conftest import REPO
    from reprsim.config import ConfigError, load_yaml, validate_config
    from reprsim.measure_aliases import UnknownMeasure, find
    from reprsim.metrics import compute
    from reprsim.python_api import InputError, compare

    for name in NAMES:
        with pytest.raises(UnknownMeasure):
            find(name)
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="unknown measure 'attn_cka'"):
        compute("attn_cka", X, X)
    with pytest.raises(InputError):
        compare(X, X, "attn_cka", permutations=2, resamples=2)
    config = load_yaml(REPO / "config" / "config.yaml")
    config["measures"]["attention_cka"] = {"measure": "attn_cka"}
    with pytest.raises(ConfigError, match="unknown measure 'attn_cka'"):
        validate_config(config)


def test_the_reference_lists_them_in_their_own_section():
    from reprsim.metrics import catalogue
    from reprsim.python_api import measures

    page = catalogue.markdown()
    section = page[page.index("\n## attention\n"):]
    assert section.index("\n## attention\n") < section.index("## Names from other libraries")
    for name, spec in ATTENTION_MEASURES.items():
        assert f"| `{name}` | `{spec.config_name}` |" in section
        assert f"| `{name}` |" not in page[:page.index("\n## attention\n")]
    assert "| measure | configured as | kind | range | identical | symmetric | PH | MH | params |" in section
    assert "| `attn_js` | `js` | distance | [0, ln 2] | 0 | no | ✔ | ✘ | tol=0.001 |" in section
    assert f"reprsim computes {len(MEASURES)} measures of activations" in page
    text = catalogue.text_table()
    assert all(f"\n{name} " in text for name in NAMES) and f"{len(MEASURES)} measures;" in text
    assert [spec.name for spec in catalogue.ordered()] == sorted(
        MEASURES, key=lambda n: (registry.FAMILIES.index(MEASURES[n].family), n))
    assert set(measures()["measure"]) == set(MEASURES)


def test_figures_name_them_by_their_registry_labels():
    from reprsim.plotting.drawing import FAMILIES, MEASURE_LABELS

    assert registry.ATTENTION_DISPLAY_NAMES == {name: spec.label for name, spec in ATTENTION_MEASURES.items()}
    assert {name: MEASURE_LABELS[name] for name in NAMES} == registry.ATTENTION_DISPLAY_NAMES
    # the labels figures drew before the registry had them
    assert {name: MEASURE_LABELS[name] for name in ("attn_pearson", "attn_js", "attn_frobenius", "attn_cka")} == {
        "attn_pearson": "attnsim, Pearson", "attn_js": "attnsim, Jensen–Shannon", "attn_frobenius": "attnsim, Frobenius",
        "attn_cka": "distributed attention, CKA"}
    assert not set(NAMES) & set(registry.DISPLAY_NAMES) and not set(NAMES) & set(FAMILIES)
