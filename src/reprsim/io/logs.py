"""Progress bars, and a job's stdout/stderr sent to its Snakemake log as well as the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from tqdm.auto import tqdm


class _Tee:
    def __init__(self, *streams: TextIO):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
            stream.flush()
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def tee_to_log(path: str | Path | None) -> Iterator[None]:
    """Copy everything printed inside the block to `path`; a failure's traceback lands there too."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as log:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(saved[0], log), _Tee(saved[1], log)
        offline = {name: os.environ[name] for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if name in os.environ}
        if offline:  # a job on a cluster's compute node (rules/common.smk): say it reads the hub cache alone
            print("hub: " + ", ".join(f"{k}={v}" for k, v in offline.items()), flush=True)
        try:
            yield
        except BaseException:
            log.write(traceback.format_exc())
            raise
        finally:
            sys.stdout, sys.stderr = saved


def progress(iterable: Iterable | None = None, **kwargs) -> tqdm:
    """A progress bar with its rate (examples/s, steps/s); redrawn at most every 2 s so logs stay short."""
    return tqdm(iterable, mininterval=2.0, dynamic_ncols=True, **kwargs)
