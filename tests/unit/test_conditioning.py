"""Feature conditioning before a measure (reprsim.design.conditioning, reprsim.metrics.conditioners): what each method does to rows, the
symmetries each keeps (and so the sense a conditioned measure answers in), the configuration's check, and the pair
engine computing a conditioned measure as the measure on conditioned stacks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from reprsim.config import ConfigError, measures_errors
from reprsim.design import conditioning
from reprsim.design.senses import sense_of
from reprsim.metrics import conditioners
from reprsim.metrics.api import compute_layers
from reprsim.metrics.pair_engine import compare_stacks
from reprsim.stages.compare.terms import families

METHODS = [conditioning.parse(m) for m in ("standardise", "clip", "remove_top_pcs")]


def _rows(seed: int = 0, n: int = 60, d: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64) * torch.linspace(0.5, 4.0, d, dtype=torch.float64) + 3


def _rotation(d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]


def test_parse_fills_defaults_and_names_what_is_wrong():
    assert conditioning.parse(None) == {"method": "none"}
    assert conditioning.parse("clip") == {"method": "clip", "quantile": 0.95}
    assert conditioning.parse({"method": "remove_top_pcs", "components": 3}) == {"method": "remove_top_pcs",
                                                                                 "components": 3}
    for bad, words in (("whiten", "expected one of none, standardise, clip, remove_top_pcs"),
                       ({"method": "clip", "components": 2}, "unknown setting components (it takes quantile)"),
                       ({"method": "clip", "quantile": 1.5}, "quantile 1.5 is not in (0, 1]"),
                       ({"method": "remove_top_pcs", "components": 0}, "components 0 is not a positive integer")):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            conditioning.parse(bad)


def test_the_configuration_check_names_the_measure_whose_conditioning_is_wrong():
    errors = measures_errors({"cka_clip": {"measure": "cka", "conditioning": {"method": "clip", "components": 2}},
                              "cka_odd": {"measure": "cka", "conditioning": "whiten"}})
    said = "\n".join(errors)
    assert "measures.cka_clip.conditioning: conditioning clip: unknown setting components" in said
    assert "cka_odd" in said and "whiten" in said
    assert measures_errors({"cka_pcs": {"measure": "cka", "conditioning": {"method": "remove_top_pcs",
                                                                           "components": 2}}}) == []
    assert issubclass(ConfigError, ValueError)


def test_standardise_gives_every_unit_mean_zero_and_deviation_one_and_ignores_unit_scales_and_shifts():
    Z = _rows()
    Z[:, 2] = 5.0  # a constant unit is only centred
    out = conditioners.condition_layer(Z, METHODS[0])
    assert torch.allclose(out.mean(0), torch.zeros(6, dtype=torch.float64), atol=1e-12)
    std = out.pow(2).mean(0).sqrt()
    assert torch.allclose(std[[0, 1, 3, 4, 5]], torch.ones(5, dtype=torch.float64)) and std[2] == 0
    scaled = Z * torch.tensor([2.0, 0.1, 7.0, 3.0, 1.0, 9.0], dtype=torch.float64) - 4
    assert torch.allclose(conditioners.condition_layer(scaled, METHODS[0]), out, atol=1e-12)


def test_clip_is_huh_et_al_s_clamp_at_the_mean_per_row_quantile():
    Z = _rows(1)
    Z[3, 4] = 400.0  # an outlier
    threshold = torch.quantile(Z.abs(), 0.95, dim=1).mean()  # their remove_outliers, exact=False
    assert torch.equal(conditioners.condition_layer(Z, METHODS[1]), Z.clamp(-threshold, threshold))
    assert conditioners.condition_layer(Z, METHODS[1]).abs().max() < 400
    assert torch.allclose(conditioners.row_quantiles(Z.abs(), 0.37), torch.quantile(Z.abs(), 0.37, dim=1))


def test_remove_top_pcs_projects_out_a_planted_dominant_direction():
    Z = _rows(2)
    direction = torch.nn.functional.normalize(torch.ones(6, dtype=torch.float64), dim=0)
    g = torch.Generator().manual_seed(5)
    planted = Z + 50 * torch.randn(60, 1, generator=g, dtype=torch.float64) * direction
    out = conditioners.condition_layer(planted, conditioning.parse({"method": "remove_top_pcs", "components": 1}))
    assert (out @ direction).abs().max() < 0.5 * (Z - Z.mean(0)).std()  # the planted axis is (nearly) gone
    assert torch.linalg.matrix_rank(out) == 5


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m["method"])
def test_each_method_commutes_with_permuting_units(method):
    Z, order = _rows(3), torch.randperm(6, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(conditioners.condition_layer(Z[:, order], method),
                          conditioners.condition_layer(Z, method)[:, order], atol=1e-10)


def test_removing_principal_directions_commutes_with_rotations_and_standardise_and_clip_do_not():
    Z, R = _rows(4), _rotation(6, 4)
    pcs = METHODS[2]
    assert torch.allclose(conditioners.condition_layer(Z @ R, pcs), conditioners.condition_layer(Z, pcs) @ R,
                          atol=1e-9)
    for method in METHODS[:2]:
        assert not torch.allclose(conditioners.condition_layer(Z @ R, method),
                                  conditioners.condition_layer(Z, method) @ R, atol=1e-3)


def test_a_conditioned_measure_answers_in_no_wider_sense_than_its_conditioning_keeps():
    assert sense_of("cka", {}) == "geometry" and sense_of("cka", {}, "standardise") == "units"
    assert sense_of("cca", {}) == "linear" and sense_of("cca", {}, "remove_top_pcs") == "geometry"
    assert sense_of("cca", {}, {"method": "clip", "quantile": 0.9}) == "units"
    assert sense_of("pwcca", {}, "remove_top_pcs") == "units"  # never widened
    assert sense_of("mutual_knn", {}, "clip") == "neighbourhoods"  # the families' own questions stay


def test_the_pair_engine_computes_a_conditioned_measure_on_conditioned_stacks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 80, 5)) * np.array([1, 1, 1, 1, 20.0])
    Y = X + rng.normal(size=X.shape)
    cka = {"measure": "cka", "params": {"kernel": "linear"}}
    measures = {"cka": cka, "cka_std": {**cka, "conditioning": "standardise"},
                "procrustes_std": {"measure": "procrustes", "conditioning": "standardise"}}
    settings = dict(names=("a", "b"), chance={"permutations": 19}, intervals={"resamples": 20})
    table, _ = compare_stacks(X, Y, measures=measures, **settings)
    how = conditioning.parse("standardise")
    Xc, Yc = (conditioners.condition_stack(torch.from_numpy(Z), how).numpy() for Z in (X, Y))
    plain, _ = compare_stacks(Xc, Yc, measures={"cka_std": cka, "procrustes_std": {"measure": "procrustes"}},
                              **settings)
    mine = table[table["measure"].isin(["cka_std", "procrustes_std"])].reset_index(drop=True)
    for column in ("value", "null_mean", "null_std", "ci_low", "ci_high"):
        np.testing.assert_allclose(mine[column], plain[column], rtol=1e-9, atol=1e-12)
    assert {json.loads(m)["conditioning"] for m in mine["meta"]} == {"standardise"}
    assert "conditioning" not in json.loads(table.loc[table["measure"] == "cka", "meta"].iloc[0])
    # the rogue unit carries CKA on the stored features; standardised, the other units count alike
    values = table.set_index(["measure", "layer_a", "layer_b"])["value"]
    direct = compute_layers("cka", Xc, Yc, kernel="linear").values
    assert values[("cka_std", 0, 0)] == pytest.approx(direct[0, 0], rel=1e-9)
    assert values[("cka", 0, 0)] > values[("cka_std", 0, 0)]


def test_the_terms_job_prepares_no_side_for_a_conditioned_measure():
    assert families({"pwcca": {"measure": "pwcca", "params": {"pca_dims": 4}, "conditioning": "standardise"}}) == []
    assert families({"pwcca": {"measure": "pwcca", "params": {"pca_dims": 4}}}) != []
