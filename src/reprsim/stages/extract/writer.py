"""A background thread that runs the extraction's writes (un-permuting, casting, Zarr compression) while
the main thread runs the next forward passes.

Work is queued as callables, run in order; the queue is bounded (`depth` items), so a slow disk makes
the forward passes wait instead of filling memory. A failure in the thread is never lost: the next
`submit` (or `close`) raises it in the main thread, and the thread drops the work queued after it.
Used as a context manager: leaving the block normally waits for every queued write and raises the
thread's error if there was one; leaving it by an exception (or KeyboardInterrupt) drops the queued
work and waits for the write in progress, so nothing touches the output after the block — the
caller's atomic directory can then be removed safely.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

_STOP = object()


class BackgroundWriter:
    """Run submitted callables in order on one thread (`threaded=False`: at once, in the caller).

    Counters, for the record: `busy` (wall seconds the submitted work took: Zarr compresses on threads of its
    own, so this thread's CPU time would miss it) and `blocked` (wall seconds `submit` waited on a full
    queue: the writer, not the forward passes, was the bottleneck)."""

    def __init__(self, depth: int = 2, threaded: bool = True, name: str = "reprsim-extract-writer"):
        if depth < 1:
            raise ValueError(f"writer queue depth must be at least 1; got {depth}")
        self.threaded = threaded
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._dropping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True) if threaded else None
        self._closed = self._noted = False
        self.busy = self.blocked = 0.0
        if self._thread is not None:
            self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._error is not None or self._dropping.is_set():
                continue  # drain: nothing after a failure (or an abort) runs
            function, args = item
            started = time.perf_counter()
            try:
                function(*args)
            except BaseException as error:  # noqa: BLE001 - surfaced in the main thread
                self._error = error
            self.busy += time.perf_counter() - started

    def _raise_if_failed(self) -> None:
        error = self._error
        if error is not None:
            if not self._noted:
                error.add_note("(raised in the extraction's writer thread)")
                self._noted = True
            raise error

    def submit(self, function: Callable[..., Any], *args: Any) -> None:
        """Queue `function(*args)`; blocks while the queue is full; raises the thread's error, if any."""
        if self._closed:
            raise RuntimeError("submit to a closed writer")
        if self._thread is None:
            started = time.perf_counter()
            function(*args)
            self.busy += time.perf_counter() - started
            return
        self._raise_if_failed()
        try:
            self._queue.put_nowait((function, args))
            return
        except queue.Full:
            waiting = time.perf_counter()
        while True:
            try:
                self._queue.put((function, args), timeout=0.1)
                self.blocked += time.perf_counter() - waiting
                return
            except queue.Full:
                self._raise_if_failed()
                if not self._thread.is_alive():
                    raise RuntimeError("the extraction's writer thread stopped")

    def _stop(self) -> None:
        if self._thread is None or self._closed:
            self._closed = True
            return
        self._closed = True
        self._queue.put(_STOP)  # the thread keeps consuming (or draining), so this returns
        self._thread.join()

    def close(self) -> None:
        """Wait until every queued write has run; raise the thread's error, if any."""
        self._stop()
        self._raise_if_failed()

    def abort(self) -> None:
        """Drop the queued writes and wait for the one in progress."""
        self._dropping.set()
        self._stop()

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close()
            return
        self.abort()
        if self._error is not None and error is not None and error is not self._error:
            error.add_note(f"the extraction's writer thread had also failed: {self._error!r}")
