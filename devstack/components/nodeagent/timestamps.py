"""Times as the Kubernetes API writes them (RFC 3339, UTC), for the node agent's statuses.

A module of its own because containers, pods, the node and its lease all stamp times, and
each format is written once here.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
