"""config/examples/stitching-lm.yaml end to end, offline and shrunk: small GPT-2 LMs pretrained on the SST-2
sample's text (one gelu and one relu of the example's four, one shared BPE that the first learns and the other
borrows), stitched into each other both ways and into themselves, with the asymmetry between the two kinds judged
in the findings. (The example's seeds add more of the same jobs; that seeds of one kind make one kind is checked
on the example's own specs in tests/stage/test_findings.py.)

The same run holds a tiny universality study (config/examples/universality.yaml's stage): a second gelu seed, both
gelu seeds keeping a checkpoint (models gpt-gelu-s0@30, gpt-gelu-s1@30, copied out of the one training job) and an
untrained floor; `similarity.pairs: study` compares only the pairs the study reads; linear CKA on clipped features
is its artefact control, both gelu seeds reduced to 16 dimensions at random its dimension placebo, and its functional
sense stitches the checkpoints, the floor and each seed into the other seed (and each seed into itself)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from reprsim.design.senses import ANSWER_TOPICS, SENSES
from reprsim.tables.universality import VERDICTS

pytestmark = pytest.mark.workflow
EXAMPLE = REPO / "config" / "examples" / "stitching-lm.yaml"
MODELS = ["gpt-gelu-s0", "gpt-relu-s0"]
STUDY = {"reference": ["gpt-gelu-s0", "gpt-gelu-s1"], "floor": ["floor-s9"],
         "factors": {"training_time": {"step 30": ["gpt-gelu-s0@30", "gpt-gelu-s1@30"]}},
         "dimension_placebo": {"methods": ["random"], "widths": [16]},
         "function": {"steps": 10, "max_examples": 24, "heldout": 8}}
PLACEBO = "a random projection to 16 dims"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The example's first seed of each kind, 2-block, 32-wide and trained for 60 steps, 20-step maps, fewer draws,
    no grounding tests (they need more models, and the shared tiny run has them)."""
    root = copy_workflow(tmp_path_factory.mktemp("stitching-lm"))
    config = yaml.safe_load(EXAMPLE.read_text())
    config["models"] = {name: config["models"][name] for name in MODELS}
    config["grounding"] = {"enabled": False}
    for spec in config["models"].values():
        spec.update(config={"n_embd": 32, "n_layer": 2, "n_head": 2}, context=32, steps=60)
    config["models"]["gpt-gelu-s0"]["tokenizer"]["train"]["vocab_size"] = 500
    config["extraction"].update(max_examples=40, batch_size=16, max_length=32)
    config["similarity"]["chance"] = {"permutations": 19, "seed": 0}
    config["similarity"]["intervals"] = {"resamples": 20, "confidence": 0.95, "seed": 0}
    config["stitching"].update(steps=20, max_examples=48, pairs=[MODELS])
    # the study: a second gelu seed, a checkpoint at step 30 of both, an untrained floor of the same sizes
    config["models"]["gpt-gelu-s1"] = {**config["models"]["gpt-relu-s0"], "activation": "gelu", "seed": 1}
    for name in STUDY["reference"]:
        config["models"][name]["checkpoints"] = [30]
    config["models"]["floor-s9"] = {"source": "init", "architecture": "gpt2", "tokenizer": "gpt-gelu-s0", "seed": 9,
                                    "config": {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 32}}
    config["universality"] = STUDY
    # an artefact control: linear CKA on clipped features beside linear CKA on the stored ones
    config["measures"]["linear_cka_clip"] = {**config["measures"]["linear_cka"], "conditioning": "clip"}
    config["similarity"]["pairs"] = "study"
    (root / "lm.yaml").write_text(yaml.safe_dump(config))
    snakemake(root, "--configfile", "lm.yaml")
    return root


def test_every_model_is_stitched_into_every_other_and_itself(run):
    table = pd.read_parquet(run / "results" / "tables" / "stitching.parquet")
    assert set(zip(table["model_a"], table["model_b"])) == {(a, b) for a in MODELS for b in MODELS}
    assert set(table["objective"]) == {"language_modeling"} and set(table["metric"]) == {"cross_entropy"}
    assert set(table["phi"]) == {"affine_layernorm"} and (table["layer_a"] == table["layer_b"]).all()
    assert table["start"].str.startswith("least squares").all()
    assert (table["n"] == 48).all() and (table["chance"] > table["value"]).all()
    own = table[table["model_a"] == table["model_b"]]
    assert (own["excess_penalty"] == 0).all()


def test_the_asymmetry_between_activations_is_judged(run):
    findings = pd.read_parquet(run / "results" / "tables" / "findings.parquet").set_index("claim_id")
    row = findings.loc["stitching_asymmetric_between_kinds"]
    assert row["verdict"] in ("supported", "inconclusive") and row["n"] == 48
    assert "activation=gelu" in row["models"] and "activation=relu" in row["models"]
    page = (run / "results" / "report" / "stitching.html").read_text()
    assert "Asymmetry" in page and "gpt-gelu-s0" in page
    figure = run / "results" / "figures" / "stitching" / "sst2" / "gpt-gelu-s0__gpt-relu-s0.png"
    assert figure.read_bytes()[:4] == b"\x89PNG"


def test_the_study_shares_seed_level_similarity_over_training_time(run):
    """The universality stage on the run: one level (the checkpoints at step 30) and the dimension placebo, each third
    with u, its interval and
    a verdict; the convergence claims; the statement on the main page and the study's page."""
    table = pd.read_parquet(run / "results" / "tables" / "universality.parquet")
    assert set(zip(table["factor"], table["level"])) == {("training_time", "step 30"), ("dimension", PLACEBO)}
    thirds = table[table["depth"].str.endswith("third")]
    assert set(thirds["depth"]) == {"lower third", "middle third", "upper third"}
    assert set(table["verdict"]) <= set(VERDICTS)
    # two checkpoints of two seeds: the level and the reference resampled, so its verdict reads seeds and rows
    assert (table["interval_basis"] == "seeds and rows").all() and table["rows_ci_low"].notna().any()
    defined = table[table["verdict"] != "undefined"]
    assert not defined.empty and ((defined["ci_low"] <= defined["u"]) & (defined["u"] <= defined["ci_high"])).all()
    assert (table["n"] == 40).all() and (table["n_seed_pairs"] == 1).all() and (table["n_variant_pairs"] == 2).all()
    assert (table["quality_metric"] == "nats below the unigram reference").all() and table["quality"].notna().all()
    claims = pd.read_parquet(run / "results" / "tables" / "universality_claims.parquet")
    assert {"last minus first"} <= set(claims["statistic"]) and set(claims["first_step"]) == {30}
    checkpoint = yaml.safe_load((run / "results" / "models" / "gpt-gelu-s0@30" / "meta.json").read_text())
    assert checkpoint["step"] == 30 and checkpoint["parent"] == "gpt-gelu-s0"
    statement = pd.read_parquet(run / "results" / "tables" / "universality_statement.parquet")
    sentence = statement.loc[statement["topic"] == "training_time", "text"].iloc[0]
    assert sentence.startswith("Changing training time to step 30 (gpt-gelu-s0@30, gpt-gelu-s1@30) keeps")
    for page in ("index.html", "universality.html"):
        assert "What is universal?" in (run / "results" / "report" / page).read_text()
    # per sense: linear CKA answers in the geometric one; every other sense's row says why it is empty
    senses = pd.read_parquet(run / "results" / "tables" / "universality_senses.parquet")
    assert set(senses["sense"]) == set(SENSES) and set(senses["factor"]) == {"seeds", "training_time", "dimension"}
    measured = senses[(senses["verdict"] != "not measured") & (senses["sense"] != "function")]
    assert set(measured["sense"]) == {"geometry"} and (measured["measures"] == "linear_cka").all()
    assert len(measured[measured["factor"] == "seeds"]) == 3  # the seed siblings against identical copies
    assert senses.loc[senses["verdict"] == "not measured", "left_out"].str.len().gt(0).all()
    page = (run / "results" / "report" / "universality.html").read_text()
    assert "<h2 id='senses'>In which sense?</h2>" in page
    # the control: computed on clipped rows by the pair jobs, read against linear CKA per level and third, named in
    # the statement and on the page, and out of the senses' pools (above: the geometric sense is linear CKA's alone)
    pairs = pd.read_parquet(run / "results" / "tables" / "pairs.parquet")
    clipped = pairs[pairs["measure"] == "linear_cka_clip"]
    assert len(clipped) == len(pairs[pairs["measure"] == "linear_cka"]) and clipped["value"].notna().all()
    assert clipped["meta"].str.contains('"conditioning": "clip q=0.95"').all()
    controls = pd.read_parquet(run / "results" / "tables" / "universality_controls.parquet")
    assert set(zip(controls["control"], controls["measure"], controls["level"])) == {
        ("linear_cka_clip", "linear_cka", "step 30"), ("linear_cka_clip", "linear_cka", PLACEBO)}
    assert len(controls) == 6 and (controls["changed"] == (controls["verdict"] != controls["control_verdict"])).all()
    assert statement.loc[statement["topic"] == "controls", "text"].iloc[0].startswith(
        "Artefact controls (linear_cka_clip (linear_cka, features conditioned by clip q=0.95)): ")
    assert "<h2 id='controls'>Artefact controls</h2>" in page and "linear_cka_clip" not in "".join(senses["measures"])
    # the dimension placebo: each gelu seed reduced to 16 of its 32 dimensions (one job), met by the other seed
    placebo = pd.read_parquet(run / "results" / "universality" / "placebo" / "random16.parquet")
    # named in sorted order, as every pair table: the study looks pairs up so
    assert set(zip(placebo["model_a"], placebo["model_b"])) == {("gpt-gelu-s0~random16", "gpt-gelu-s1"),
                                                               ("gpt-gelu-s0", "gpt-gelu-s1~random16")}
    reduced = table[(table["factor"] == "dimension") & table["depth"].str.endswith("third")]
    assert len(reduced) == 3 * table["measure"].nunique() and set(reduced["verdict"]) <= set(VERDICTS)
    # u is defined where the seeds stand clear of the floor: in the same cells as the checkpoints' level
    level = table[(table["factor"] == "training_time") & table["depth"].str.endswith("third")]
    defined = {(r.measure, r.depth) for r in level.itertuples() if pd.notna(r.u)}
    assert defined and {(r.measure, r.depth) for r in reduced.itertuples() if pd.notna(r.u)} == defined
    assert statement.loc[statement["topic"] == "dimension", "text"].iloc[0].startswith(
        f"The dimension placebo, the reference seeds reduced by {PLACEBO} and scored as a level")
    # competence on one yardstick: every study model probed on the compared rows (one job each), the checkpoints'
    # mean beside the seeds' range and the chance level; the reduced copies are not probed
    probed = sorted(p.stem for p in (run / "results" / "grounding" / "competence").rglob("*.parquet"))
    assert probed == sorted(["floor-s9", "gpt-gelu-s0", "gpt-gelu-s0@30", "gpt-gelu-s1", "gpt-gelu-s1@30"])
    checkpoints = table[table["factor"] == "training_time"]
    assert checkpoints["probe_accuracy"].between(0, 1).all() and checkpoints["probe_chance"].between(0.5, 1).all()
    assert (table.loc[table["factor"] == "dimension", "probe_note"] == "not probed").all()
    assert "On the shared probe its best layer decodes the labels at" in sentence
    # the functional sense: 8 stitch jobs (each checkpoint and the floor into the other seeds, the seeds into each
    # other and themselves), every reference layer from the bottom's at the same relative depth, one affine map
    stitched = pd.concat(pd.read_parquet(path) for path in (run / "results" / "universality" / "function").rglob(
        "*.parquet") if not path.name.endswith(".resamples.parquet"))
    assert set(zip(stitched["model_a"], stitched["model_b"])) == {
        ("gpt-gelu-s0", "gpt-gelu-s1"), ("gpt-gelu-s1", "gpt-gelu-s0"), ("gpt-gelu-s0", "gpt-gelu-s0"),
        ("gpt-gelu-s1", "gpt-gelu-s1"), ("floor-s9", "gpt-gelu-s0"), ("floor-s9", "gpt-gelu-s1"),
        ("gpt-gelu-s0@30", "gpt-gelu-s1"), ("gpt-gelu-s1@30", "gpt-gelu-s0")}
    assert set(stitched["phi"]) == {"affine"} and set(zip(stitched["layer_a"], stitched["layer_b"])) == {
        (0, 0), (1, 1), (2, 2)} and (stitched["n"] == 24).all()
    function = senses[(senses["sense"] == "function") & senses["factor"].isin(["seeds", "training_time"])]
    assert len(function) == 6 and (function["measures"] == "stitching penalty").all()
    assert set(function["verdict"]) <= {*VERDICTS} and (function["n"] == 24).all()
    assert (senses.loc[(senses["sense"] == "function") & (senses["factor"] == "dimension"), "left_out"]
            == "a reduced copy has no network to stitch").all()
    # the page leads with the factor × sense figure and the answer in at most ten sentences
    assert (run / "results" / "figures" / "summary" / "universality_senses.png").read_bytes()[:4] == b"\x89PNG"
    answers = statement[statement["topic"].isin(ANSWER_TOPICS)]
    assert 2 <= len(answers) <= 10 and "The answer in" in page
    assert any(text.startswith("Does a change of one factor keep the same function, one model's layer standing in")
               for text in answers["text"])
