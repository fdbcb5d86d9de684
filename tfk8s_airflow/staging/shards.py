"""Balanced, deterministic assignment of input files to workers, by bytes.

Why by bytes and not by file count: partitions are uneven (one 2 GB file next to many small
ones) and a synchronous step waits for the slowest worker, so the quantity to balance is
the bytes each worker reads. Why deterministic: a retried or cleared staging task must give
every worker the same files it had, and tests must be able to predict the result.

Algorithm (LPT, "longest processing time first"): files are sorted by size descending, then
by path; each goes to the currently least-loaded worker (lowest index on ties).

Bound: ``max(load) - min(load) <= largest file size``. Proof: let worker ``w`` end with the
largest load, and ``f`` be the last file it received. When ``f`` was assigned, ``w`` was the
least loaded, so ``load(w) - size(f) <= load_then(v) <= load(v)`` for every worker ``v``
(loads only grow). Hence ``max - min = load(w) - min(load) <= size(f) <= largest size``.
(``tests/unit/test_shards.py`` checks it as a property.) With more workers than files some
workers get an empty list; they still appear as keys so every replica finds its entry.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tfk8s_airflow.exceptions import DataError, SpecError

__all__ = ["ShardPlan", "assign_shards", "shard_key", "parse_num_workers"]


def shard_key(index: int, role: str = "worker") -> str:
    """``worker-<i>``: the key ``tfk8s_airflow.pod.runtime`` looks up for its own replica."""
    return f"{role}-{index}"


@dataclass(frozen=True)
class ShardPlan:
    """The result of :func:`assign_shards`: paths and byte totals per worker key."""

    shards: dict[str, list[str]]
    shard_bytes: dict[str, int]
    bound: int  # the guaranteed max-min imbalance: the largest file size

    @property
    def imbalance(self) -> int:
        loads = list(self.shard_bytes.values())
        return max(loads) - min(loads) if loads else 0


def parse_num_workers(value: object, field: str = "num_workers") -> int:
    """An int >= 1 from an int or a rendered template string such as ``"4"``."""
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise SpecError(f"must be a positive integer, got {value!r}", field=field) from None
    if isinstance(value, bool) or number < 1:
        raise SpecError(f"must be a positive integer, got {value!r}", field=field)
    return number


def assign_shards(files: Iterable[tuple[str, int]] | Mapping[str, int], num_workers: int,
                  role: str = "worker") -> ShardPlan:
    """Assign ``(path, size)`` pairs to ``num_workers`` workers, balanced by bytes (LPT).

    Every path lands in exactly one shard; within a shard paths keep the order they were
    assigned in (largest first). Raises :class:`DataError` for duplicate paths or negative
    sizes (a listing bug), :class:`SpecError` for ``num_workers < 1``.
    """
    items: Sequence[tuple[str, int]] = list(files.items() if isinstance(files, Mapping) else files)
    num_workers = parse_num_workers(num_workers)
    seen: set[str] = set()
    for path, size in items:
        if path in seen:
            raise DataError(f"file listed twice: {path}")
        if size < 0:
            raise DataError(f"negative size {size} for {path}")
        seen.add(path)
    ordered = sorted(items, key=lambda item: (-item[1], item[0]))
    heap = [(0, i) for i in range(num_workers)]  # (load, index): least loaded, lowest index
    shards: list[list[str]] = [[] for _ in range(num_workers)]
    loads = [0] * num_workers
    for path, size in ordered:
        load, index = heapq.heappop(heap)
        shards[index].append(path)
        loads[index] = load + size
        heapq.heappush(heap, (loads[index], index))
    keys = [shard_key(i, role) for i in range(num_workers)]
    return ShardPlan(shards=dict(zip(keys, shards, strict=True)), shard_bytes=dict(zip(keys, loads, strict=True)),
                     bound=max((size for _, size in items), default=0))
