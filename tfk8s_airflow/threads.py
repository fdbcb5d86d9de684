"""Work done on a few threads that stops at the first failure: the rule of both sides of the pod wall.

Why one helper: the Kubernetes client's batches (creating, releasing, deleting a job's pods) and
the staging copy and checksum pods (their items, several streams at once) each ran a thread pool
that must not go on with the rest once one piece failed, nor leave a piece running when it
raises: the pieces not started are cancelled, the running ones awaited, and the first failure
raised. Standard library only, on the ground floor (the pod side imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar, cast

__all__ = ["run_all"]

T = TypeVar("T")


def run_all(fn: Callable[[T], object], items: Iterable[T], workers: int, prefix: str) -> None:
    """``fn`` of every item on at most ``workers`` threads (named ``prefix``); at the first failure the
    items not started are cancelled, the running ones awaited, and that failure raised."""
    todo = list(items)
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo))), thread_name_prefix=prefix) as pool:
        futures = [pool.submit(fn, item) for item in todo]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in done if f.exception() is not None), None)
        if failed is not None:
            for f in futures:
                f.cancel()
            wait(futures)
            raise cast(BaseException, failed.exception())
