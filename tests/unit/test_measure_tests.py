"""The grounding tests' logic on constructed inputs (reprsim.stages.grounding.measure_tests): a measure built to
track a change scores as sensitive, one built to ignore it as insensitive; a perfect and a useless measure on
groups by design. The measures here are functions of two (n, d) arrays, so each test's verdict is known."""

import numpy as np
import pandas as pd
import pytest

from reprsim.design.relations import recipe
from reprsim.inference.resampling import half_samples
from reprsim.stages.grounding import measure_tests as mt
from reprsim.stages.grounding import probes


class Constructed:
    """A similarity measure given as a function of two (n, d) arrays, with mt.Values' interface."""

    def __init__(self, function, n: int, resamples: int = 20, similarity: bool = True):
        self.name, self.similarity, self.function = "cka", similarity, function
        self.label, self.params = "constructed", {}
        self.indices = half_samples(n, resamples, 0)

    def __call__(self, left, right):
        values = np.array([[self.function(a, b) for b in right] for a in left])
        draws = np.array([[[self.function(a[rows], b[rows]) for b in right] for a in left] for rows in self.indices])
        return values, draws

    def distance(self, values):
        return -values if self.similarity else values


def energy_kept(a, b):
    """Tracks deletions: the share of a's centred energy b keeps (1 when b = a)."""
    a, b = a - a.mean(0), b - b.mean(0)
    return 1.0 - np.linalg.norm(a - b) ** 2 / np.linalg.norm(a) ** 2


def noise_measure():
    """Ignores its inputs: a fresh random number per evaluation."""
    rng = np.random.default_rng(7)
    return lambda a, b: float(rng.random())


@pytest.fixture
def arrays(monkeypatch):
    """Activations and labels served by path, as the stores and the dataset would."""
    served = {}
    monkeypatch.setattr(probes, "layers", lambda path, representation, split: served[(path, split)])
    monkeypatch.setattr(probes, "labels", lambda setup, split, rows: served[("labels", split)][:rows])
    monkeypatch.setattr(probes, "read_meta", lambda directory: {"n_labels": 2})
    return served


def deletion_data(served):
    # the label is carried evenly by every direction, whose variances fall: each deleted component costs accuracy
    rng = np.random.default_rng(0)
    d, scales = 12, np.linspace(3.0, 0.5, 12)
    for split, n in (("train", 800), ("test", 400)):
        Z = rng.standard_normal((n, d))
        y = (Z.sum(axis=1) > 0).astype(int)
        served[("m", split)] = (Z * scales)[None]  # one layer
        served[("labels", split)] = y


def test_deletion_separates_a_tracking_measure_from_one_that_ignores_deletions(arrays):
    deletion_data(arrays)
    setup = mt.Setup(stores={"m": "m"}, specs={"m": {}}, dataset_dir="d", deletion_models=["m"],
                     tests=("deletion",))
    tracking = mt.deletion(setup, Constructed(energy_kept, 400), "tracking", 400)[0]
    ignoring = mt.deletion(setup, Constructed(noise_measure(), 400), "ignoring", 400)[0]
    accuracy = np.array(eval_detail(tracking)["checked"][0]["probe"]["m"]["accuracy"])
    assert accuracy[0] > 0.9 and accuracy[-1] < 0.7  # the construction: deletions cost accuracy
    assert tracking["score"] > 0.9 and tracking["beyond_chance"]
    assert tracking["ci_low"] <= tracking["score"] <= tracking["ci_high"]
    assert not ignoring["beyond_chance"] and abs(ignoring["score"]) < 0.7


def eval_detail(row):
    import json

    return json.loads(row["detail"])


def drifting_layers(n=300, d=8, layers=6, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, d))
    out = [base]
    for _ in range(layers - 1):
        out.append(out[-1] + 0.5 * rng.standard_normal((n, d)))  # each layer moves a step further
    return np.stack(out)


def test_monotonicity_of_a_tracking_and_of_a_constant_and_a_noise_measure(arrays):
    arrays[("a", "test")] = drifting_layers()
    setup = mt.Setup(stores={"a": "a"}, specs={"a": {}}, dataset_dir="d", tests=("monotonicity",))
    tracking = {r["variant"]: r for r in mt.monotonicity(setup, Constructed(energy_kept, 300), "t", 300)}
    noise = {r["variant"]: r for r in mt.monotonicity(setup, Constructed(noise_measure(), 300), "n", 300)}
    assert tracking["spearman"]["score"] == pytest.approx(1.0) and tracking["spearman"]["beyond_chance"]
    assert tracking["conformity"]["score"] == pytest.approx(1.0) and tracking["conformity"]["beyond_chance"]
    assert not noise["spearman"]["beyond_chance"] and not noise["conformity"]["beyond_chance"]


def test_monotonicity_reads_seed_siblings_of_one_recipe_only(arrays):
    for name, seed in (("a", 0), ("b", 1), ("c", 2)):
        arrays[(name, "test")] = drifting_layers(seed=seed)
    specs = {"a": {"recipe": 1, "seed": 1}, "b": {"recipe": 1, "seed": 2}, "c": {"recipe": 2, "seed": 1}}
    setup = mt.Setup(stores={m: m for m in specs}, specs=specs, dataset_dir="d", tests=("monotonicity",))
    rows = mt.monotonicity(setup, Constructed(energy_kept, 300, resamples=4), "t", 300)
    assert eval_detail(rows[0])["cells"] == ["a", "b", "c", "a~b"]


def grouped_matrix(groups, values, resamples=20, seed=0):
    """Last layers whose measure is values(group a, group b) plus small noise: a stand-in for the models."""
    rng = np.random.default_rng(seed)
    size = len(groups)
    base = np.array([[values(groups[a], groups[b]) for b in range(size)] for a in range(size)])
    draws = base[None] + 0.01 * rng.standard_normal((resamples, size, size))
    return base + 0.01 * rng.standard_normal((size, size)), draws


@pytest.mark.parametrize("similarity", [True, False])
def test_group_separation_of_a_perfect_and_a_useless_measure(similarity):
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    models = [f"m{i}" for i in range(9)]
    sign = 1.0 if similarity else -1.0
    setup = mt.Setup(stores={}, specs={}, dataset_dir="d")
    values = Constructed(energy_kept, 100, similarity=similarity)
    perfect = (models, *grouped_matrix(groups, lambda g, h: sign * float(g == h)))
    rng = np.random.default_rng(3)
    useless = (models, rng.random((9, 9)), rng.random((20, 9, 9)))
    good = {r["variant"]: r for r in mt._separation("p", values, "seeds", "", perfect, models, groups, 100, setup)}
    bad = {r["variant"]: r for r in mt._separation("u", values, "seeds", "", useless, models, groups, 100, setup)}
    assert good["auprc"]["score"] == pytest.approx(1.0) and good["auprc"]["beyond_chance"]
    # d′ of groups 0.01 apart within, 1 between: its half-samples' d′ is heavy-tailed (a ratio over a spread near
    # 0), so the symmetric t interval (reprsim.inference.resampling) is wide; its point and upper end are far above chance
    assert good["d_prime"]["score"] > 10 and good["d_prime"]["ci_high"] > good["d_prime"]["chance"] + 10
    # chance is what a random ranking scores on this design, above ReSi's share of within-group pairs (3 of 21 per group)
    assert good["auprc"]["chance"] > eval_detail(good["auprc"])["positive_share"] == pytest.approx(3 / 21)
    assert not bad["auprc"]["beyond_chance"] and not bad["d_prime"]["beyond_chance"]


def test_design_families_group_by_the_option_alone():
    base = {"source": "finetune", "base": "m", "dataset": "d", "steps": 10}
    specs = {
        "std-s1": {**base, "seed": 1}, "std-s2": {**base, "seed": 2},
        "noise-s1": {**base, "seed": 1, "label_noise": {"fraction": 1.0}},
        "noise-s2": {**base, "seed": 2, "label_noise": {"fraction": 1.0}},
        "aug-s1": {**base, "seed": 1, "augment": {"rate": 1.0}},
    }
    same = recipe(specs["std-s1"], ("label_noise",))
    assert recipe(specs["noise-s1"], ("label_noise",)) == same != recipe(specs["aug-s1"], ("label_noise",))
    assert recipe(specs["std-s1"]) == recipe(specs["std-s2"]) != recipe(specs["noise-s1"])
    assert [mt._option_value(specs[m], "label_noise") for m in ("std-s1", "noise-s2")] == [0.0, 1.0]


def test_deletion_follows_dings_design_across_seed_siblings(arrays):
    deletion_data(arrays)
    rng = np.random.default_rng(1)
    for split in ("train", "test"):  # a sibling: the same rows through a little noise, so its probe reads worse
        arrays[("b", split)] = arrays[("m", split)] + 1.5 * rng.standard_normal(arrays[("m", split)].shape)
    specs = {"m": {"recipe": 1, "seed": 1}, "b": {"recipe": 1, "seed": 2}}
    setup = mt.Setup(stores={"m": "m", "b": "b"}, specs=specs, dataset_dir="d", deletion_models=["b", "m"],
                     tests=("deletion",))
    row = mt.deletion(setup, Constructed(energy_kept, 400, resamples=6), "tracking", 400)[0]
    cell = eval_detail(row)["cells"][0]
    grid = cell["k"]
    assert cell["reference"] == "m"  # the sibling whose undeleted layer the probe reads best
    assert cell["rows"] == 2 * len(grid) + len(grid)  # (m, m_k), (m, b_k), (b, m_k)
    assert row["score"] > 0.5 and row["beyond_chance"]


def test_the_pair_jobs_first_half_samples_are_the_grounding_tests():
    """A pair job draws similarity.intervals.resamples half-samples, the tests grounding.resamples with the same seed:
    the tests' are the pair job's first ones, so its replicates are theirs (reprsim.stages.grounding.pair_tables)."""
    assert np.array_equal(half_samples(872, 30, 0)[:20], half_samples(872, 20, 0))


def test_a_representation_of_one_vector_is_undefined_as_in_the_pair_jobs():
    rng = np.random.default_rng(4)
    varied, constant = rng.standard_normal((40, 6)), np.tile(rng.standard_normal(6), (40, 1))
    values = mt.Values("linear_cka", {"measure": "cka", "params": {"kernel": "linear"}}, half_samples(40, 3, 0))
    value, draws = values([constant, varied], [varied, constant])
    assert np.isnan(value[0]).all() and np.isnan(value[:, 1]).all() and value[1, 0] == pytest.approx(1.0)
    assert np.isnan(draws[:, 0]).all() and np.isfinite(draws[:, 1, 0]).all()


def test_deletion_that_costs_no_accuracy_cannot_rank(arrays):
    # the label rides on the top-variance direction alone: deleting low-variance components leaves the probe intact
    rng = np.random.default_rng(0)
    scales = np.r_[4.0, np.linspace(1.0, 0.5, 11)]
    for split, n in (("train", 800), ("test", 400)):
        Z = rng.standard_normal((n, 12))
        arrays[("m", split)] = (Z * scales)[None]
        arrays[("labels", split)] = (Z[:, 0] > 0).astype(int)
    setup = mt.Setup(stores={"m": "m"}, specs={"m": {}}, dataset_dir="d", deletion_models=["m"], tests=("deletion",))
    row = mt.deletion(setup, Constructed(energy_kept, 400, resamples=4), "tracking", 400)[0]
    assert row["decision"] == "cannot rank" and np.isnan(row["score"]) and not row["passes"]
    assert "does not lower" in eval_detail(row)["why"]


def test_a_pass_is_decided_against_the_item_null(arrays):
    deletion_data(arrays)  # width 12: Ding's grid scaled gives 9 deletion steps, so 9 items
    setup = mt.Setup(stores={"m": "m"}, specs={"m": {}}, dataset_dir="d", deletion_models=["m"], tests=("deletion",),
                     min_items=5)
    tracking = mt.deletion(setup, Constructed(energy_kept, 400), "tracking", 400)[0]
    ignoring = mt.deletion(setup, Constructed(noise_measure(), 400), "ignoring", 400)[0]
    assert tracking["decision"] == "pass" and tracking["p_value"] <= 0.05 and tracking["n_items"] >= 5
    assert tracking["null_quantile"] < tracking["score"]
    assert ignoring["decision"] == "fail" and ignoring["p_value"] > 0.05


def test_specificity_finds_the_same_depth_layer_of_a_seed_sibling(arrays):
    for name, seed in (("a", 0), ("b", 1)):
        arrays[(name, "test")] = drifting_layers(layers=12, seed=0) + 0.05 * np.random.default_rng(seed).standard_normal(
            (12, 300, 8))
    specs = {"a": {"recipe": 1, "seed": 1}, "b": {"recipe": 1, "seed": 2}}
    setup = mt.Setup(stores={"a": "a", "b": "b"}, specs=specs, dataset_dir="d", tests=("specificity",))
    tracking = mt.specificity(setup, Constructed(energy_kept, 300, resamples=4), "t", 300)[0]
    noise = mt.specificity(setup, Constructed(noise_measure(), 300, resamples=4), "n", 300)[0]
    assert tracking["score"] == pytest.approx(1.0) and tracking["decision"] == "pass"
    assert tracking["chance"] == pytest.approx(1 / 11) and tracking["n_items"] == 2 * 11  # embeddings left out
    assert noise["decision"] == "fail"


def test_prediction_runs_over_one_recipes_seeds_and_says_when_they_are_too_few(tmp_path):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 50)
    specs = {f"s{i}": {"recipe": "standard", "seed": i} for i in range(3)}
    specs.update({f"n{i}": {"recipe": "noise", "seed": i} for i in range(2)})
    predictions = {}
    for model in specs:
        frame = pd.DataFrame({"row": np.arange(50), "label": labels, "logit_0": rng.standard_normal(50),
                              "logit_1": rng.standard_normal(50)})
        frame["predicted"] = frame[["logit_0", "logit_1"]].to_numpy().argmax(axis=1)
        predictions[model] = tmp_path / f"{model}.parquet"
        frame.to_parquet(predictions[model])
    (tmp_path / "meta.json").write_text('{"n_labels": 2}')
    setup = mt.Setup(stores={m: m for m in specs}, specs=specs, dataset_dir=tmp_path, predictions=predictions)
    assert mt.prediction_family(setup) == ["s0", "s1", "s2"]
    models = list(specs)
    matrix = (models, rng.random((5, 5)), rng.random((20, 5, 5)))
    values = Constructed(energy_kept, 50)
    rows = {r["variant"]: r for r in mt.prediction(setup, values, "t", 50, matrix)}
    assert rows["accuracy"]["n_items"] == 3 and rows["accuracy"]["decision"] == "too few items"
    assert rows["accuracy"]["null_draws"] == 6 and rows["accuracy"]["null_exact"]  # 3! pairings, ReSi's permutation
    assert rows["all recipes: accuracy"]["decision"] == "descriptive" and rows["all recipes: accuracy"]["n_items"] == 10


def test_a_bounded_scores_interval_stays_in_its_range(arrays):
    arrays[("a", "test")] = drifting_layers()
    setup = mt.Setup(stores={"a": "a"}, specs={"a": {}}, dataset_dir="d", tests=("monotonicity",))
    values, draws = Constructed(energy_kept, 300), np.linspace(0.5, 1.0, 20)
    _, unclipped = mt.interval(np.asarray(0.95), draws, 300, mt.subsample_size(300), 0.95)
    row = mt._result("t", values, "layer", "spearman", 0.95, draws, 300, 0.0, "Spearman ρ", 12, {}, setup)
    assert unclipped > 1.0 and row["ci_high"] == 1.0 and -1.0 <= row["ci_low"] < 0.95
