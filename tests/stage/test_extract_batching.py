"""Extraction at the forward pass's rate: length-sorted windows give the unsorted store, the background
writer's failures surface and leave no store, autocast is CUDA's only."""

import threading
import warnings

import numpy as np
import pytest
import torch

from reprsim.io.store import open_store
from reprsim.stages.extract.activations import (
    TruncationWarning,
    _BlockWriter,
    extract_activations,
)
from reprsim.stages.extract.batching import padded_tokens, plan_windows
from reprsim.stages.extract.writer import BackgroundWriter

# ------------------------------------------------------------------ the plan


def test_windows_cover_every_example_once_in_length_sorted_batches():
    lengths = np.random.default_rng(0).integers(1, 60, size=103)
    windows = plan_windows(lengths, batch_size=8, sort_window=30)
    assert [(w.start, w.stop) for w in windows] == [(0, 30), (30, 60), (60, 90), (90, 103)]
    for w in windows:
        rows = np.concatenate(w.batches)
        assert sorted(rows) == list(range(w.start, w.stop))
        assert np.all(np.diff(lengths[rows]) <= 0)  # longest first
        assert [len(b) for b in w.batches][:-1] == [8] * (len(w.batches) - 1)
    unsorted = plan_windows(lengths, batch_size=8, sort_window=None)
    assert all(len(w.batches) == 1 and list(w.batches[0]) == list(range(w.start, w.stop)) for w in unsorted)
    assert [(w.start, w.stop) for w in plan_windows(lengths, 8, 8)] == [(w.start, w.stop) for w in unsorted]
    sorted_batches = [b for w in windows for b in w.batches]
    assert padded_tokens(lengths, sorted_batches) < padded_tokens(lengths, [w.batches[0] for w in unsorted])


def test_the_byte_cap_ends_windows_at_whole_batches():
    lengths = np.full(100, 10)
    windows = plan_windows(lengths, batch_size=4, sort_window=50, example_bytes=np.full(100, 1.0), window_bytes=10)
    assert {w.stop - w.start for w in windows[:-1]} == {8}  # 10 bytes fit 10 examples: two whole batches
    tiny = plan_windows(lengths, batch_size=4, sort_window=50, example_bytes=np.full(100, 1.0), window_bytes=0.5)
    assert {w.stop - w.start for w in tiny} == {4}  # never below one batch


def test_block_writer_keeps_only_copies_of_what_it_has_not_written(tmp_path):
    """Chunk-aligned writes from pieces of any size; the caller may overwrite what it appended."""
    import zarr

    data = np.random.default_rng(1).standard_normal((2, 103, 3)).astype(np.float32)
    array = zarr.open_group(tmp_path / "g.zarr", mode="w").create_array("a", shape=data.shape, chunks=(1, 10, 3),
                                                                         dtype="float32")
    writer, reused, start = _BlockWriter(array, 10), np.empty((2, 40, 3), np.float32), 0
    for size in (3, 4, 25, 1, 40, 9, 21):
        reused[:, :size] = data[:, start:start + size]
        writer.append(reused[:, :size])
        reused[:] = np.nan  # the next window overwrites the buffer
        start += size
    writer.close()
    np.testing.assert_array_equal(array[:], data)


# ------------------------------------------------------------------ the writer thread


def test_background_writer_runs_in_order_and_raises_its_error_in_the_caller():
    done = []
    with BackgroundWriter(depth=1) as writer:
        for i in range(5):
            writer.submit(done.append, i)
    assert done == list(range(5))

    def fail():
        raise OSError("disk full")

    writer = BackgroundWriter(depth=1)
    writer.submit(fail)
    with pytest.raises(OSError, match="disk full") as caught:
        for i in range(100):  # a later submit (or close) raises it
            writer.submit(done.append, i)
        writer.close()
    assert "writer thread" in "".join(caught.value.__notes__)
    writer.abort()
    assert done == list(range(5))  # nothing queued after the failure ran


def test_background_writer_abort_drops_queued_work():
    gate, done = threading.Event(), []
    writer = BackgroundWriter(depth=4)
    writer.submit(gate.wait)
    for i in range(3):
        writer.submit(done.append, i)
    writer._dropping.set()  # what abort() does first; then the running item may finish
    gate.set()
    writer.abort()
    assert done == [] and not writer._thread.is_alive()


@pytest.mark.parametrize("background", [True, False], ids=["thread", "main"])
def test_a_failing_write_surfaces_and_leaves_no_store(tiny_models, tiny_dataset, tmp_path, monkeypatch, background):
    real = _BlockWriter._write
    calls = {"n": 0}

    def failing(self, data):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("No space left on device")
        return real(self, data)

    monkeypatch.setattr(_BlockWriter, "_write", failing)
    with pytest.raises(OSError, match="No space left") as caught:
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "x.zarr", splits=["train", "test"],
                            batch_size=4, sort_window=12, chunk_rows=8, chunk_tokens=40, background_writer=background)
    assert ("writer thread" in "".join(getattr(caught.value, "__notes__", []))) == background
    assert list(tmp_path.iterdir()) == []  # neither the store nor its temporary
    assert not any(t.name == "reprsim-extract-writer" for t in threading.enumerate())


def test_an_interrupted_forward_pass_stops_the_writer_and_leaves_no_store(tiny_models, tiny_dataset, tmp_path,
                                                                           monkeypatch):
    """KeyboardInterrupt in the main thread while the writer thread has work queued: the queued writes are
    dropped, the one in progress finishes, and only then is the temporary removed."""
    import reprsim.stages.extract.activations as extract

    calls, real = {"n": 0}, extract._WindowSink.batch

    def slow_batch(self, batch):  # the writer's first batch lasts until long after the interrupt
        calls["n"] += 1
        threading.Event().wait(1.0)
        return real(self, batch)

    def dying_pool(hidden, mask, *args, _real=extract.pool, _n={"n": 0}):
        # the 4th batch: the writer is in batch 1, batches 2 and 3 fill its queue (depth 2)
        _n["n"] += 1
        if _n["n"] == 4:
            raise KeyboardInterrupt
        return _real(hidden, mask, *args)

    monkeypatch.setattr(extract._WindowSink, "batch", slow_batch)
    monkeypatch.setattr(extract, "pool", dying_pool)
    with pytest.raises(KeyboardInterrupt):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "x.zarr", splits=["train"], batch_size=4,
                            sort_window=16, background_writer=True)
    assert calls["n"] == 1  # the batch in progress finished, the queued ones were dropped
    assert list(tmp_path.iterdir()) == []
    assert not any(t.name == "reprsim-extract-writer" for t in threading.enumerate())


# ------------------------------------------------------------------ autocast


def test_autocast_on_a_cpu_is_refused_naming_the_key(tiny_models, tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match=r"extraction.autocast: bfloat16 .* runs on cpu; set extraction.autocast: null"):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "x.zarr", splits=["test"],
                            autocast="bfloat16", device=torch.device("cpu"))
    with pytest.raises(ValueError, match="extraction.autocast must be null, bfloat16 or float16"):
        extract_activations(tiny_models["bert"], tiny_dataset, tmp_path / "x.zarr", splits=["test"], autocast="fp8")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ sorted = unsorted, on real MiniLM


@pytest.fixture(scope="module")
def minilm_stores(minilm_dir, sst2_sample, tmp_path_factory):
    """MiniLM on 72 SST-2 sentences (two splits, the second with word rows and attention maps; some longer
    than max_length, so with words no token reached): unsorted, written in the main thread, and in sorted
    windows of 20 (20, 20, 20, 12: ragged batches of 8, a window across the split boundary), written by the
    background thread; chunks (16 rows, 100 tokens) straddle the windows."""
    root = tmp_path_factory.mktemp("sorting")
    common = dict(splits=["validation", "test"], max_examples=36, batch_size=8, max_length=40, chunk_rows=16,
                  chunk_tokens=100, detail_splits=["test"], attention=True, attention_dtype="float32")
    stores = {}
    for name, sort_window, background in (("unsorted", None, False), ("sorted", 20, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TruncationWarning)
            extract_activations(minilm_dir, sst2_sample, root / f"{name}.zarr", sort_window=sort_window,
                                background_writer=background, **common)
        stores[name] = open_store(root / f"{name}.zarr")
    return stores


def assert_same_store(store, reference, what: str) -> None:
    names = sorted(n for n, node in reference.members(max_depth=None) if hasattr(node, "dtype"))
    assert names == sorted(n for n, node in store.members(max_depth=None) if hasattr(node, "dtype"))
    for name in names:
        a, b = reference[name][:], store[name][:]
        assert a.shape == b.shape, name
        if a.dtype.kind == "f":  # padding changes float rounding only
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=2e-5, equal_nan=True, err_msg=f"{what} {name}")
        else:
            np.testing.assert_array_equal(b, a, err_msg=f"{what} {name}")


def test_sorted_windows_give_the_unsorted_store(minilm_stores):
    unsorted, ordered = minilm_stores["unsorted"], minilm_stores["sorted"]
    assert {"pooled/mean", "tokens/hidden", "words/hidden", "attention/maps", "attention/word_maps"} <= set(
        n for n, _ in unsorted.members(max_depth=None))
    assert np.isnan(unsorted["words/hidden"][:]).any()  # the truncated example's lost words stay NaN
    assert_same_store(ordered, unsorted, "sorted")


def test_the_store_records_its_batching(minilm_stores):
    unsorted, ordered = (minilm_stores[k].attrs["batching"] for k in ("unsorted", "sorted"))
    assert unsorted["sort_window"] is None and unsorted["windows"] == 9  # 72 / 8 batches, one per window
    assert ordered["sort_window"] == 20 and ordered["windows"] == 4
    assert ordered["padding"]["tokens"] == unsorted["padding"]["tokens"]
    assert ordered["padding"]["padded_tokens"] < unsorted["padding"]["padded_tokens"]
    assert unsorted["padding"]["padded_tokens"] == unsorted["padding"]["unsorted_padded_tokens"]
    assert ordered["autocast"] is None and ordered["writer"] == "background thread"
    assert unsorted["writer"] == "main thread" and not ordered["pinned_memory"]


def test_windows_cut_by_the_byte_cap_give_the_same_store(tiny_models, tiny_dataset, tmp_path):
    common = dict(splits=["train", "test"], batch_size=4, max_length=24, chunk_rows=16, chunk_tokens=50,
                  detail_splits=["test"], attention=True, attention_dtype="float32")
    extract_activations(tiny_models["gpt2"], tiny_dataset, tmp_path / "a.zarr", sort_window=None, **common)
    extract_activations(tiny_models["gpt2"], tiny_dataset, tmp_path / "b.zarr", sort_window=1000,
                        sort_window_mb=0.15, **common)
    capped = open_store(tmp_path / "b.zarr")
    assert 1 < capped.attrs["batching"]["windows"] < 15  # 60 examples: windows of a few batches, not one
    assert_same_store(capped, open_store(tmp_path / "a.zarr"), "capped")
