"""Hub specs in configs (`source: hf`): id, revision, dataset config and split names are checked when the config
is validated, not first inside a job; and the example configs use only the forms that
tests/stage/test_hub_offline.py runs offline from a hub cache."""

from __future__ import annotations

import re
import warnings

import pytest
from conftest import REPO

from reprsim.config import ConfigError, hub_spec_errors, load_yaml, validate_config

EXAMPLES = sorted((REPO / "config" / "examples").glob("*.yaml"))
COMMIT = re.compile(r"[0-9a-f]{40}")


@pytest.fixture()
def default_config():
    return load_yaml(REPO / "config" / "config.yaml")


def hub_model(**spec):
    return {"source": "hf", "id": "google-bert/bert-base-uncased", **spec}


def hub_dataset(**spec):
    return {"source": "hf", "id": "nyu-mll/glue", "config": "sst2", "splits": {"train": "train"},
            "columns": {"text": "sentence", "label": "label"}, **spec}


@pytest.mark.parametrize("spec", [
    hub_model(), hub_model(id="gpt2"), hub_model(id="EleutherAI/pythia-1.4b-deduped", revision="main"),
    hub_model(id="google/multiberts-seed_0", revision="step_20k"), hub_model(revision="v1.0"),
    hub_model(revision="a" * 40), hub_model(revision="refs/pr/3"),
    hub_dataset(), hub_dataset(config=None), hub_dataset(revision="refs/convert/parquet", config="plain_text"),
    hub_dataset(splits={"train": "train", "validation": "validation_matched", "test": "test.v2"}),
])
def test_hub_specs_the_hub_allows_pass(spec):
    assert list(hub_spec_errors("models.x", spec)) == []


@pytest.mark.parametrize("field, value, named", [
    ("id", "../../etc", "is '../../etc', which is not a hub repo id"),
    ("id", "org/../x", "which is not a hub repo id"),
    ("id", "a/b/c", "which is not a hub repo id"),
    ("id", "/org/name", "which is not a hub repo id"),
    ("id", "org/name/", "which is not a hub repo id"),
    ("id", "org--name", "which is not a hub repo id"),
    ("id", "name.git", "which is not a hub repo id"),
    ("id", "", "which is not a hub repo id"),
    ("id", "a" * 97, "which is not a hub repo id"),
    ("revision", "", "give a branch, tag or commit"),
    ("revision", "my branch", "give a branch, tag or commit"),
    ("revision", "../main", "give a branch, tag or commit"),
    ("revision", "refs/../../x", "give a branch, tag or commit"),
    ("revision", "/main", "give a branch, tag or commit"),
    ("revision", "main/", "give a branch, tag or commit"),
    ("revision", "main\n", "give a branch, tag or commit"),
    ("revision", "v1:2", "give a branch, tag or commit"),
])
def test_bad_model_ids_and_revisions_are_named(field, value, named):
    problems = list(hub_spec_errors("models.bert", hub_model(**{field: value})))
    assert len(problems) == 1 and problems[0].startswith(f"key 'models.bert.{field}' is {value!r}"), problems
    assert named in problems[0]


@pytest.mark.parametrize("change, key", [
    ({"config": "sst2/train"}, "datasets.glue.config"),
    ({"config": ""}, "datasets.glue.config"),
    ({"config": " sst2"}, "datasets.glue.config"),
    ({"config": ".."}, "datasets.glue.config"),
    ({"splits": {"train": "train", "validation": "dev-matched"}}, "datasets.glue.splits.validation"),
    ({"splits": {"train": "../train"}}, "datasets.glue.splits.train"),
    ({"splits": {"train": ""}}, "datasets.glue.splits.train"),
    ({"id": "../data"}, "datasets.glue.id"),
])
def test_bad_dataset_specs_are_named(change, key):
    problems = list(hub_spec_errors("datasets.glue", hub_dataset(**change)))
    assert len(problems) == 1 and problems[0].startswith(f"key '{key}' is "), problems


def test_validate_config_reports_hub_problems_with_the_others(default_config):
    """A path as a hub id used to pass validation and fail only inside the job that loads it."""
    default_config["models"]["bert"] = hub_model(id="../../etc")
    default_config["datasets"]["glue"] = hub_dataset(revision="ref with spaces")
    default_config["extraction"]["batch_size"] = "big"
    with pytest.raises(ConfigError) as caught:
        validate_config(default_config)
    message = str(caught.value)
    assert "key 'models.bert.id' is '../../etc', which is not a hub repo id" in message
    assert "files on disk are a source: local model" in message
    assert "key 'datasets.glue.revision' is 'ref with spaces'" in message
    assert "extraction.batch_size" in message   # schema problems are reported beside them


def test_good_hub_specs_validate(default_config):
    default_config["models"]["bert"] = hub_model(revision="v1.0")
    default_config["datasets"]["glue"] = hub_dataset(revision="refs/convert/parquet")
    config = validate_config(default_config)
    assert config["models"]["bert"]["revision"] == "v1.0"


# --------------------------------------------------------------------------- the example configs' hub specs
def hub_form(kind: str, spec: dict) -> tuple[str, ...]:
    """What of the hub path a spec uses: its revision's kind and, for a dataset, whether it names a config."""
    revision = spec.get("revision")
    if revision is None:
        form = "default revision (main)"
    elif COMMIT.fullmatch(revision):
        form = "commit"
    elif revision == "refs/convert/parquet":
        form = "parquet export"
    else:
        form = "branch or tag"
    return (kind, form) if kind == "model" else (kind, form, "config" if spec.get("config") else "default config")


# each form -> the tests of tests/stage/test_hub_offline.py that run it offline from a hub cache
COVERED = {
    ("model", "default revision (main)"): "the job: model minilm-main; the misses 'model repo', 'model file'",
    ("model", "commit"): "the job: model minilm (pinned to its commit)",
    ("model", "branch or tag"): "the job: model tiny-bert (tag v1.0); the miss 'model revision'",
    ("dataset", "default revision (main)", "config"): "the job: dataset sst2; test_every_layout_reads_the_sample[readme-configs]",
    ("dataset", "default revision (main)", "default config"): "test_every_layout_reads_the_sample[readme-default-config, data-files-alone]",
    ("dataset", "commit", "default config"): "test_every_layout_reads_the_sample[readme-commit]",
    ("dataset", "commit", "config"): "test_every_layout_reads_the_sample[parquet-export-config]",
    ("dataset", "branch or tag", "config"): "test_every_layout_reads_the_sample[readme-branch]",
    ("dataset", "parquet export", "default config"): "test_every_layout_reads_the_sample[parquet-export]",
}


def example_hub_specs(path) -> list[tuple[str, str, dict]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = validate_config(load_yaml(path))
    return [(kind, name, spec) for kind, section in (("model", "models"), ("dataset", "datasets"))
            for name, spec in sorted(config[section].items()) if spec["source"] == "hf"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_hub_specs_are_valid_and_covered_offline(path):
    specs = example_hub_specs(path)
    for kind, name, spec in specs:
        key = f"{kind}s.{name}"
        assert list(hub_spec_errors(key, spec)) == [], key
        form = hub_form(kind, spec)
        assert form in COVERED, f"{path.name}: {key} uses {form}, which no offline test runs: add it to test_hub_offline"
        print(f"{path.name}: {key}: {spec['id']} ({', '.join(form[1:])}) <- {COVERED[form]}")


def test_the_paper_examples_have_hub_specs():
    """The glob above finds the examples that load from the hub (an emptied glob would pass vacuously)."""
    with_hub = {path.stem for path in EXAMPLES if example_hub_specs(path)}
    assert {"multiberts", "pythia", "mccoy-hans", "wu-glue", "phang-glue", "glue-hub"} <= with_hub
