"""Each measure's sense of similarity follows from what the registry declares (its invariances are property-tested
in test_measure_registry.py): the largest of the nested groups permutation ⊂ rotation ⊂ invertible linear map it is
invariant to, unless its family reads neighbourhoods or distance ranks only, and none for summary statistics."""

from __future__ import annotations

import pytest
from conftest import REPO

from reprsim.config import load_yaml
from reprsim.design.senses import SENSES, sense_of, senses_of
from reprsim.measure_registry import MEASURES


@pytest.mark.parametrize("name", list(MEASURES))
def test_every_measure_answers_in_the_sense_its_declarations_give(name):
    spec = MEASURES[name]
    declared, sense = spec.declared(), sense_of(name)
    if not spec.correspondence:
        assert sense is None  # each cloud's summary: no row correspondence, no sense of "the same"
    elif spec.family == "neighbourhood":
        assert sense == "neighbourhoods"
    elif sense == "ranks":
        assert spec.family == "RSM" and spec.params.get("outer") in ("spearman", "kendall")
    elif sense == "linear":
        assert "IL" in declared
    elif sense == "geometry":
        assert "OT" in declared and "IL" not in declared
    else:
        assert sense == "units" and "PU" in declared and "OT" not in declared
    assert sense is None or sense in SENSES


def test_the_sense_follows_the_params_that_change_the_invariances():
    assert sense_of("svcca") == "geometry"  # the variance cut depends on the basis's scales
    assert sense_of("svcca", {"threshold": 1.0}) == "linear"  # no cut: CCA
    assert sense_of("shape_metric", {"alpha": 1.0}) == "geometry"  # Procrustes
    assert sense_of("shape_metric", {"alpha": 0.0}) == "linear"  # CCA's whitening
    assert sense_of("rsa") == "ranks" and sense_of("rsa", {"outer": "pearson"}) == "units"  # the RDM centres rows
    assert sense_of("pwcca") == "units" and sense_of("neuronsim") == "units"
    assert sense_of("cka") == "geometry" and sense_of("cca") == "linear" and sense_of("mutual_knn") == "neighbourhoods"


def test_the_default_configuration_measures_three_senses():
    senses = senses_of(load_yaml(REPO / "config" / "config.yaml")["measures"])
    assert senses == {"linear_cka": "geometry", "unbiased_cka": "geometry", "svcca": "geometry", "pwcca": "units",
                      "neuronsim": "units", "mutual_knn": "neighbourhoods"}


def test_an_unknown_measure_is_named():
    with pytest.raises(KeyError, match="unknown measure 'cca2'"):
        sense_of("cca2")


def test_the_guide_lists_every_measure_under_its_sense():
    page = (REPO / "docs" / "analyses" / "universality.md").read_text()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[2].rstrip(" |").split(", ")
            for line in page.splitlines() if line.startswith("| ") and line.count(" | ") == 2}
    for name, spec in MEASURES.items():
        sense = sense_of(name)
        if sense is not None:
            assert spec.label in rows[sense], (name, sense)
    listed = sum(len(rows[s]) for s in SENSES if s != "function")
    assert listed == sum(sense_of(n) is not None for n in MEASURES) and rows["function"] == ["stitching"]
