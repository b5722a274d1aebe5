"""The names one stage writes into a table and another reads (reprsim.tables) are the names the writer uses: the
universality study's verdicts and depth groups, the grounding tests' decisions."""

from __future__ import annotations

import itertools

import numpy as np

from reprsim.stages.grounding import nulls
from reprsim.stages.universality.shares import depth_groups, verdict
from reprsim.tables.grounding import FAIL, PASS, RANKABLE, TOO_FEW
from reprsim.tables.universality import THIRDS, VERDICT_RULES, VERDICTS


def test_every_verdict_the_study_gives_is_named_with_its_rule_and_every_name_occurs():
    bounds = np.linspace(-0.6, 1.6, 23)
    given = {verdict(low, high, 0.2) for low, high in itertools.product(bounds, bounds) if low <= high}
    given.add(verdict(np.nan, 0.5, 0.2))
    assert given == set(VERDICTS) == set(VERDICT_RULES)


def test_the_depth_groups_are_the_thirds_and_single_layers():
    for depth in (1, 2, 6, 12):
        groups = depth_groups(depth)
        thirds = [name for name in groups if not name.startswith("layer ")]
        assert thirds == [t for t in THIRDS if t in thirds] and set(thirds) <= set(THIRDS)
        assert np.array_equal(np.sort(np.concatenate([groups[t] for t in thirds])), np.arange(depth + 1))
    assert list(depth_groups(12))[:3] == list(THIRDS)


def test_the_grounding_decisions_are_the_shared_outcomes():
    assert (nulls.PASS, nulls.FAIL, nulls.TOO_FEW) == (PASS, FAIL, TOO_FEW) and RANKABLE == (PASS, FAIL)
    decided = {nulls.decide(score, ci_low, 0.0, p, 0.001, items, 3)
               for score, ci_low, p, items in [(0.9, 0.5, 0.001, 10), (0.1, -0.2, 0.5, 10), (0.9, 0.5, 0.001, 2)]}
    assert decided == {PASS, FAIL, TOO_FEW}
