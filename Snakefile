# reprsim: in what sense do differently trained models learn similar representations?
# Table of contents: config and its validation, one include per stage, and the targets.
import os

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# The default experiment, unless the user names their own with --configfile
# (Snakemake would otherwise merge the two, mixing in the default's models).
if not workflow.overwrite_configfiles:
    configfile: os.path.join(workflow.basedir, "config/config.yaml")


try:
    from reprsim.config import ConfigError, validate_config
except ImportError as error:
    raise WorkflowError(
        "the reprsim package is not importable by this Snakemake; install it into the same "
        f"environment (pip install -e .) or use the README's setup command ({error})"
    )
try:
    # against the schema that ships inside the package; a job's own Snakemake on a cluster node (not the main
    # process) skips the models' transformers configs, which the submitting Snakemake has checked
    validate_config(config, model_configs=workflow.is_main_process)
except ConfigError as error:
    raise WorkflowError(str(error))


report: "src/reprsim/stages/report/captions/workflow.rst"


include: "rules/common.smk"
include: "rules/resources.smk"
include: "rules/hub.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/finetune.smk"
include: "rules/extract.smk"
include: "rules/compare.smk"
include: "rules/align.smk"
include: "rules/stitch.smk"
include: "rules/grounding.smk"
include: "rules/findings.smk"
include: "rules/universality.smk"
include: "rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True
