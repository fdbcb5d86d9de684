"""Shard assignment: every file exactly once, deterministic, within the stated byte bound."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import DataError, SpecError
from tfk8s_airflow.staging.shards import assign_shards, parse_num_workers

files_st = st.dictionaries(
    st.text("abcdefghij/_-.0123456789", min_size=1, max_size=12),
    st.one_of(st.integers(0, 10), st.integers(0, 10**12)),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(files=files_st, workers=st.integers(1, 40))
def test_cover_exactly_once_and_within_bound(files, workers):
    plan = assign_shards(files, workers)
    assert list(plan.shards) == [f"worker-{i}" for i in range(workers)]
    assigned = [p for paths in plan.shards.values() for p in paths]
    assert sorted(assigned) == sorted(files)  # every file, exactly once
    for key, paths in plan.shards.items():
        assert plan.shard_bytes[key] == sum(files[p] for p in paths)
    assert plan.bound == max(files.values(), default=0)
    assert plan.imbalance <= plan.bound  # the stated bound: max - min <= largest file


@settings(max_examples=100, deadline=None)
@given(files=files_st, workers=st.integers(1, 12), seed=st.randoms())
def test_deterministic_whatever_the_input_order(files, workers, seed):
    items = list(files.items())
    shuffled = items[:]
    seed.shuffle(shuffled)
    assert assign_shards(items, workers) == assign_shards(shuffled, workers)


def test_uneven_example():
    plan = assign_shards({"a": 100, "b": 60, "c": 50, "d": 10, "e": 0}, 2)
    assert plan.shards == {"worker-0": ["a", "d", "e"], "worker-1": ["b", "c"]}
    assert plan.shard_bytes == {"worker-0": 110, "worker-1": 110}


def test_more_workers_than_files_gives_empty_shards():
    plan = assign_shards([("x", 5)], 3)
    assert plan.shards == {"worker-0": ["x"], "worker-1": [], "worker-2": []}


def test_bad_inputs():
    with pytest.raises(DataError, match="twice"):
        assign_shards([("x", 1), ("x", 2)], 2)
    with pytest.raises(SpecError, match="num_workers"):
        assign_shards([("x", 1)], 0)
    assert parse_num_workers("4") == 4
    with pytest.raises(SpecError):
        parse_num_workers("four")


def test_assignments_are_lists_of_paths_that_fit_a_configmap():
    from tfk8s_airflow.job.builders.shardmap import MAX_CONFIGMAP_BYTES, normalize_shards, shards_json

    assert normalize_shards({"shards": {"worker-0": ["a"]}, "files": 1}) == {"worker-0": ["a"]}
    assert normalize_shards({}) is None and normalize_shards(None) is None
    with pytest.raises(SpecError, match="shards.worker-0: must be a list of paths, got str"):
        normalize_shards({"worker-0": "abc"})  # once exploded into ["a", "b", "c"]
    big = {"worker-0": [f"/mnt/vol/cache/part-{i:06d}.csv" for i in range(40_000)]}
    assert len(shards_json(big).encode()) > MAX_CONFIGMAP_BYTES
    with pytest.raises(SpecError, match="40000 files .* more than a ConfigMap holds"):
        normalize_shards(big)
