"""`python -m snakemake` with the SLURM executor's status checks at most CAP_SECONDS apart.

The executor plugin waits 10 s longer after each check that finds no job finished, up to 180 s: on a shared
cluster that spares the controller, on the one-node test cluster it leaves the node idle for most of a run
(a job of a minute is seen finished up to half a minute late, and the next one submitted only then). The
guide's command (docs/clusters.md) keeps the plugin's pace; only the cluster tests run through this.
"""

import sys

from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

CAP_SECONDS = 3


def _capped(executor: RemoteExecutor, seconds: float | None) -> None:
    executor._next_seconds_between_status_checks = None if seconds is None else min(seconds, CAP_SECONDS)


Executor.next_seconds_between_status_checks = property(RemoteExecutor.next_seconds_between_status_checks.fget,
                                                       _capped)

if __name__ == "__main__":
    sys.exit(main())
