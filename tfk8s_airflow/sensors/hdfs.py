"""Sensor: wait until an HDFS partition exists and is complete (a ``_SUCCESS`` marker).

Why the marker: a partition directory appears as soon as its writer starts; only the
marker (Hadoop's ``_SUCCESS``, or whatever the producer writes) says the last file is
closed. Training on a half-written partition silently trains on less data.

Modes: ``reschedule`` by default (the worker slot is freed between pokes), ``poke``, or
``deferrable=True`` (waits in the triggerer, :class:`HdfsPartitionTrigger`). In every mode
``timeout`` ends the wait with a clear ``AirflowSensorTimeout`` naming what was missing.
A NameNode that does not answer is logged and waited out (it is usually a failover or a
restart); a permission error is permanent and fails the task at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, assert_never

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from tfk8s_airflow.connections import webhdfs, webhdfs_config
from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.job.run.records import TriggerOutcome
from tfk8s_airflow.job.states import EndState
from tfk8s_airflow.operators.base import check_trigger_queue, fail_permanently, on_trigger_queue
from tfk8s_airflow.triggers.hdfs import HdfsPartitionTrigger, partition_state

__all__ = ["HdfsPartitionSensor"]


class HdfsPartitionSensor(BaseSensorOperator):
    """Waits for ``path`` and ``path/marker`` on HDFS.

    :param path: HDFS directory of the partition (templated: ``/data/clicks/dt={{ ds }}``).
    :param marker: file whose existence means "complete" (templated; default ``_SUCCESS``;
        ``None`` or ``""``: the path existing is enough).
    :param webhdfs_conn_id: the WebHDFS connection.
    :param deferrable: wait in the triggerer instead of rescheduling.
    :param trigger_queue: the triggerer queue of the deferred wait's trigger (``[triggerer] queues_enabled``;
        a triggerer started with ``--queues`` of that name runs it).
    :param poke_interval, timeout, mode: as for every Airflow sensor (``mode`` defaults
        to ``reschedule``).
    """

    template_fields: Sequence[str] = ("path", "marker")
    ui_color = "#f0e0ff"

    def __init__(self, *, path: str, marker: str | None = "_SUCCESS",
                 webhdfs_conn_id: str = "webhdfs_default", deferrable: bool = False,
                 trigger_queue: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.path = path
        self.marker = marker
        self.webhdfs_conn_id = webhdfs_conn_id
        self.deferrable = deferrable
        self.trigger_queue = check_trigger_queue(trigger_queue)
        self._why = ""

    def _marker(self) -> str | None:
        return None if self.marker in (None, "", "None") else self.marker

    def poke(self, context: Any) -> bool:
        hdfs = webhdfs(self.webhdfs_conn_id)
        try:
            with fail_permanently():
                done, self._why = partition_state(hdfs, self.path, self._marker())
        except StagingError as exc:
            self.log.warning("%s (waiting on)", exc)
            return False
        self.log.info("%s", self._why)
        return done

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise AirflowSensorTimeout(
                    f"HDFS partition {self.path} not complete after {self.timeout:g}s: "
                    f"{self._why or exc}") from None
        if self.poke(context):
            return None
        config = asdict(webhdfs_config(self.webhdfs_conn_id))
        config["urls"] = list(config["urls"])
        on_trigger_queue(self)
        self.defer(trigger=HdfsPartitionTrigger(path=self.path, marker=self._marker(),
                                                config=config,
                                                poll_interval=float(self.poke_interval),
                                                deadline=time.time() + float(self.timeout)),
                   method_name="execute_complete")

    def execute_complete(self, context: Any, event: Any = None) -> None:
        with fail_permanently():
            outcome = TriggerOutcome.from_payload(event)
        match outcome.state:
            case EndState.SUCCEEDED:
                self.log.info("%s", outcome.reason)
                return None
            case EndState.TIMED_OUT:
                raise AirflowSensorTimeout(f"HDFS partition {self.path} not complete after "
                                           f"{self.timeout:g}s: {outcome.reason}")
            case EndState.FAILED | EndState.SKIPPED:
                raise AirflowFailException(outcome.reason or f"waiting for {self.path} failed")
            case _:
                assert_never(outcome.state)
