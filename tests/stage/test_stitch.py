"""Model stitching (reprsim.stages.stitch): identity self-stitches reproduce the model, learned maps
start at the identity and stay near it when stitching a model into itself, the models stay
bit-identical, seeds reproduce, identity across widths is refused."""

import numpy as np
import pandas as pd
import pytest
import torch

from reprsim.nets.classifiers import evaluate
from reprsim.nets.loading import load_classifier, load_encoder, load_tokenizer
from reprsim.io.datasets import load_split
from reprsim.stages.data.prepare import prepare_dataset
from reprsim.stages.finetune.training import finetune_model
from reprsim.stages.stitch.pairs import layer_pairs, stitch_pair
from reprsim.nets.streams import continued_from, model_inputs, residual_stream
from reprsim.stages.stitch.stitched import least_squares_start, make_phi

CPU = torch.device("cpu")
SPEC = {"source": "finetune", "base": "bert", "dataset": "task", "steps": 300, "batch_size": 16,
        "learning_rate": 3e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_length": 24}
FAST = {"objective": "classification", "batch_size": 16, "resamples": 20, "chance_permutations": 20,
        "optimizer": {"name": "adam", "learning_rate": 1e-3, "warmup_steps": 0, "schedule": "constant"}}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """The built-in negation task, 400 rows: 100 evaluation rows, so one row is 0.01 of accuracy."""
    out = tmp_path_factory.mktemp("stitch-data") / "task"
    prepare_dataset("task", {"source": "builtin", "n_examples": 400, "seed": 11,
                             "split_fractions": {"validation": 0.25, "test": 0.1}}, out)
    return out


@pytest.fixture(scope="module")
def seeds(tiny_models, task, tmp_path_factory):
    """Two tiny BERTs fine-tuned from one random base on the task, seeds 1 and 2."""
    root = tmp_path_factory.mktemp("stitch-models")
    for seed in (1, 2):
        finetune_model(f"s{seed}", {**SPEC, "seed": seed}, tiny_models["bert"], task, root / f"s{seed}", CPU)
    return {seed: root / f"s{seed}" for seed in (1, 2)}


def own_scores(model_dir, task_dir):
    frame = load_split(task_dir, "validation")
    return evaluate(load_classifier(model_dir, CPU), load_tokenizer(model_dir), frame, 64, 24, CPU)


def rows(table, phi, metric="accuracy"):
    return table[(table["phi"] == phi) & (table["metric"] == metric)].set_index("layer_a")


def test_identity_self_stitch_is_the_model_at_every_layer(seeds, task):
    table, _ = stitch_pair(seeds[1], seeds[1], task, phis=["identity"], layers=[(l, l) for l in range(3)], **FAST)
    scores = own_scores(seeds[1], task)
    assert scores["accuracy"] > 0.6  # the task is learnt: the check below is not trivially about a constant model
    for metric, value in scores.items():
        stitched = table[table["metric"] == metric]
        assert len(stitched) == 3
        assert (stitched["value"] == value).all() and (stitched["top_score"] == value).all()
        assert (stitched["penalty"] == 0).all() and (stitched["excess_penalty"] == 0).all()
    accuracy = rows(table, "identity")
    assert (accuracy["ci_low"] <= accuracy["value"]).all() and (accuracy["value"] <= accuracy["ci_high"]).all()
    assert (accuracy["chance"] < accuracy["value"] - 0.1).all() and (table["n"] == 100).all()


def test_a_learned_map_starts_at_the_model_and_stays_near_it(seeds, task):
    before = {name: p.clone() for name, p in load_classifier(seeds[1], CPU).state_dict().items()}
    start, _ = stitch_pair(seeds[1], seeds[1], task, phis=["affine"], steps=0, **FAST)
    trained, replicates = stitch_pair(seeds[1], seeds[1], task, phis=["affine"], steps=40, **FAST)
    own = own_scores(seeds[1], task)["accuracy"]
    assert (rows(start, "affine")["value"] == own).all()
    assert (rows(trained, "affine")["value"] >= own - 0.03).all()
    assert (rows(trained, "affine")["final_loss"] < np.inf).all() and (trained["steps"] == 40).all()
    assert len(replicates) == len(trained) * FAST["resamples"]
    after = load_classifier(seeds[1], CPU).state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)


def test_a_least_squares_start_fits_every_map_and_into_itself_is_the_identity(seeds, task):
    """start="least_squares" (the universality study's functional sense): every map, equal widths included, starts
    at the least-squares map; from a model's stream to itself that map is the identity up to the solver's rounding,
    so the self-stitch scores as the model does, up to a row whose logits nearly tie."""
    table, _ = stitch_pair(seeds[1], seeds[1], task, phis=["affine"], steps=0, start="least_squares", **FAST)
    assert table["start"].str.startswith("least squares (residual 0.000)").all()
    own = own_scores(seeds[1], task)["accuracy"]
    assert (rows(table, "affine")["value"] - own).abs().max() <= 0.01  # 100 evaluation rows: one row at most
    cross, _ = stitch_pair(seeds[1], seeds[2], task, phis=["affine"], steps=0, start="least_squares",
                           layers=[(2, 2)], **FAST)
    assert cross["start"].str.startswith("least squares (residual").all()
    with pytest.raises(ValueError, match="stitching start 'zero'"):
        stitch_pair(seeds[1], seeds[2], task, phis=["affine"], steps=0, start="zero", layers=[(2, 2)], **FAST)


def test_a_map_that_training_makes_worse_on_held_out_training_rows_ends_at_its_start(seeds, task):
    """Held-out rows of the training split decide: SGD at learning rate 50 wrecks the map (its loss there rises),
    so it ends at the identity it started from and scores as the model does; a gentle optimiser's improvement is
    kept. The held-out rows are never trained on (the start's loss is the same under every optimiser)."""
    wrecking = {**FAST, "optimizer": {"name": "sgd", "learning_rate": 50.0, "warmup_steps": 0, "schedule": "constant"}}
    own = own_scores(seeds[1], task)["accuracy"]
    wrecked, _ = stitch_pair(seeds[1], seeds[1], task, phis=["affine"], steps=5, heldout=64, layers=[(1, 1)],
                             **wrecking)
    accuracy = rows(wrecked, "affine").iloc[0]
    assert accuracy["kept"] == "start" and accuracy["heldout_trained_loss"] > accuracy["heldout_start_loss"]
    assert accuracy["value"] == own
    gentle, _ = stitch_pair(seeds[1], seeds[1], task, phis=["affine"], steps=5, heldout=64, layers=[(1, 1)], **FAST)
    kept = rows(gentle, "affine").iloc[0]
    assert kept["heldout_start_loss"] == accuracy["heldout_start_loss"]
    assert (kept["kept"] == "trained") == (kept["heldout_trained_loss"] < kept["heldout_start_loss"])
    no_heldout, _ = stitch_pair(seeds[1], seeds[1], task, phis=["affine"], steps=5, layers=[(1, 1)], **wrecking)
    assert rows(no_heldout, "affine").iloc[0]["kept"] == "trained"  # heldout 0: training has the last word


def test_training_never_changes_the_stitched_models(seeds, task):
    """f and g are the very modules the job used (not reloaded): their weights are bit-identical."""
    from reprsim.stages.stitch import pairs

    loaded = {}
    original = pairs._load

    def keep(*args):
        loaded["models"] = original(*args)
        loaded["before"] = [{n: p.clone() for n, p in m.state_dict().items()} for m in loaded["models"][:2]]
        return loaded["models"]

    pairs._load = keep
    try:
        stitch_pair(seeds[1], seeds[2], task, phis=["affine", "affine_layernorm"], steps=10, layers=[(1, 1), (2, 2)],
                    **FAST)
    finally:
        pairs._load = original
    for model, before in zip(loaded["models"][:2], loaded["before"]):
        assert all(torch.equal(before[n], p) for n, p in model.state_dict().items())
        assert not any(p.requires_grad for p in model.parameters())


def test_same_seed_same_map_and_score(seeds, task):
    settings = {**FAST, "phis": ["affine_layernorm"], "steps": 15, "layers": [(1, 2)]}
    first, reps = stitch_pair(seeds[1], seeds[2], task, seeds=[3], **settings)
    again, reps_again = stitch_pair(seeds[1], seeds[2], task, seeds=[3], **settings)
    other, _ = stitch_pair(seeds[1], seeds[2], task, seeds=[4], **settings)
    columns = ["value", "final_loss", "penalty", "ci_low", "ci_high", "chance"]
    pd.testing.assert_frame_equal(first[columns], again[columns])
    pd.testing.assert_frame_equal(reps, reps_again)
    assert first["final_loss"].iloc[0] != other["final_loss"].iloc[0]


def test_identity_across_widths_is_refused_with_a_message(seeds, task, tiny_models, minilm_dir, tmp_path):
    wide = tmp_path / "wide"
    finetune_model("wide", {**SPEC, "seed": 1, "steps": 2}, minilm_dir, task, wide, CPU)
    with pytest.raises(ValueError, match="identity stitching needs equal widths.*384.*32"):
        stitch_pair(wide, seeds[1], task, phis=["identity"], **FAST)
    # a learned map across widths starts at the least-squares fit and runs
    table, _ = stitch_pair(wide, seeds[1], task, phis=["identity", "affine"], steps=2, layers=[(6, 2)],
                           on_width_mismatch="skip", **FAST)
    assert set(table["phi"]) == {"affine"} and table["start"].str.startswith("least squares").all()


def test_penalty_and_self_baseline_columns(seeds, task):
    self_table, _ = stitch_pair(seeds[1], seeds[1], task, phis=["identity"], **FAST)
    cross, _ = stitch_pair(seeds[1], seeds[2], task, phis=["identity"], self_table=self_table, **FAST)
    own = own_scores(seeds[2], task)
    accuracy = rows(cross, "identity")
    assert (accuracy["top_score"] == own["accuracy"]).all()
    np.testing.assert_allclose(accuracy["penalty"], own["accuracy"] - accuracy["value"])
    assert (accuracy["self_stitch"] == own_scores(seeds[1], task)["accuracy"]).all()
    np.testing.assert_allclose(accuracy["excess_penalty"], accuracy["penalty"] - accuracy["self_penalty"])
    assert (accuracy["penalty_low"] <= accuracy["penalty"]).all() and (accuracy["penalty"] <= accuracy["penalty_high"]).all()
    assert list(accuracy.index) == [1, 2] and (cross["model_a"] == "s1").all() and (cross["model_b"] == "s2").all()


def test_continuing_from_a_layer_reproduces_the_model(tiny_models):
    """g_{>m} on g's own stream at m is g itself, for BERT (post-LN) and GPT-2 (pre-LN, final LN in g_{>m})."""
    for family in ("bert", "gpt2"):
        model = load_encoder(tiny_models[family], CPU)
        tokenizer = load_tokenizer(tiny_models[family])
        batch = dict(tokenizer(["a short sentence", "another, longer sentence here"], padding=True, return_tensors="pt"))
        full = model(**model_inputs(batch)).last_hidden_state
        depth = model.config.num_hidden_layers
        streams = residual_stream(model, batch, range(depth + 1))
        for layer in range(depth + 1):
            with continued_from(model, layer) as state:
                state.stream = streams[layer]
                torch.testing.assert_close(model(**model_inputs(batch)).last_hidden_state, full, rtol=0, atol=0)
        assert len(model.base_model.h if family == "gpt2" else model.encoder.layer) == depth  # blocks restored


def test_least_squares_start_recovers_an_affine_map():
    rng = torch.Generator().manual_seed(0)
    X = torch.randn(500, 6, generator=rng)
    W, b = torch.randn(6, 4, generator=rng), torch.randn(4, generator=rng)
    phi = make_phi("affine", 6, 4)
    residual = least_squares_start(phi, X, X @ W + b)
    assert residual < 1e-6
    torch.testing.assert_close(phi(X), X @ W + b, rtol=1e-4, atol=1e-4)


def test_layer_pairs():
    assert layer_pairs("matching", 6, 3) == [(1, 0), (2, 1), (3, 2), (4, 2), (5, 2), (6, 3)]
    assert layer_pairs("matching", 4, 4) == [(1, 1), (2, 2), (3, 3), (4, 4)]
    assert layer_pairs("all", 2, 3) == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    # every top layer 0..3 from the bottom's (2 blocks) at the same relative depth, or the two around it
    assert layer_pairs("reference", 2, 3) == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3)]
    assert layer_pairs("reference", 4, 2) == [(0, 0), (2, 1), (4, 2)]
    with pytest.raises(ValueError, match="outside"):
        layer_pairs([(5, 1)], 4, 4)


def test_language_model_chance_is_the_mean_over_re_paired_targets():
    """-Σ_v q(v) mean_i log p_i(v) equals the mean cross-entropy over every re-pairing of positions and targets."""
    from types import SimpleNamespace

    from reprsim.stages.stitch.objectives import LanguageModeling

    rng = torch.Generator().manual_seed(1)
    blocks = torch.randint(0, 5, (3, 4), generator=rng)
    task = LanguageModeling.__new__(LanguageModeling)
    task.eval = blocks
    targets = blocks[:, 1:].reshape(-1)
    task.target_frequency = torch.bincount(targets, minlength=5).double() / targets.numel()
    logits = torch.randn(3, 4, 5, generator=rng)
    stats = task.row_stats(SimpleNamespace(logits=logits), {"input_ids": blocks})
    log_p = torch.log_softmax(logits[:, :-1].double(), -1).reshape(-1, 5)
    every_pairing = -log_p[:, targets].mean().item()  # position i scored on target j, all (i, j)
    assert task.chance(stats, 0, 0)["cross_entropy"] == pytest.approx(every_pairing, rel=1e-12)
    own = -log_p[torch.arange(len(targets)), targets].mean().item()
    assert task.scores(stats)["cross_entropy"] == pytest.approx(own, rel=1e-6)


def test_several_seeds_train_learned_maps_once_each_and_score_the_identity_once(seeds, task):
    settings = {**FAST, "phis": ["identity", "affine"], "steps": 3, "layers": [(2, 2)], "heldout": 32}
    table, replicates = stitch_pair(seeds[1], seeds[2], task, seeds=[0, 1], **settings)
    counts = table[table["metric"] == "accuracy"].groupby(["phi", "seed"]).size().to_dict()
    assert counts == {("affine", 0): 1, ("affine", 1): 1, ("identity", 0): 1}
    assert table["top_score"].nunique() == 2  # one per metric: g scored once
    # every seed's maps share one held-out check and one evaluation: a seed's learned maps score as trained alone
    alone, alone_replicates = stitch_pair(seeds[1], seeds[2], task, seeds=[1], **settings)
    columns = [c for c in table.columns if c != "seconds"]

    def learned(frame, seed):
        return frame[(frame["seed"] == seed) & (frame["phi"] == "affine")].reset_index(drop=True)

    pd.testing.assert_frame_equal(learned(table, 1)[columns], learned(alone, 1)[columns])
    pd.testing.assert_frame_equal(learned(replicates, 1), learned(alone_replicates, 1))


@pytest.mark.parametrize("bottom_seed", [1, 2], ids=["self-stitch", "cross"])
def test_shared_passes_give_every_stitched_model_its_own_output_to_the_bit(seeds, task, bottom_seed):
    """The held-out check and the evaluation run f once per batch for all maps (in a self-stitch, in g's own pass)
    and a map equal to the identity once per (l, m) (into its own model at l = m: the model's own pass): each
    stitched model's output, and g's, are those of its own forward passes, to the bit."""
    from reprsim.stages.stitch import pairs
    from reprsim.stages.stitch.stitched import is_identity, stitched_forward

    bottom, top, tokenizers = pairs._load("classification", seeds[bottom_seed], seeds[1], CPU)
    objective = pairs._objective("classification", task, seeds[1], tokenizers, "validation", CPU, None, None, None,
                                 "train", 32)
    width = top.config.hidden_size
    torch.manual_seed(0)
    moved, normed = make_phi("affine", width, width), make_phi("affine_layernorm", width, width)
    with torch.no_grad():
        moved.weight.add_(0.05 * torch.randn_like(moved.weight))
        normed.linear.weight.normal_(std=0.3)
    maps = {(0, 1, 1, "identity"): make_phi("identity", width, width),
            (0, 1, 1, "affine"): make_phi("affine", width, width),  # at its identity start
            (1, 1, 1, "affine"): make_phi("affine", width, width),
            (0, 2, 1, "affine"): make_phi("affine", width, width),
            (0, 2, 2, "affine"): moved, (0, 1, 2, "affine_layernorm"): normed}
    assert [is_identity(phi) for phi in maps.values()] == [True, True, True, True, False, False]
    placed = pairs._placed(maps)
    for batch in objective.heldout_batches + objective.eval_batches[:2]:
        shared = pairs._measured(placed, bottom, top, batch, lambda output: output.logits, with_top=True)
        assert torch.equal(shared["top"], top(**model_inputs(batch)).logits)
        for name, (l, m, phi) in placed.items():
            own = stitched_forward(top, m, phi, residual_stream(bottom, batch, [l])[l], batch).logits
            assert torch.equal(shared[name], own), name


# ----------------------------------------------------------------- causal language models
LM_SPEC = {"source": "pretrain", "dataset": "sst2", "architecture": "gpt2", "activation": "gelu",
           "tokenizer": {"train": {"dataset": "sst2", "vocab_size": 400, "seed": 0, "max_texts": 1000,
                                   "min_frequency": 2}},
           "config": {"n_embd": 32, "n_layer": 2, "n_head": 2}, "context": 32, "steps": 400, "batch_size": 16,
           "learning_rate": 3.0e-3, "warmup_fraction": 0.1, "weight_decay": 0.01, "max_grad_norm": 1.0, "seed": 0}
LM_FAST = {**FAST, "objective": "language_modeling", "max_examples": 64,
           "optimizer": {"name": "adam", "learning_rate": 1e-5, "warmup_steps": 5}}


@pytest.fixture(scope="module")
def language_models(tmp_path_factory, sst2_sample):
    """Two tiny GPT-2 LMs pretrained on the SST-2 sample's text, gelu and relu, one tokenizer."""
    from reprsim.stages.models.pretrain import pretrain_model

    root = tmp_path_factory.mktemp("stitch-lm")
    pretrain_model("gelu", LM_SPEC, sst2_sample, root / "gelu", CPU)
    pretrain_model("relu", {**LM_SPEC, "activation": "relu", "tokenizer": "gelu", "seed": 1}, sst2_sample,
                   root / "relu", CPU, tokenizer_dir=root / "gelu")
    return root


def test_language_model_identity_self_stitch_is_the_model(language_models, sst2_sample):
    from reprsim.nets.language_models import lm_cross_entropy, text_blocks, texts_of
    from reprsim.nets.loading import load_causal_lm

    root = language_models
    table, _ = stitch_pair(root / "gelu", root / "gelu", sst2_sample, phis=["identity"], layers=[(0, 0), (1, 1), (2, 2)],
                           **LM_FAST)
    blocks = text_blocks(load_tokenizer(root / "gelu"), texts_of(sst2_sample, "validation"), 32)[:64]
    own, tokens = lm_cross_entropy(load_causal_lm(root / "gelu", CPU), blocks, 16, CPU)
    assert set(table["metric"]) == {"cross_entropy"} and (table["n"] == 64).all()
    np.testing.assert_allclose(table["value"], own, rtol=1e-6)
    assert (table["value"] == table["top_score"]).all() and (table["penalty"] == 0).all()
    assert (table["chance"] > table["value"] + 0.5).all()  # targets re-paired cost far more than the model's own


def test_language_models_stitch_across_activations_with_a_learned_map(language_models, sst2_sample):
    root = language_models
    self_table, _ = stitch_pair(root / "gelu", root / "gelu", sst2_sample, phis=["affine_layernorm"], steps=40,
                                **LM_FAST)
    cross, _ = stitch_pair(root / "gelu", root / "relu", sst2_sample, phis=["affine_layernorm"], steps=40,
                           self_table=self_table, **LM_FAST)
    start, _ = stitch_pair(root / "gelu", root / "relu", sst2_sample, phis=["affine_layernorm"], steps=0, **LM_FAST)
    assert cross["start"].str.startswith("least squares").all()
    # the least-squares start is already close to the top model here; training keeps it there
    assert (cross["value"].to_numpy() <= start["value"].to_numpy() + 0.05).all()
    assert (cross["final_loss"] < cross["first_loss"] + 0.05).all()
    assert cross[["penalty", "self_penalty", "excess_penalty", "ci_low", "ci_high"]].notna().all().all()
    assert (cross["penalty_low"] <= cross["penalty"]).all() and (cross["penalty"] <= cross["penalty_high"]).all()


def test_a_top_model_without_the_objective_s_head_is_refused(seeds, task, tiny_models):
    with pytest.raises(ValueError, match="classification stitching needs a top model with a task head"):
        stitch_pair(seeds[1], tiny_models["bert"], task, phis=["identity"], **FAST)
    with pytest.raises(ValueError, match="language_modeling stitching needs a top model with a language-model head"):
        stitch_pair(seeds[1], seeds[2], task, phis=["identity"], **{**FAST, "objective": "language_modeling"})
