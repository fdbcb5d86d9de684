"""What every operator and sensor of the package does the same way.

Why: the one rule "a :class:`~tfk8s_airflow.exceptions.PermanentError` fails the task at
once, without retries; anything else is left to Airflow's retries" is written here once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tfk8s_airflow import features
from tfk8s_airflow.exceptions import PermanentError


def describe(exc: BaseException) -> str:
    """``SpecError: ...``: the message a failed task shows, naming the error class."""
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def fail_permanently() -> Iterator[None]:
    """Turn a PermanentError raised inside into ``AirflowFailException`` (no retry)."""
    try:
        yield
    except PermanentError as exc:
        raise AirflowFailException(describe(exc)) from exc


def partition_key(path: str) -> str:
    """``/data/clicks/dt=2026-01-01`` -> ``dt=2026-01-01``: the last ``key=value`` segments of a path,
    else the path itself (the partition an Asset event is about)."""
    parts = [p for p in str(path).rstrip("/").split("/") if p]
    tail = [p for p in parts if re.fullmatch(r"[\w.-]+=[^/]+", p)]
    return "/".join(tail[-3:]) if tail else str(path)


def describe_outlets(context: Mapping[str, Any], outlets: Iterable[Any], extra: Mapping[str, Any],
                     partition: str | None = None) -> None:
    """Attach ``extra`` (and the partition key) to the events Airflow emits for the task's Asset outlets.

    The partition key goes on the event itself from Airflow 3.3 (:data:`features.ASSET_PARTITIONS`);
    before, the event's ``extra`` (which callers give the key too) is all it carries."""
    from airflow.sdk import Asset

    partitions = features.has(features.ASSET_PARTITIONS)

    events = context.get("outlet_events")
    if events is None:
        return
    for outlet in outlets:
        if isinstance(outlet, Asset):
            accessor = events[outlet]
            accessor.extra.update(dict(extra))
            if partition and partitions:
                accessor.add_partitions(partition[:250])
