"""The jobs Snakemake would run for a config, without running any: rule, wildcards, whether it takes a
GPU, and its cluster group. `reprsim plan` prices them; this module only asks Snakemake.

Snakemake's public API executes or prints a DAG but does not hand it out, so this builds it the way
Snakemake's own `--printdag` does (Workflow._prepare_dag, _build_dag) and reads dag.jobs; the tests pin
this against `snakemake -n`'s job counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]  # an editable install: the checkout holding the Snakefile


@dataclass(frozen=True)
class PlannedJob:
    rule: str
    wildcards: dict  # the job's wildcards; a pair job's also its model pairs, "pairs" (rules/compare.smk)
    gpu: bool
    group: str | None


def snakefile() -> Path:
    path = Path(os.environ.get("REPRSIM_SNAKEFILE", REPOSITORY / "Snakefile"))
    if not path.is_file():
        raise FileNotFoundError(f"no Snakefile at {path}: run reprsim plan from a reprsim checkout's editable "
                                "install, or set REPRSIM_SNAKEFILE to the workflow's Snakefile")
    return path


def planned_jobs(configfile: str | Path, workdir: str | Path, groups: dict[str, str] | None = None) -> list[PlannedJob]:
    """Every job of the workflow for `configfile` as if nothing existed yet (forceall), run from `workdir`
    (where results/ is). `groups`: rule -> group, as a cluster profile assigns them."""
    from snakemake.api import SnakemakeApi
    from snakemake.exceptions import RuleException, WorkflowError
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        GroupSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
        WorkflowSettings,
    )

    quiet = OutputSettings(quiet={Quietness.ALL})
    chatter = io.StringIO()
    with contextlib.redirect_stdout(chatter), SnakemakeApi(quiet) as api:
        workflow_api = api.workflow(
            snakefile=snakefile(),
            workdir=Path(workdir),
            config_settings=ConfigSettings(configfiles=[Path(configfile).resolve()]),
            resource_settings=ResourceSettings(cores=1),
            storage_settings=StorageSettings(),
            workflow_settings=WorkflowSettings(),
        )
        dag_api = workflow_api.dag(DAGSettings(forceall=True))
        workflow = dag_api.workflow_api._workflow
        workflow.group_settings = GroupSettings(overwrite_groups=dict(groups or {}))
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
        try:
            workflow._build_dag()
        except (WorkflowError, RuleException) as error:  # a missing local file, a bad wildcard: Snakemake's own words, no traceback
            raise DagError(f"Snakemake cannot build the workflow of {configfile} from {Path(workdir).resolve()} "
                           f"(the directory it would run in; --directory):\n{error}") from None
        return [PlannedJob(rule=job.rule.name, wildcards=_priced_by(job),
                           gpu=_asks_for_gpu(job.rule), group=(groups or {}).get(job.rule.name))
                for job in workflow.dag.jobs if not job.rule.norun]  # `all` only gathers targets


def _priced_by(job) -> dict:
    """A job's wildcards; a pair job's (a pair of blocks of models) with its model pairs, from its params."""
    wildcards = dict(job.wildcards_dict)
    if job.rule.name == "compare_pair":
        wildcards["pairs"] = [tuple(pair) for pair in json.loads(job.params.pairs)]
    return wildcards


class DagError(RuntimeError):
    """The workflow's DAG cannot be built for this config (Snakemake's message)."""


def _asks_for_gpu(rule) -> bool:
    resources = rule.resources
    return "gpu" in resources and bool(resources["gpu"].value)
