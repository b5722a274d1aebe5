"""Schema and cross-reference validation: every mistake is named, before any job runs."""

import copy
import time

import pytest
from conftest import REPO, copy_workflow, snakemake

from reprsim.config import ConfigError, SampleSizeWarning, load_yaml, validate_config


@pytest.fixture()
def default_config():
    return load_yaml(REPO / "config" / "config.yaml")


def problems_of(config) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return str(caught.value)


@pytest.mark.parametrize("path", ["config/config.yaml", "tests/config/tiny.yaml", "config/examples/glue-local.yaml",
                                  "config/examples/glue-hub.yaml"])
def test_shipped_configs_are_valid(path):
    config = validate_config(load_yaml(REPO / path))
    assert config["extraction"]["datasets"] == sorted(config["datasets"])


def test_defaults_are_filled(default_config):
    del default_config["extraction"]
    del default_config["measures"]
    config = validate_config(default_config)
    assert config["extraction"]["batch_size"] == 32
    assert config["extraction"]["poolings"] == ["mean", "cls", "last"]
    assert config["models"]["minilm-ft-s1"]["warmup_fraction"] == 0.1
    assert config["measures"] == {"linear_cka": {"measure": "cka", "params": {"kernel": "linear", "estimator": "biased"},
                                                 "null_permutations": None, "resamples": None}}


def test_measure_parameters_are_checked(default_config):
    default_config["measures"]["svcca"]["params"] = {"treshold": 0.9}
    message = problems_of(default_config)
    assert "measures.svcca.params" in message and "'treshold'" in message and "threshold" in message


def test_unknown_top_level_key(default_config):
    default_config["modles"] = {}
    message = problems_of(default_config)
    assert "'modles'" in message and "allowed keys there" in message and "models" in message


def test_typo_in_model_spec_names_the_path(default_config):
    default_config["models"]["minilm-ft-s1"]["setps"] = 10
    message = problems_of(default_config)
    assert "'setps'" in message and "models.minilm-ft-s1" in message and "steps" in message


def test_wrong_type_is_named(default_config):
    default_config["extraction"]["batch_size"] = "big"
    message = problems_of(default_config)
    assert "extraction.batch_size" in message and "integer" in message and "'big'" in message


def test_bad_enum_lists_allowed_values(default_config):
    default_config["device"] = "gpu"
    message = problems_of(default_config)
    assert "'device'" in message and "'auto'" in message and "'cuda'" in message


def test_unknown_source(default_config):
    default_config["models"]["minilm"]["source"] = "zoo"
    message = problems_of(default_config)
    assert "models.minilm.source" in message and "'package'" in message


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda c: c["models"]["minilm-ft-s1"].update(base="nope"), "models.minilm-ft-s1.base"),
        (lambda c: c["models"]["minilm-ft-s1"].update(dataset="nope"), "models.minilm-ft-s1.dataset"),
        (lambda c: c["models"]["bert-small-s0"].update(tokenizer="nope"), "models.bert-small-s0.tokenizer"),
        (lambda c: c["extraction"].update(datasets=["nope"]), "extraction.datasets"),
    ],
)
def test_undefined_references(default_config, edit, expected):
    edit(default_config)
    message = problems_of(default_config)
    assert expected in message and "'nope'" in message and "defined" in message


def test_compared_splits_must_be_extracted(default_config):
    default_config["extraction"]["splits"] = ["test"]
    message = problems_of(default_config)
    assert "align.splits.fit" in message and "extraction.splits" in message


def test_scoring_on_the_fit_split_is_refused(default_config):
    default_config["align"]["splits"]["score"] = "train"
    assert "held-out" in problems_of(default_config)


def test_reserved_pair_separator_in_names(default_config):
    default_config["models"]["a__b"] = copy.deepcopy(default_config["models"]["minilm"])
    assert "'a__b'" in problems_of(default_config)


def test_dependency_cycle(default_config):
    default_config["models"]["minilm-ft-s1"]["base"] = "minilm-ft-s2"
    default_config["models"]["minilm-ft-s2"]["base"] = "minilm-ft-s1"
    assert "depends on itself" in problems_of(default_config)


def test_missing_required_key(default_config):
    del default_config["models"]["minilm"]["package"]
    assert "'package' is a required property" in problems_of(default_config)


def test_typo_fails_before_any_job(tmp_path):
    """The acceptance check: a misspelt key stops `snakemake` in seconds, naming it."""
    workflow = copy_workflow(tmp_path / "wf")
    config = (workflow / "config" / "config.yaml").read_text()
    (workflow / "config" / "config.yaml").write_text(config.replace("batch_size: 64", "batch_sise: 64"))
    started = time.perf_counter()
    result = snakemake(workflow, "--dry-run", check=False)
    elapsed = time.perf_counter() - started
    assert result.returncode != 0
    assert "'batch_sise'" in result.stderr + result.stdout
    assert "extraction" in result.stderr + result.stdout
    assert not (workflow / "results" / "datasets").exists()
    assert elapsed < 30


def test_seed_lists_expand_to_one_model_per_seed(default_config):
    spec = default_config["models"].pop("minilm-ft-s1")
    default_config["models"].pop("minilm-ft-s2")
    default_config["models"]["minilm-ft"] = {**{k: v for k, v in spec.items() if k != "seed"}, "seeds": [1, 2, 3]}
    config = validate_config(default_config)
    assert {"minilm-ft-s1", "minilm-ft-s2", "minilm-ft-s3"} <= set(config["models"]) and "minilm-ft" not in config["models"]
    assert config["models"]["minilm-ft-s3"]["seed"] == 3 and "seeds" not in config["models"]["minilm-ft-s3"]


def test_expanded_names_must_not_collide(default_config):
    default_config["models"]["minilm-ft"] = {"source": "finetune", "base": "minilm", "dataset": "synth", "seeds": [1]}
    assert "already a model" in problems_of(default_config)


def test_steps_or_epochs_not_both(default_config):
    default_config["models"]["minilm-ft-s1"]["epochs"] = 2
    assert "give steps or epochs, not both" in problems_of(default_config)


def test_local_datasets_take_the_top_level_data_root(default_config):
    default_config["data_root"] = "/data/glue"
    default_config["datasets"]["sst2"] = {"source": "local", "files": {"train": "sst2/train.tsv"},
                                          "columns": {"text": "sentence", "label": "label"}}
    default_config["datasets"]["own"] = {**default_config["datasets"]["sst2"], "data_root": "elsewhere"}
    config = validate_config(default_config)
    assert config["datasets"]["sst2"]["data_root"] == "/data/glue"
    assert config["datasets"]["own"]["data_root"] == "elsewhere"
    assert config["datasets"]["sst2"]["metric"] == "accuracy"


def test_layer_views_need_the_fine_tuning_dataset_extracted(default_config):
    default_config["datasets"]["other"] = {"source": "builtin", "n_examples": 100}
    default_config["extraction"]["datasets"] = ["other"]
    assert "extraction.datasets leaves out" in problems_of(default_config)
    default_config["finetune_eval"] = {"layer_views": False}
    validate_config(default_config)


def test_the_validator_warns_when_the_similarity_rows_are_too_few_for_a_measure(default_config):
    default_config["extraction"]["max_examples"] = 200
    default_config["measures"] = {
        "pw": {"measure": "pwcca", "params": {"pca_dims": 64}},  # k = 128: 200 rows < 640, half-samples of 100 < 129
        "cca": {"measure": "cca"},  # no pca_dims: every dimension
        "knn": {"measure": "mutual_knn", "params": {"k": 150}},
        "fine": {"measure": "svcca", "params": {"pca_dims": 8}},  # 200 ≥ 5 · 16
    }
    with pytest.warns(SampleSizeWarning) as caught:
        validate_config(default_config)
    messages = [str(w.message) for w in caught]
    assert any("measures.pw (pwcca): 200 rows < 5·(k_x + k_y) = 640" in m for m in messages)
    assert any("measures.pw (pwcca): half-samples of 100 rows cannot support k_x + k_y = 128" in m for m in messages)
    assert any("measures.cca (cca) has no pca_dims" in m for m in messages)
    assert any("measures.knn (mutual_knn): k = 150" in m for m in messages)
    assert not any("measures.fine" in m for m in messages)
