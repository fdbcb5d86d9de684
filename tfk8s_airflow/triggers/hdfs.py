"""Trigger that waits in the triggerer for an HDFS partition to be complete.

Why a thread-offloaded sync client: the ``hdfs`` package is synchronous (requests), and a
blocking call in the triggerer's event loop would stall every other trigger. Each check is
one or two small WebHDFS GETFILESTATUS calls run with :func:`asyncio.to_thread`, bounded by
the connection's timeout. The connection is resolved by the sensor and passed in as plain
values (URLs, user, timeout: no secrets), so the trigger needs no connection lookup.

Its events are the package's shared outcome record (:class:`~tfk8s_airflow.job.run.records.TriggerOutcome`,
``kind="partition"``): succeeded, failed (a permanent error) or timed_out, with the reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from tfk8s_airflow.exceptions import PermanentError, StagingError
from tfk8s_airflow.job.run.records import TriggerOutcome
from tfk8s_airflow.job.states import EndState

__all__ = ["HdfsPartitionTrigger", "partition_state"]


def partition_state(hdfs: Any, path: str, marker: str | None) -> tuple[bool, str]:
    """``(complete, why)`` for ``path``: it exists and, when ``marker`` is set, so does
    ``path/marker``. Shared by the sensor's poke and the trigger."""
    if hdfs.status(path) is None:
        return False, f"{path} does not exist yet"
    if marker:
        marker_path = path.rstrip("/") + "/" + marker
        if hdfs.status(marker_path) is None:
            return False, f"{path} exists but its marker {marker} does not yet"
        return True, f"{marker_path} exists"
    return True, f"{path} exists"


def _event(state: EndState, reason: str) -> TriggerEvent:
    return TriggerEvent(TriggerOutcome("partition", state, reason).to_payload())


class HdfsPartitionTrigger(BaseTrigger):
    """Polls until the partition is complete or ``deadline`` (epoch seconds) passes."""

    def __init__(self, *, path: str, marker: str | None, config: dict[str, Any],
                 poll_interval: float, deadline: float | None) -> None:
        super().__init__()
        self.path = path
        self.marker = marker
        self.config = config
        self.poll_interval = poll_interval
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tfk8s_airflow.triggers.hdfs.HdfsPartitionTrigger",
                {"path": self.path, "marker": self.marker, "config": self.config,
                 "poll_interval": self.poll_interval, "deadline": self.deadline})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

        cfg = dict(self.config)
        cfg["urls"] = tuple(cfg["urls"])
        hdfs = WebHdfs(WebHdfsConfig(**cfg))
        why = ""
        while True:
            try:
                done, why = await asyncio.to_thread(partition_state, hdfs, self.path, self.marker)
            except PermanentError as exc:
                yield _event(EndState.FAILED, f"{type(exc).__name__}: {exc}")
                return
            except StagingError as exc:  # NameNode down: keep waiting until the deadline
                done, why = False, str(exc)
                self.log.warning("%s", exc)
            if done:
                yield _event(EndState.SUCCEEDED, why)
                return
            if self.deadline is not None and time.time() >= self.deadline:
                yield _event(EndState.TIMED_OUT, why)
                return
            left = f" ({self.deadline - time.time():.0f}s left before the sensor's timeout)" if self.deadline else ""
            self.log.info("waiting: %s%s", why, left)
            await asyncio.sleep(self.poll_interval)
