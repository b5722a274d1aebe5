"""Schema and cross-reference validation: every mistake is named, before any job runs."""

import copy
import re
import subprocess
import sys
import time
import warnings

import pytest
from conftest import REPO, TINY, copy_workflow, snakemake

from reprsim.config import ConfigError, SampleSizeWarning, StudyDimensionWarning, load_yaml, validate_config
from reprsim.config_checks import architectures as config_module
from reprsim.design.dataset_labels import dataset_is_labelled
from reprsim.schema import SCHEMA_PATH

SHIPPED = sorted((REPO / "config").rglob("*.yaml")) + [TINY]


@pytest.fixture()
def default_config():
    return load_yaml(REPO / "config" / "config.yaml")


def problems_of(config) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return str(caught.value)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: str(path.relative_to(REPO)))
def test_shipped_configs_are_valid(path):
    raw = load_yaml(path)
    config = validate_config(raw)
    given = (raw.get("extraction") or {}).get("datasets")
    assert config["extraction"]["datasets"] == (given if given is not None else sorted(config["datasets"]))


def test_defaults_are_filled(default_config):
    del default_config["extraction"]
    del default_config["measures"]
    for key in ("word", "attention"):  # they name measures and extraction settings deleted above
        del default_config["similarity"][key]
    config = validate_config(default_config)
    assert config["extraction"]["batch_size"] == 32
    # words (and, when asked, attention) are stored for the compared split only, and only when read
    assert config["extraction"]["detail_splits"] == ["test"] and config["extraction"]["attention"] is False
    assert config["similarity"]["word"]["measures"] is None and config["similarity"]["attention"] is None
    default_config["extraction"]["detail_splits"] = None
    default_config["similarity"]["representations"] = ["mean"]
    assert validate_config(default_config)["extraction"]["detail_splits"] == []
    assert config["extraction"]["poolings"] == ["mean", "cls", "last"]
    assert config["models"]["minilm-ft-s1"]["warmup_fraction"] == 0.1
    assert config["measures"] == {"linear_cka": {"measure": "cka", "params": {"kernel": "linear", "estimator": "biased"},
                                                 "null_permutations": None, "resamples": None}}


def test_measure_parameters_are_checked(default_config):
    default_config["measures"]["svcca"]["params"] = {"treshold": 0.9}
    message = problems_of(default_config)
    assert "key 'measures.svcca.params.treshold' is unknown (did you mean 'threshold'?)" in message
    assert "allowed keys there: pca_dims, threshold" in message


def test_unknown_top_level_key(default_config):
    default_config["modles"] = {}
    message = problems_of(default_config)
    assert "key 'modles' is unknown (did you mean 'models'?)" in message and "allowed keys there" in message


def test_typo_in_model_spec_names_the_path(default_config):
    default_config["models"]["minilm-ft-s1"]["setps"] = 10
    message = problems_of(default_config)
    assert "key 'models.minilm-ft-s1.setps' is unknown (did you mean 'steps'?)" in message


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
        (lambda c: c["grounding"].update(shortcut_dataset="nope"), "grounding.shortcut_dataset"),
        (lambda c: c["grounding"].update(monotonicity_models=["nope"]), "grounding.monotonicity_models"),
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


ESCAPING_NAMES = ["../x", "..", "/etc/x", "a/b", "a\\b", ".hidden", "-x", "", "a b", "ü"]


@pytest.mark.parametrize("section", ["datasets", "models", "measures"])
@pytest.mark.parametrize("name", ESCAPING_NAMES)
def test_names_cannot_leave_results(default_config, section, name):
    """Names become path components under results/: no separators, no parent or hidden directory,
    nothing absolute, refused with the name and the section before any path is made."""
    entries = default_config[section]
    entries[name] = copy.deepcopy(next(iter(entries.values())))
    message = problems_of(default_config)
    assert repr(name) in message and section in message


def test_every_output_of_a_valid_name_stays_inside_results():
    from reprsim.workflow import paths

    results = (REPO / paths.RESULTS).resolve()
    odd = "a..b-c_d.e"  # the most dots and signs the name pattern allows
    templates = [value for value in vars(paths).values() if isinstance(value, str) and "{" in value]
    assert templates
    for template in templates:
        filled = template.format(**{key: odd for key in re.findall(r"\{(\w+)\}", template)})
        assert (REPO / filled).resolve().is_relative_to(results), template


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
    assert "extraction.batch_sise" in result.stderr + result.stdout
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
    default_config["similarity"]["word"]["measures"] = None
    with pytest.warns(SampleSizeWarning) as caught:
        validate_config(default_config)
    messages = [str(w.message) for w in caught]
    assert any("measures.pw (pwcca): 200 rows < 5·(k_x + k_y) = 640" in m for m in messages)
    assert any("measures.pw (pwcca): half-samples of 100 rows cannot support k_x + k_y = 128" in m for m in messages)
    assert any("measures.cca (cca) has no pca_dims" in m for m in messages)
    assert any("measures.knn (mutual_knn): k = 150" in m for m in messages)
    assert not any("measures.fine" in m for m in messages)


def test_the_validator_warns_when_a_study_cuts_wide_models_to_pca_dims_but_not_the_narrow_ones():
    """The review's width-64 case: PWCCA at pca_dims 64 cuts the 128-wide reference to 64 principal directions
    while the 64-wide level enters whole, so the level and the seeds are measured differently."""
    config = load_yaml(REPO / "config" / "examples" / "universality.yaml")
    narrow = {**config["models"]["gpt-w256-s3"], "config": {**config["models"]["gpt-w256-s3"]["config"], "n_embd": 64,
                                                            "n_head": 2}}
    config["models"] |= {f"gpt-w64-s{s}": {**narrow, "seed": s} for s in (3, 4, 5)}
    config["universality"]["factors"]["width"]["n_embd 64"] = ["gpt-w64-s3", "gpt-w64-s4", "gpt-w64-s5"]
    with pytest.warns(StudyDimensionWarning) as caught:
        validate_config(config)
    messages = [str(w.message) for w in caught if w.category is StudyDimensionWarning]
    assert messages == ["measures.pwcca (pwcca): pca_dims 64 is not below the narrowest study model's width "
                        "(gpt-w64-s3: 64), so its layers enter whole while the 256-wide ones are cut to 64 principal "
                        "directions: a width level and the seeds are measured differently; set pca_dims below 64"]
    config = load_yaml(REPO / "config" / "examples" / "universality.yaml")  # 128 and 256 wide: both cut to 64
    with warnings.catch_warnings():
        warnings.simplefilter("error", StudyDimensionWarning)
        validate_config(config)


def test_a_dimension_placebo_must_reduce_the_reference_to_fewer_dimensions():
    config = load_yaml(REPO / "config" / "examples" / "universality.yaml")  # reference 128 wide, width level 256
    config["universality"]["dimension_placebo"] = {"methods": ["random", "pca"]}
    assert ("key 'universality.dimension_placebo' is set, but no width level is narrower than the reference (128; "
            "widths as the models' `config` or `recipe` gives them): give `widths`, or a narrower width level") \
        in problems_of(copy.deepcopy(config))
    config["universality"]["dimension_placebo"]["widths"] = [64, 128]
    assert ("key 'universality.dimension_placebo.widths' has 128, not below the reference's width 128: a placebo "
            "reduces the reference seeds to fewer dimensions") in problems_of(copy.deepcopy(config))
    config["universality"]["dimension_placebo"]["widths"] = [64]
    validated = validate_config(config)
    assert validated["universality"]["dimension_placebo"] == {"methods": ["random", "pca"], "widths": [64], "seed": 0}


def test_the_functional_sense_stitches_every_level_into_the_reference_and_says_which_it_cannot():
    """universality.function on the example: each stitchable level's, the floor's and the other seeds' models into
    every reference seed of another seed, each seed into itself; the masked LM and the dimension placebo left out
    with the reason; references the stitching cannot score are refused, naming them."""
    from reprsim.workflow.stitching import function_plan

    config = load_yaml(REPO / "config" / "examples" / "universality.yaml")
    config["universality"]["function"] = {"steps": 50}
    validated = validate_config(copy.deepcopy(config))
    assert validated["universality"]["function"]["phi"] == "affine"
    assert validated["universality"]["function"]["optimizer"]["warmup_steps"] == 30
    plan = function_plan(validated, "sst2", ["a random projection to 64 dims"])
    jobs = {(job.bottom, job.top) for job in plan.jobs}
    reference = ["gpt-s0", "gpt-s1", "gpt-s2"]
    assert plan.objective == "language_modeling" and {job.dataset for job in plan.jobs} == {"sst2"}
    assert {(r, r) for r in reference} <= jobs and {(a, b) for a in reference for b in reference} <= jobs
    assert ("floor-s9", "gpt-s0") in jobs and ("gpt-w256-s3", "gpt-s2") in jobs and ("gpt-s0@25", "gpt-s1") in jobs
    assert ("gpt-s0@25", "gpt-s0") not in jobs  # a checkpoint never meets its own run
    assert not any(bottom.startswith("mlm15") for bottom, _ in jobs)
    assert plan.left_out["objective/masked LM 15%"].startswith("mlm15-s3 is a masked LM")
    assert plan.left_out["dimension/a random projection to 64 dims"] == "a reduced copy has no network to stitch"
    assert len(jobs) == 3 * 3 + 2 * 3 + 3 * 3 * 3 + 2 * 3 * 2  # seeds, floor, width/depth/data, two checkpoints
    config["universality"]["reference"] = ["gpt-s0", "gpt-s1", "floor-s10"]
    config["universality"]["floor"] = ["floor-s9"]
    assert ("key 'universality.function' is set, but its stitching scores each reference model on its own task: the "
            "references must all be causal LMs pretrained by the workflow (source pretrain, next-token loss) or all "
            "fine-tuned classifiers (source finetune); they are gpt-s0 (source pretrain), gpt-s1 (source pretrain), "
            "floor-s10 (source init)") in problems_of(copy.deepcopy(config))


@pytest.mark.parametrize("params, expected", [
    ({"threshold": "0.9"}, "key 'measures.svcca.params.threshold' must be of type number; got '0.9' (str) (YAML read"),
    ({"threshold": 1.5}, "key 'measures.svcca.params.threshold' is 1.5; must be ≤ 1"),
    ({"threshold": 0}, "key 'measures.svcca.params.threshold' is 0; must be > 0"),
    ({"pca_dims": 0}, "key 'measures.svcca.params.pca_dims' is 0; must be ≥ 1"),
    ({"pca_dims": True}, "key 'measures.svcca.params.pca_dims' must be of type integer or null; got True"),
    ({"pca_dims": 6.5}, "key 'measures.svcca.params.pca_dims' must be of type integer or null"),
])
def test_measure_parameter_types_and_ranges(default_config, params, expected):
    default_config["measures"]["svcca"]["params"].update(params)
    assert expected in problems_of(default_config)


@pytest.mark.parametrize("label, spec, expected", [
    ("pw", {"measure": "pwcca", "params": {"direction": "both"}}, "key 'measures.pw.params.direction' is 'both'; allowed values: 'x', 'y', 'min'"),
    ("c", {"measure": "cka", "params": {"estimator": "fast"}}, "key 'measures.c.params.estimator' is 'fast'"),
    ("c", {"measure": "cka", "params": {"kernel": "rbf", "threshold": -1.0}}, "key 'measures.c.params.threshold' is -1.0; must be > 0"),
    ("mb", {"measure": "cka_minibatch", "params": {"batch_size": 2}}, "key 'measures.mb.params.batch_size' is 2; must be ≥ 4"),
    ("knn", {"measure": "mutual_knn", "params": {"k": 2.5}}, "key 'measures.knn.params.k' must be of type integer"),
    ("p", {"measure": "procrustes", "params": {"k": 3}}, "key 'measures.p.params.k' is unknown; allowed keys there: none"),
])
def test_each_measure_declares_its_parameters(default_config, label, spec, expected):
    default_config["measures"][label] = spec
    assert expected in problems_of(default_config)


@pytest.mark.parametrize("label, params, expected", [
    ("svcca", {"threshold": "x"}, "key 'align.aligners.svcca.params.threshold' must be of type number; got 'x'"),
    ("linear", {"ridge": [0.0, -1.0]}, "key 'align.aligners.linear.params.ridge.1' is -1.0; must be ≥ 0"),
    ("linear", {"ridge": "1e-3"}, "key 'align.aligners.linear.params.ridge' must be of type number or array; got '1e-3'"),
    ("linear", {"ridge": []}, "key 'align.aligners.linear.params.ridge'"),
    ("inn", {"device": "gpu"}, "key 'align.aligners.inn.params.device' is 'gpu'; allowed values: 'auto', 'cpu', 'cuda'"),
    ("inn", {"hidden": None}, "key 'align.aligners.inn.params.hidden' must be of type integer; got None"),
    ("mlp", {"hidden": True}, "key 'align.aligners.mlp.params.hidden' must be of type integer or null; got True"),
    ("mlp", {"layers": 4}, "key 'align.aligners.mlp.params.layers' is unknown"),
    ("cca", {"threshold": 0.5}, "key 'align.aligners.cca.params.threshold' is unknown"),
])
def test_each_aligner_declares_its_parameters(default_config, label, params, expected):
    default_config["align"]["aligners"][label].setdefault("params", {}).update(params)
    assert expected in problems_of(default_config)


def test_schema_parameters_match_the_libraries():
    """schema.yaml declares the types of exactly the parameters the measures and aligners take."""
    from reprsim.aligners.registry import ALIGNERS
    from reprsim.aligners.registry import PARAMETERS as ALIGNER_PARAMETERS
    from reprsim.metrics import MEASURES, PARAMETERS

    schema = load_yaml(SCHEMA_PATH)
    measures, aligners = schema["$defs"]["measure_params"], schema["$defs"]["aligner_params"]
    assert {name: set(spec["properties"]) for name, spec in measures.items()} == \
        {name: set(names) for name, names in PARAMETERS.items()}
    assert {name: set(spec["properties"]) for name, spec in aligners.items()} == \
        {name: set(names) for name, names in ALIGNER_PARAMETERS.items()}
    measure_enum = schema["properties"]["measures"]["additionalProperties"]["properties"]["measure"]["enum"]
    aligner_enum = schema["properties"]["align"]["properties"]["aligners"]["additionalProperties"]["properties"]["aligner"]["enum"]
    assert set(measure_enum) == set(MEASURES) and set(aligner_enum) == set(ALIGNERS)


def test_library_checks_name_the_parameter_instead_of_failing_on_a_comparison():
    from reprsim.aligners.registry import make
    from reprsim.metrics.cca import check_params

    for call, name in ((lambda: make("svcca", threshold="0.9"), "threshold"), (lambda: make("linear", ridge=["1e-3"]), "ridge"),
                       (lambda: make("inn", scale_bound="2"), "scale_bound"), (lambda: make("mlp", hidden=True), "hidden"),
                       (lambda: check_params("svcca", {"threshold": "0.9"}), "threshold"),
                       (lambda: check_params("cca", {"pca_dims": True}), "pca_dims")):
        with pytest.raises(ValueError, match=name):
            call()


@pytest.mark.parametrize("model, config, expected", [
    ("bert-small-s0", {"intermediate_size": "not-a-number"},
     ("key 'models.bert-small-s0.config.intermediate_size' must be an integer, like BertConfig's default 3072; "
      "got 'not-a-number' (str)")),
    ("bert-small-s0", {"num_hiden_layers": 2},
     ("key 'models.bert-small-s0.config.num_hiden_layers' is not a field of the bert config (transformers BertConfig); "
      "did you mean 'num_hidden_layers'?")),
    ("bert-small-s0", {"num_hidden_layers": True}, "key 'models.bert-small-s0.config.num_hidden_layers' must be an integer"),
    ("bert-small-s0", {"hidden_dropout_prob": "0.1"}, "key 'models.bert-small-s0.config.hidden_dropout_prob' must be a number"),
    ("bert-small-s0", {"hidden_act": 3}, "key 'models.bert-small-s0.config.hidden_act' must be a string"),
    ("bert-small-s0", {"use_cache": "yes"}, "key 'models.bert-small-s0.config.use_cache' must be true or false"),
    ("bert-small-s0", {"id2label": [0, 1]}, "key 'models.bert-small-s0.config.id2label' must be a mapping"),
    ("bert-small-s0", {"classifier_dropout": {"p": 0.1}}, "key 'models.bert-small-s0.config.classifier_dropout' must be a scalar"),
    ("bert-small-s0", {"intermediate_size": -8}, "key 'models.bert-small-s0.config.intermediate_size' is -8; must be ≥ 0"),
    ("bert-small-s0", {"num_attention_heads": 0}, "key 'models.bert-small-s0.config.num_attention_heads' is 0; must be ≥ 1"),
    ("bert-small-s0", {"hidden_size": 250},
     ("key 'models.bert-small-s0.config.hidden_size' = 250 is not a multiple of "
      "key 'models.bert-small-s0.config.num_attention_heads' = 4")),
    ("bert-small-s0", {"model_type": "gpt2"}, "key 'models.bert-small-s0.config.model_type' is not a field"),
    ("bert-small-s0", {"trust_remote_code": True},
     "key 'models.bert-small-s0.config.trust_remote_code' is refused: reprsim never executes remote code"),
])
def test_architecture_config_keys_are_checked_against_transformers(default_config, model, config, expected):
    default_config["models"][model]["config"].update(config)
    assert expected in problems_of(default_config)


def test_a_cluster_jobs_snakemake_leaves_the_model_configs_to_the_submitting_one(default_config, monkeypatch):
    """model_configs=False (a job's own Snakemake, not the main process) neither starts the child that reads the
    transformers config classes nor reports their keys; everything else is still checked."""
    default_config["models"]["bert-small-s0"]["config"]["num_hiden_layers"] = 2
    monkeypatch.setattr(config_module, "architecture_fields", lambda *_: pytest.fail("read the config classes"))
    validate_config(copy.deepcopy(default_config), model_configs=False)
    default_config["similarity"]["split"] = "nowhere"
    with pytest.raises(ConfigError, match="nowhere"):
        validate_config(default_config, model_configs=False)


def test_the_config_classes_are_read_once_per_transformers_install(tmp_path, monkeypatch):
    """The child process's answer is kept on disk for the install it came from: a second start reads it without
    the child, and a changed install (another stamp) starts the child again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(config_module, "_ARCHITECTURES", {})
    read = config_module.architecture_fields({"gpt2", "bert"})
    assert read["gpt2"]["fields"]["n_embd"] == 768 and "hidden_size" in read["gpt2"]["aliases"]
    assert (tmp_path / "reprsim" / "transformers-configs.json").is_file()

    def no_child(*_, **__):
        pytest.fail("started the child process although its answer is on disk")
    monkeypatch.setattr(config_module, "_ARCHITECTURES", {})
    monkeypatch.setattr(config_module.subprocess, "run", no_child)
    assert config_module.architecture_fields({"gpt2", "bert"}) == read

    monkeypatch.setattr(config_module, "_ARCHITECTURES", {})
    monkeypatch.setattr(config_module, "_transformers_stamp", lambda: "another install")
    with pytest.raises(pytest.fail.Exception, match="on disk"):
        config_module.architecture_fields({"gpt2"})


def test_architecture_aliases_are_fields_of_their_own():
    tiny = load_yaml(TINY)
    gpt2 = tiny["models"]["tiny-gpt2"]["config"]
    gpt2["hidden_size"] = gpt2.pop("n_embd")  # GPT2Config.attribute_map: hidden_size -> n_embd
    validate_config(copy.deepcopy(tiny))
    gpt2["n_embd"] = 32
    assert ("keys 'models.tiny-gpt2.config.hidden_size' and 'models.tiny-gpt2.config.n_embd' both set n_embd"
            in problems_of(tiny))
    del gpt2["hidden_size"], gpt2["n_embd"]
    gpt2["n_head"] = 5
    assert "n_embd (default) = 768 is not a multiple of key 'models.tiny-gpt2.config.n_head' = 5" in problems_of(tiny)


PRETRAIN = {"source": "pretrain", "dataset": "sst2", "tokenizer": {"train": {"dataset": "sst2", "vocab_size": 2000}},
            "architecture": "gpt2", "activation": "gelu", "config": {"n_embd": 128, "n_layer": 3, "n_head": 4},
            "context": 64, "steps": 600, "seed": 0}


def test_a_pretrained_model_is_valid_and_gets_its_defaults(default_config):
    default_config["models"]["gpt-s0"] = copy.deepcopy(PRETRAIN)
    default_config["models"]["gpt-borrowed"] = {**copy.deepcopy(PRETRAIN), "tokenizer": "minilm"}
    del default_config["models"]["gpt-borrowed"]["activation"]
    models = validate_config(default_config)["models"]
    assert {key: models["gpt-borrowed"][key] for key in ("activation", "context", "batch_size", "learning_rate",
                                                          "warmup_fraction", "weight_decay", "max_grad_norm")} == {
        "activation": "gelu_new", "context": 64, "batch_size": 32, "learning_rate": 5.0e-4, "warmup_fraction": 0.1,
        "weight_decay": 0.01, "max_grad_norm": 1.0}
    assert models["gpt-s0"]["tokenizer"]["train"]["min_frequency"] == 2


@pytest.mark.parametrize("change, expected", [
    ({"dataset": "nope"}, "key 'models.gpt-s0.dataset' is 'nope', which is not a dataset in this config"),
    ({"activation": "tanh"}, "key 'models.gpt-s0.activation' is 'tanh'; allowed values: 'gelu_new', 'gelu'"),
    ({"architecture": "bert"}, "key 'models.gpt-s0.architecture' is 'bert'; allowed values: 'gpt2'"),
    ({"tokenizer": "nope"}, "key 'models.gpt-s0.tokenizer' is 'nope', which is not a model in this config"),
    ({"tokenizer": {"train": {"dataset": "nope"}}},
     "key 'models.gpt-s0.tokenizer.train.dataset' is 'nope', which is not a dataset in this config"),
    ({"steps": None}, "models.gpt-s0: 'steps' is a required property"),
    ({"context": 1}, "key 'models.gpt-s0.context' is 1; must be ≥ 2"),
    ({"learning_rate": "1e-3"}, "key 'models.gpt-s0.learning_rate' must be of type number"),
    ({"epochs": 2}, "key 'models.gpt-s0.epochs' is unknown"),
    ({"config": {"n_embd": 128, "n_layr": 3}}, "key 'models.gpt-s0.config.n_layr' is not a field of the gpt2 config"),
    ({"config": {"n_embd": 100, "n_head": 8}}, "key 'models.gpt-s0.config.n_embd' = 100 is not a multiple of"),
    ({"config": {"vocab_size": 500}}, "key 'models.gpt-s0.config.vocab_size' is set by 'models.gpt-s0.tokenizer'"),
    ({"config": {"activation_function": "relu"}},
     "key 'models.gpt-s0.config.activation_function' is set by 'models.gpt-s0.activation'"),
    ({"config": {"max_position_embeddings": 32}}, "key 'models.gpt-s0.config.max_position_embeddings' is 32, below context = 64"),
    ({"config": {"trust_remote_code": True}}, "key 'models.gpt-s0.config.trust_remote_code' is refused"),
])
def test_pretrained_model_errors_name_the_key(default_config, change, expected):
    spec = {**copy.deepcopy(PRETRAIN), **change}
    default_config["models"]["gpt-s0"] = {key: value for key, value in spec.items() if value is not None}
    assert expected in problems_of(default_config)


def test_checkpoints_expand_to_models_that_are_seed_siblings_across_seeds(default_config):
    from reprsim.design.relations import seed_pairs

    for seed in (0, 1):
        default_config["models"][f"gpt-s{seed}"] = {**copy.deepcopy(PRETRAIN), "seed": seed, "checkpoints": [300, 100]}
    models = validate_config(default_config)["models"]
    expanded = {f"gpt-s{seed}@{step}" for seed in (0, 1) for step in (100, 300)}
    assert expanded <= set(models)
    child, parent = models["gpt-s1@300"], models["gpt-s1"]
    assert child == {**{k: v for k, v in parent.items() if k != "checkpoints"}, "checkpoint": 300}
    assert child["source"] == "pretrain" and child["seed"] == 1 and parent["checkpoints"] == [300, 100]
    pairs = set(seed_pairs(models))
    assert {("gpt-s0", "gpt-s1"), ("gpt-s0@100", "gpt-s1@100"), ("gpt-s0@300", "gpt-s1@300")} <= pairs
    assert not {pair for pair in pairs if pair[0].startswith("gpt") and pair[0].split("@")[1:] != pair[1].split("@")[1:]}


def test_a_checkpoint_must_lie_before_the_last_step(default_config):
    default_config["models"]["gpt"] = {**copy.deepcopy(PRETRAIN), "checkpoints": [100, 600]}
    assert "key 'models.gpt.checkpoints' has 600, not below steps = 600" in problems_of(default_config)
    default_config["models"]["gpt"]["checkpoints"] = [0]
    assert "key 'models.gpt.checkpoints.0' is 0; must be ≥ 1" in problems_of(default_config)
    default_config["models"]["gpt"]["checkpoints"] = [100, 100]
    assert "models.gpt.checkpoints" in problems_of(default_config)


def test_a_berts_masked_lm_takes_the_gpt2_fields_it_can_translate(default_config):
    default_config["models"]["mlm"] = {**copy.deepcopy(PRETRAIN), "objective": "masked", "mask_probability": 0.2,
                                       "blocks": "bert",
                                       "config": {"n_embd": 64, "n_layer": 2, "n_head": 2, "n_inner": 100,
                                                  "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}}
    models = validate_config(copy.deepcopy(default_config))["models"]
    assert (models["mlm"]["objective"], models["mlm"]["mask_probability"]) == ("masked", 0.2)
    config = default_config["models"]["mlm"]["config"]
    config.update(use_cache=False, embd_pdrop=0.1, n_layr=3)
    message = problems_of(default_config)
    assert "key 'models.mlm.config.use_cache' has no counterpart in the BERT that blocks bert builds" in message
    assert "key 'models.mlm.config.embd_pdrop' has no counterpart" in message and "resid_pdrop (0.0)" in message
    assert "key 'models.mlm.config.n_layr' is not a field of the gpt2 config" in message
    assert "n_layr' has no counterpart" not in message  # a typo is reported once
    # in GPT-2's own blocks (blocks left out) every GPT-2 field is the masked LM's too
    del default_config["models"]["mlm"]["blocks"]
    config.pop("n_layr")
    assert validate_config(copy.deepcopy(default_config))["models"]["mlm"]["config"]["use_cache"] is False
    default_config["models"]["mlm"].update(config={}, mask_probability=0)
    assert "key 'models.mlm.mask_probability' is 0; must be > 0" in problems_of(default_config)
    default_config["models"]["mlm"]["mask_probability"] = 0.2
    default_config["models"]["gpt"] = {**copy.deepcopy(PRETRAIN), "blocks": "gpt2"}
    assert "key 'models.gpt.blocks' is 'gpt2': it chooses a masked LM's blocks" in problems_of(default_config)


def test_a_causal_lm_gets_the_objective_defaults(default_config):
    default_config["models"]["gpt"] = copy.deepcopy(PRETRAIN)
    spec = validate_config(default_config)["models"]["gpt"]
    assert (spec["objective"], spec["mask_probability"], spec["checkpoints"]) == ("causal", 0.15, [])


@pytest.mark.parametrize("where", [("models", "minilm"), ("models", "minilm-ft-s1"), ("datasets", "sst2")])
def test_trust_remote_code_is_refused_wherever_it_is_put(default_config, where):
    section, name = where
    default_config[section][name]["trust_remote_code"] = True
    message = problems_of(default_config)
    assert f"key '{section}.{name}.trust_remote_code' is refused: reprsim never executes remote code" in message


def test_a_named_distance_measure_must_exist(default_config):
    default_config["report"]["distance_measure"] = "lin_cka"
    message = problems_of(default_config)
    assert "key 'report.distance_measure' is 'lin_cka', which is not a measure in this config" in message
    # the default names linear_cka, which a config need not define: then there are no model distances
    del default_config["report"]["distance_measure"]
    del default_config["measures"]["linear_cka"]
    default_config["similarity"]["word"]["measures"] = ["unbiased_cka"]
    validate_config(default_config)


def test_validation_imports_neither_torch_nor_transformers():
    """The Snakefile validates whenever the DAG is built; transformers' config classes are read in a child."""
    script = ("import sys; from reprsim.config import load_yaml, validate_config; "
              f"[validate_config(load_yaml(p)) for p in {[str(p) for p in SHIPPED]!r}]; "
              "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_word_and_attention_jobs_need_what_extraction_stores(default_config):
    default_config["extraction"]["attention"] = False
    default_config["extraction"]["detail_splits"] = ["validation"]
    default_config["similarity"]["word"]["measures"] = ["linear_cka", "lin_cka"]
    default_config["similarity"]["attention"]["pairs"] = [["minilm", "bert-big"]]
    message = problems_of(default_config)
    assert "similarity.representations: word compares words of similarity.split = 'test', but " \
           "extraction.detail_splits = ['validation']" in message
    assert "key 'similarity.word.measures' names 'lin_cka', which is not a measure in this config" in message
    assert "similarity.attention compares attention maps, which extraction.attention: true stores" in message
    assert "key 'similarity.attention.pairs' names 'bert-big', which is not a model" in message
    default_config["extraction"]["splits"] = ["train", "test"]
    assert "key 'extraction.detail_splits' names 'validation', which extraction.splits" in problems_of(default_config)


def test_stitching_pairs_must_name_models_and_resolve_an_objective(default_config):
    from reprsim.workflow.stitching import stitch_jobs

    config = copy.deepcopy(default_config)
    validate_config(config)
    jobs = {(j.bottom, j.top, j.objective) for j in stitch_jobs(config)}
    assert jobs == {(a, b, "classification") for a in ("minilm-ft-s1", "minilm-ft-s2")
                    for b in ("minilm-ft-s1", "minilm-ft-s2")}  # both ways and each into itself
    config = copy.deepcopy(default_config)
    config["stitching"]["pairs"] = [["minilm-ft-s1", "nope"]]
    assert "key 'stitching.pairs' names 'nope'" in problems_of(config)
    config = copy.deepcopy(default_config)
    config["stitching"]["pairs"] = [["minilm", "minilm-ft-s1"]]  # a package model has no task head
    assert "objective auto needs two fine-tuned models" in problems_of(config)
    config["stitching"]["objective"] = "classification"
    config["stitching"]["dataset"] = "sst3"
    assert "key 'stitching.dataset' is 'sst3'" in problems_of(config)


def test_similarity_pairs_name_models_of_the_config(default_config):
    """similarity.pairs (the sentence-level pairs compared; null = every pair) must name models of the config."""
    config = {**default_config, "similarity": {**default_config.get("similarity", {}),
                                               "pairs": [["minilm", "no-such-model"]]}}
    assert "key 'similarity.pairs' names 'no-such-model'" in problems_of(config)


def test_unlabelled_text_is_compared_and_refused_where_labels_are_needed(default_config):
    """A local dataset whose columns name no label: a similarity-only configuration on it is valid; fine-tuning
    on it, grounding (on by default), label_names, a shortcut and classification stitching are each refused with
    the key that asks for it."""
    config = copy.deepcopy(default_config)
    config["datasets"] = {"texts": {"source": "local", "files": {"train": "texts.tsv"}, "columns": {"text": "text"}}}
    config["models"] = {name: spec for name, spec in config["models"].items() if spec["source"] != "finetune"}
    config["grounding"] = {"enabled": False}
    config.pop("stitching", None)
    for key in ("finetune_eval", "extraction", "similarity", "align"):
        config.pop(key, None)
    valid = validate_config(copy.deepcopy(config))
    assert valid["datasets"]["texts"]["columns"]["label"] is None
    assert not dataset_is_labelled(valid["datasets"]["texts"])

    bad = copy.deepcopy(config)
    bad["datasets"]["texts"].update(label_names=["a", "b"], shortcut={"rate": 0.5})
    bad["models"]["ft"] = {"source": "finetune", "base": "minilm", "dataset": "texts"}
    bad["grounding"] = {}
    bad["stitching"] = {"dataset": "texts"}
    message = problems_of(bad)
    assert "key 'datasets.texts.label_names' lists classes, but datasets.texts.columns names no label" in message
    assert "key 'datasets.texts.shortcut'" in message
    assert "key 'models.ft.dataset' is 'texts', which is unlabelled text" in message
    assert "grounding (enabled by default) tests the measures on dataset 'texts'" in message
    assert "set grounding: {enabled: false}" in message
    assert "key 'stitching.dataset' is 'texts'" in message
    # language modelling needs no labels
    lm = copy.deepcopy(config)
    lm["stitching"] = {"dataset": "texts", "objective": "language_modeling"}
    assert "stitching" not in problems_of_or_none(lm)


def problems_of_or_none(config) -> str:
    try:
        validate_config(config)
    except ConfigError as error:
        return str(error)
    return ""
