"""Pair work in blocks (reprsim.workflow.pair_blocks): which pair job computes which model pairs."""

from __future__ import annotations

from itertools import combinations_with_replacement

import pytest

from reprsim.workflow import pair_blocks


def test_auto_keeps_one_pair_per_job_up_to_16_models_then_blocks_of_8():
    assert pair_blocks.block_size("auto", 16) == 1 and pair_blocks.block_size(None, 5) == 1
    assert pair_blocks.block_size("auto", 17) == 8 and pair_blocks.block_size(3, 400) == 3
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="similarity.block_size"):
            pair_blocks.block_size(bad, 10)


def test_blocks_of_one_are_the_models_so_a_pair_job_is_a_model_pair():
    models = ["c", "a", "b"]
    blocks = pair_blocks.blocks(models, 1)
    assert blocks == {"a": ["a"], "b": ["b"], "c": ["c"]}
    pairs = list(combinations_with_replacement(sorted(models), 2))
    grouped = pair_blocks.PairBlocks(blocks, pairs)
    assert grouped.pairs == {pair: [pair] for pair in pairs}  # the path a__b.parquet of every pair, as before


@pytest.mark.parametrize("n_models,size", [(5, 2), (17, 8), (40, 8), (9, 3)])
def test_every_pair_is_computed_by_exactly_one_job_and_jobs_grow_with_the_blocks(n_models, size):
    models = [f"m{i:02d}" for i in range(n_models)]
    blocks = pair_blocks.blocks(models, size)
    assert [m for members in blocks.values() for m in members] == models  # the configuration's order
    pairs = list(combinations_with_replacement(models, 2))
    grouped = pair_blocks.PairBlocks(blocks, pairs)
    computed = [pair for job in grouped.pairs.values() for pair in job]
    assert sorted(computed) == sorted(pairs)
    k = len(blocks)
    assert len(grouped.pairs) == k * (k + 1) // 2 and k == -(-n_models // size)
    for (x, y), job in grouped.pairs.items():
        assert list(blocks).index(x) <= list(blocks).index(y)
        assert set(grouped.models(x, y)) <= set(blocks[x]) | set(blocks[y])


def test_a_model_added_at_the_end_changes_only_the_jobs_of_its_block():
    """The incremental promise: jobs not holding the new model keep their pairs (and so their params and inputs:
    Snakemake reruns none of them)."""
    models = [f"m{i}" for i in range(7)]
    before = pair_blocks.PairBlocks(pair_blocks.blocks(models, 3), combinations_with_replacement(models, 2))
    more = [*models, "new"]
    after = pair_blocks.PairBlocks(pair_blocks.blocks(more, 3), combinations_with_replacement(more, 2))
    changed = {key for key in after.pairs if before.pairs.get(key) != after.pairs[key]}
    assert changed == {("block000", "block002"), ("block001", "block002"), ("block002", "block002")}
