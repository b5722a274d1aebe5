"""config/examples/stitching-lm.yaml end to end, offline and shrunk: small GPT-2 LMs pretrained on the SST-2
sample's text (one gelu and one relu of the example's four, one shared BPE that the first learns and the other
borrows), stitched into each other both ways and into themselves, with the asymmetry between the two kinds judged
in the findings. (The example's seeds add more of the same jobs; that seeds of one kind make one kind is checked
on the example's own specs in tests/stage/test_findings.py.)"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

pytestmark = pytest.mark.workflow
EXAMPLE = REPO / "config" / "examples" / "stitching-lm.yaml"
MODELS = ["gpt-gelu-s0", "gpt-relu-s0"]


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
    config["stitching"].update(steps=20, max_examples=48)
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
