"""The one error for a damaged workflow output: which file, what is wrong, and the command that remakes it.

Readers (tables, stores, models) raise it when an output they read is truncated, damaged or
incomplete; `reprsim verify` prints one per problem. Torch-free.

The command names the output, not the rule: Snakemake finds the rule itself, and importing the
rule map (`reprsim.workflow.paths.MADE_BY`) here would make every job's code depend on it, so that
adding a path would rerun every job. `reprsim verify`, which is no job, adds the rule's name.
"""

from __future__ import annotations

from pathlib import Path


def remake_command(output: str | Path) -> str:
    """The command that remakes workflow output `output` (a file or a directory output) and what reads it.

    `--forcerun PATH` reruns the one job that writes PATH (Snakemake finds the rule from the path)
    and then its consumers. Deleting the output is not enough: Snakemake does not remake a missing
    intermediate output whose consumers are up to date.
    """
    path = Path(output)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())  # Snakemake matches targets relative to the workflow directory
    return f"snakemake --forcerun {path}"


class CorruptOutputError(RuntimeError):
    """A workflow output that cannot be trusted: `path` (the damaged file), `problem`, and how to remake it.

    `output` is the workflow output to remake (a store or model directory holding `path`, or `path`
    itself); `rule`, when known, names the rule that writes it.
    """

    def __init__(self, path: str | Path, problem: str, output: str | Path | None = None, rule: str | None = None):
        self.path, self.problem = Path(path), problem
        self.output = Path(output) if output is not None else self.path
        self.remake = remake_command(self.output)
        made_by = f" (rule {rule})" if rule else ""
        super().__init__(f"{self.path}: {problem}. Remake it, in the workflow directory with your usual "
                         f"options: {self.remake}{made_by}")
