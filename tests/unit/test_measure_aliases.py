"""The names researchers type (reprsim.measure_aliases): every row of the alias table resolves to the measure and
parameters it states and computes through reprsim.compare; the shipped configurations' labels resolve to what those
configurations compute; an unknown name lists the close ones and says where the table is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import reprsim
from reprsim.config import load_yaml, measures_errors, validate_config
from reprsim.measure_aliases import ALIASES, PARAMETER_ALIASES, find, resolve_spec
from reprsim.measure_registry import MEASURES

REPO = Path(__file__).resolve().parents[2]
# a value for each templated parameter, as a user would type it in the name
TYPED = {"k": "5", "threshold": "0.95", "pca_dims": "3", "alpha": "0.5"}


def _typed(name: str) -> tuple[str, dict]:
    given = {}
    for param, text in TYPED.items():
        if "{" + param + "}" in name:
            name = name.replace("{" + param + "}", text)
            given[param] = float(text) if "." in text else int(text)
    return name, given


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6))
    return X, X @ np.linalg.qr(rng.normal(size=(6, 6)))[0] + 0.5 * rng.normal(size=(40, 6))


@pytest.mark.parametrize("alias", [a for a in ALIASES if a.measure in MEASURES], ids=lambda a: a.name)
def test_every_alias_resolves_to_its_row_and_computes(alias, arrays):
    typed, given = _typed(alias.name)
    assert "{" not in typed, f"a templated parameter of {alias.name} has no test value"
    measure, params, _ = find(typed)
    assert (measure, params) == (alias.measure, {**alias.params, **given})
    # with similarity-repository's full ID and in another case as well
    assert find(f"measure/somerepo/{typed}")[:2] == (measure, params)
    assert find(typed.upper())[:2] == (measure, params)
    assert measures_errors({"label": {"measure": typed}}) == []
    X, Y = arrays
    table = reprsim.compare(X, Y, {"label": typed}, permutations=3, resamples=3)
    direct = reprsim.compare(X, Y, {"label": {"measure": measure, "params": params}}, permutations=3, resamples=3)
    np.testing.assert_array_equal(table["value"].to_numpy(), direct["value"].to_numpy())
    # typed in a list, the name is its own label, '=' of similarity-repository's IDs included
    listed = reprsim.compare(X, Y, [typed], permutations=3, resamples=3)
    assert set(listed["measure"]) == {typed}
    np.testing.assert_array_equal(listed["value"].to_numpy(), direct["value"].to_numpy())


def test_linear_cka_is_cka(arrays):
    X, Y = arrays
    by_label = reprsim.compare(X, Y, measures=["linear_cka"], permutations=10, resamples=10)
    by_name = reprsim.compare(X, Y, measures=["cka"], permutations=10, resamples=10)
    for column in ("value", "null_mean", "null_p", "ci_low", "ci_high"):
        np.testing.assert_array_equal(by_label[column].to_numpy(), by_name[column].to_numpy())
    assert by_label["measure"].tolist() == ["linear_cka"]


def test_parameter_aliases_translate_names_and_values():
    for alias in PARAMETER_ALIASES:
        for measure in alias.measures:
            if measure not in MEASURES:
                continue
            value = next(iter(alias.values)) if alias.values else MEASURES[measure].params.get(alias.param, 3)
            resolved, problems = resolve_spec({"measure": measure, "params": {alias.name: value}})
            assert problems == [], (alias, measure, problems)
            assert resolved["params"] == {alias.param: alias.values[value] if alias.values else value}
    spec, problems = resolve_spec({"measure": "mutual_knn", "params": {"topk": 5, "k": 5}})
    assert problems and "given too" in problems[0]
    spec, problems = resolve_spec({"measure": "cka", "params": {"kernel_metric": "laplace"}})
    assert problems and "'ip'" in problems[0]


def test_a_parameter_that_contradicts_the_name_is_refused():
    problems = measures_errors({"u": {"measure": "unbiased_cka", "params": {"estimator": "biased"}}})
    assert len(problems) == 1 and "contradicts the measure's name 'unbiased_cka'" in problems[0]


def test_an_unknown_name_lists_close_names_and_the_table():
    with pytest.raises(ValueError) as raised:
        reprsim.compare(np.eye(5), np.eye(5), ["lin_cka"])
    message = str(raised.value)
    assert "'linear_cka'" in message and "reprsim.aliases()" in message and "docs/measures.md" in message
    with pytest.raises(ValueError, match=r"key 'measures\.mutual_knn-topk=0\.params\.k' is 0; must be ≥ 1"):
        reprsim.compare(np.eye(5), np.eye(5), ["mutual_knn-topk=0"])  # a listed name's problem names it as typed
    problems = measures_errors({"x": {"measure": "mutual_nn"}})
    assert len(problems) == 1 and "'mutual_knn'" in problems[0]  # one message, not also the schema's enum


def _shipped_configs():
    return sorted([*REPO.glob("config/*.yaml"), *REPO.glob("config/examples/*.yaml")])


def test_every_shipped_label_resolves_to_what_its_configuration_computes():
    """A label of a shipped configuration typed as a measure name means that configuration's measure, with every
    parameter the alias fixes as the configuration sets it (the tables and the report print these labels)."""
    seen = 0
    for path in _shipped_configs():
        for label, spec in (load_yaml(path).get("measures") or {}).items():
            if label in MEASURES or spec.get("conditioning"):
                continue
            try:
                measure, params, _ = find(label)
            except ValueError:
                continue  # a label of a study's own (svcca64, ...), not a name the configurations share
            assert measure == spec["measure"], (path.name, label)
            given = {**MEASURES[measure].params, **(spec.get("params") or {})}
            assert all(given.get(k) == v for k, v in params.items()), (path.name, label, params, given)
            seen += 1
    assert seen >= 10


def test_a_configuration_may_name_a_measure_by_its_alias():
    config = load_yaml(REPO / "config" / "config.yaml")
    config["measures"]["linear_cka"] = {"measure": "lincka"}
    config["measures"]["knn5"] = {"measure": "mutual_knn-topk=5"}
    validate_config(config, model_configs=False)
    assert config["measures"]["knn5"]["measure"] == "mutual_knn" and config["measures"]["knn5"]["params"] == {"k": 5}
    assert config["measures"]["linear_cka"]["measure"] == "cka"
    assert config["measures"]["linear_cka"]["params"] == {"kernel": "linear", "estimator": "biased"}


def test_the_table_is_in_the_measures_reference():
    from reprsim.metrics.catalogue import markdown

    page = markdown()
    assert "## Names from other libraries" in page
    assert all(f"`{alias.name}`" in page for alias in ALIASES if alias.measure in MEASURES)
    assert len(reprsim.aliases()) == sum(a.measure in MEASURES for a in ALIASES) + len(PARAMETER_ALIASES)
