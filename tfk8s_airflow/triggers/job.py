"""The triggers of a TF job: the sensor's (the whole job) and each replica task's (its replica).

Why triggers end the tasks themselves: a job of N replicas is N + 1 deferred tasks. When
they run in the triggerer from the start (``start_from_trigger``) and end there
(``TaskSuccessEvent`` / ``TaskFailedEvent`` / ``TaskSkippedEvent``), none of them costs a
worker process while the job trains, nor when it ends. All of a job's triggers share one
LIST loop (:mod:`tfk8s_airflow.k8s.watch`) and so one judgement per poll.

Deferred from a worker instead (``dag.test()``, or ``start_from_trigger=False``), the same
triggers fire a plain event with a :class:`~tfk8s_airflow.job.run.records.TriggerOutcome`, and
the task resumes in ``execute_complete``.

Where the job record comes from: passed in (deferred from a worker), or, started from the
triggerer, pulled from the XCom ``job`` of the setup task beside this one (``<group>.setup``),
once per job and triggerer process (:mod:`tfk8s_airflow.triggers.record_pull`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, assert_never

from airflow.triggers.base import BaseTrigger, TaskFailedEvent, TaskSkippedEvent, TaskSuccessEvent, TriggerEvent

from tfk8s_airflow.contract import CONTAINER_NAME
from tfk8s_airflow.exceptions import DataError, KubernetesApiError, RecordError
from tfk8s_airflow.job.builders.tensorboard import tensorboard_url
from tfk8s_airflow.job.kueue import ADMITTED, kueue_gates
from tfk8s_airflow.job.run.jobmetrics import JobMetrics
from tfk8s_airflow.job.run.judge import JobStatus, ReplicaOutcome, ReplicaState, replica_outcome
from tfk8s_airflow.job.run.records import JobProgress, JobRecord, JobSummary, ReplicaRef, ReplicaResult, TriggerOutcome
from tfk8s_airflow.job.run.verdict import summary_verdict
from tfk8s_airflow.job.states import EndState, JobState, end_of
from tfk8s_airflow.k8s.logstream import Incarnation, LogFollower
from tfk8s_airflow.k8s.watch import JobWatch, Snapshot, watch_job
from tfk8s_airflow.links import (
    ReplicaLogLink,
    TensorBoardLink,
    astore_link,
    axcom_push,
    link_xcom,
    replica_log_url,
)
from tfk8s_airflow.metrics import emit
from tfk8s_airflow.triggers.record_pull import pull_record
from tfk8s_airflow.volume import logs

__all__ = ["TFJobTrigger", "TFReplicaTrigger", "DEFAULT_LOG_BYTES", "WAITING_LOG_INTERVAL_S", "job_progress"]

#: Bytes of a replica's log written into its task log (half from the start, half from the end).
DEFAULT_LOG_BYTES = 1 << 20
#: The sensor says what it waits for at least this often, changes or not.
WAITING_LOG_INTERVAL_S = 60.0
#: The sensor refreshes its XCom ``progress`` this often while the job runs.
PROGRESS_PUSH_S = 10.0
#: Seconds a replica task waits, once its replica ended, for the last of its log to be streamed.
LOG_DRAIN_S = 10.0
#: The same for an untracked replica still running when the job ended (teardown stops it).
LOG_DRAIN_RUNNING_S = 2.0
#: Seconds a trigger pauses between its last log lines and its end: the triggerer closes a task's log
#: file when it handles the trigger's end, and a long last line (a replica's log) still on its way
#: there then landed in the triggerer's own log instead of the task's.
LOG_SETTLE_S = 1.0
#: Seconds an XCom read or write of a trigger may take (they go through the triggerer's supervisor):
#: a trigger never waits on one without bound.
XCOM_TIMEOUT_S = 120.0
#: The same for the job record, pulled first by every trigger: a fresh triggerer has been seen to
#: answer its first triggers' pulls a minute or more late, and a trigger without it can do nothing.
RECORD_PULL_TIMEOUT_S = 600.0


def _progress_text(snap: Snapshot) -> str:
    p = snap.progress
    if p is None or p.step is None:
        return ""
    parts = [f"step {p.step}" + (f"/{p.target_step}" if p.target_step else "")]
    if p.loss is not None:
        parts.append(f"loss {p.loss:.4g}")
    if p.examples_per_sec is not None:
        parts.append(f"{p.examples_per_sec:,.0f} examples/s")
    eta = eta_s(snap)
    if eta is not None:
        parts.append(f"ETA {eta:.0f}s")
    return "; " + ", ".join(parts)


def eta_s(snap: Snapshot) -> float | None:
    """Seconds to the target step at the rate of the recent history (None when unknown)."""
    p = snap.progress
    points = snap.history[-20:]
    if p is None or p.step is None or not p.target_step or len(points) < 2:
        return None
    span, steps = points[-1].at - points[0].at, points[-1].step - points[0].step
    if span <= 0 or steps <= 0:
        return None
    return max(p.target_step - p.step, 0) / (steps / span)


def job_progress(record: JobRecord, status: JobStatus, snap: Snapshot, state: JobState) -> JobProgress:
    """The job as the TF jobs view and the summary show it."""
    p = snap.progress
    replicas = {k: {"pod": st.pod, "phase": st.phase, "restarts": st.restarts, "exit_code": st.exit_code,
                    "node": st.node, "attempt": st.attempt} for k, st in sorted(status.replicas.items())}
    return JobProgress(job=record.job, namespace=record.namespace, state=state, updated_at=time.time(),
                       step=p.step if p else None, target_step=p.target_step if p else None,
                       loss=p.loss if p else None, examples_per_sec=p.examples_per_sec if p else None,
                       eta_s=eta_s(snap), history=snap.history, attempts=snap.attempts, replicas=replicas,
                       tensorboard_url=tensorboard_url(record.tensorboard_url, snap.tensorboard),
                       waiting=waiting_line(status, snap))


def waiting_line(status: JobStatus, snap: Snapshot) -> str:
    """What a running job waits for before it can start, for the TF jobs view: its place in Kueue's queue,
    or the gates of other controllers that hold its pods ("held by <gate>"); empty when nothing holds it."""
    if snap.admission is not None and snap.admission.state != ADMITTED:
        return snap.admission.describe()
    gates = sorted({g for st in status.replicas.values() if st.phase == "Pending" for g in st.held_by})
    return f"held by {', '.join(gates)}" if gates else ""
LOG_OMITTED = "[... the middle of this log is omitted: it is longer than {limit} bytes{where} ...]"


def setup_task_id(task_id: str) -> str:
    """``train.replica`` -> ``train.setup``: the setup task of the same task group."""
    return sibling_task_id(task_id, "setup")


def sibling_task_id(task_id: str, name: str) -> str:
    """``train.replica``, ``wait`` -> ``train.wait``: a task of the same task group, as ``tf_job()`` names them."""
    group, dot, _ = task_id.rpartition(".")
    return f"{group}.{name}" if dot else name


class _JobTriggerBase(BaseTrigger):
    """What both triggers share: the record, the watch, and how an outcome ends the task."""

    classpath = ""

    def __init__(self, *, job: Mapping[str, Any] | str | None = None, end_in_trigger: bool = False,
                 setup_task_id: str | None = None, log_bytes: int = DEFAULT_LOG_BYTES,
                 config_file: str | None = None) -> None:
        super().__init__()
        self.job = job
        self.end_in_trigger = end_in_trigger
        self.setup_task_id = setup_task_id
        self.log_bytes = log_bytes
        self.config_file = config_file

    def _kwargs(self) -> dict[str, Any]:
        return {"job": self.job, "end_in_trigger": self.end_in_trigger, "setup_task_id": self.setup_task_id,
                "log_bytes": self.log_bytes, "config_file": self.config_file}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return self.classpath, self._kwargs()

    async def _record(self) -> JobRecord:
        if self.job is not None:
            return JobRecord.from_xcom(self.job)
        ti = self.task_instance
        if ti is None or not hasattr(ti, "axcom_pull"):
            raise RecordError("no job record: pass job= (the setup task's XCom 'job') when deferring")
        source = self.setup_task_id or setup_task_id(ti.task_id)
        try:
            async with asyncio.timeout(RECORD_PULL_TIMEOUT_S):
                return await pull_record(ti, source)
        except TimeoutError:
            raise RecordError(f"pulling the job record (XCom 'job' of {source}) took longer than "
                              f"{RECORD_PULL_TIMEOUT_S:.0f}s: the triggerer could not reach Airflow's "
                              "metadata") from None

    def _watch(self, record: JobRecord) -> AbstractAsyncContextManager[JobWatch]:
        return watch_job(record, config_file=self.config_file)

    def _end(self, outcome: TriggerOutcome, xcoms: dict[str, Any]) -> TriggerEvent:
        if not self.end_in_trigger:
            return TriggerEvent(outcome.to_payload())
        match outcome.state:
            case EndState.SUCCEEDED:
                return TaskSuccessEvent(xcoms=xcoms)
            case EndState.SKIPPED:
                return TaskSkippedEvent(xcoms=xcoms)
            case EndState.FAILED | EndState.TIMED_OUT:
                return TaskFailedEvent(xcoms=xcoms)
            case _:
                assert_never(outcome.state)

    async def _log_of(self, watch: JobWatch, pod: str, container: str, restarts: int,
                      record: JobRecord) -> str:
        """A replica's log for the task log: bounded, with the previous container's after restarts."""
        where = f"; the whole log is archived under {record.log_dir}/{record.job}" if record.log_dir else ""
        parts = []
        if restarts and container == CONTAINER_NAME:
            prev = await self._bounded(watch, pod, container, previous=True, where=where)
            parts.append(f"--- previous container of {pod} (restarts: {restarts}) ---\n{prev}")
        text = await self._bounded(watch, pod, container, previous=False, where=where)
        label = "" if container == CONTAINER_NAME else f" (container {container})"
        parts.append(f"--- log of {pod}{label} ---\n{text}")
        return "\n".join(parts)

    async def _bounded(self, watch: JobWatch, pod: str, container: str, *, previous: bool, where: str) -> str:
        try:
            log = await watch.read_log(pod, container, max_bytes=self.log_bytes, previous=previous)
        except KubernetesApiError as exc:
            if exc.status in (400, 404):  # not started (or restarted) yet, or a node that keeps no logs
                which = "the previous container" if previous else f"container {container}"
                return (f"<no log yet: {which} of {pod} has none to give (not started yet, or its node keeps no "
                        f"logs; the API server answered {exc.status})>")
            return f"<log unavailable: {exc}>"
        except (OSError, TimeoutError) as exc:
            return f"<log unavailable: {type(exc).__name__}: {exc}>"
        if log.tail is None:
            return log.head.rstrip("\n") or f"<empty: container {container} of {pod} wrote nothing to its log>"
        marker = LOG_OMITTED.format(limit=self.log_bytes, where=where)
        return f"{log.head.rstrip()}\n{marker}\n{log.tail.rstrip()}"


class TFJobTrigger(_JobTriggerBase):
    """The sensor's trigger: the job's state by its success policy, one shared LIST per poll.

    :param timeout: seconds after the job's creation at which the sensor gives up (its own
        timeout; the job's ``active_deadline`` fails the job earlier as a job failure).
    """

    classpath = "tfk8s_airflow.triggers.job.TFJobTrigger"

    def __init__(self, *, timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout = timeout
        self._tensorboard_said = ""  # the last TensorBoard line logged
        self._link_pushed: str | None = None  # the TensorBoard link's XCom, once pushed
        self._push_failed = False  # a failed progress push is said once

    def _kwargs(self) -> dict[str, Any]:
        return {**super()._kwargs(), "timeout": self.timeout}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            record = await self._record()
        except RecordError as exc:
            self.log.error("%s", exc)
            yield self._end(TriggerOutcome("job", EndState.FAILED, str(exc)), {})
            return
        policy = record.policy
        checked: set[str] = set()
        attempts_said = 0
        ti = self.task_instance
        self._metrics = JobMetrics(record, dag=getattr(ti, "dag_id", None), task=getattr(ti, "task_id", None))
        async with self._watch(record) as watch:
            last_line, last_said, pushed = "", 0.0, 0.0
            async for snap in watch.snapshots():
                if snap.error is not None:
                    if snap.permanent:
                        reason = f"cannot watch job {record.job}: {snap.error}"
                        self.log.error("%s", reason)
                        summary = JobSummary.of(record, JobStatus(JobState.FAILED, reason))
                        yield self._end(TriggerOutcome("job", EndState.FAILED, reason, summary),
                                        {"summary": summary.to_xcom()})
                        return
                    self.log.warning("listing the pods of %s failed: %s", record.job, snap.error)
                    continue
                status = snap.status
                assert status is not None
                await self._warn_simulated(watch, status, checked)
                emit(self._metrics.on_status(status, snap.attempts, time.time()))
                self._say_tensorboard(record, snap)
                for attempt in snap.attempts[attempts_said:]:
                    self.log.warning("TF job %s: attempt %d after %s (%s): %s", record.job, attempt.number,
                                     attempt.failure_class, attempt.action.replace("_", " "), attempt.reason)
                attempts_said = len(snap.attempts)
                now = time.monotonic()
                if snap.restarting:
                    self.log.warning("TF job %s: %s", record.job, snap.restarting)
                    continue
                match status.state:
                    case JobState.RUNNING | JobState.QUEUED | JobState.HELD:
                        line = (f"TF job {record.job}: {status.progress()}{_progress_text(snap)}; "
                                f"waiting for {status.waiting_for(policy)}")
                        if snap.admission is not None:  # a job with a queue while Kueue holds it: where it waits
                            line += f"; {snap.admission.describe()}"
                        if line != last_line or now - last_said >= WAITING_LOG_INTERVAL_S:
                            # How long a Pending replica has waited changes every poll: said, not compared.
                            pending = status.pending_note(policy, time.time(), record.created_at)
                            self.log.info("%s%s", line, f"; {pending}" if pending else "")
                            last_line, last_said = line, now
                        if now - pushed >= PROGRESS_PUSH_S:
                            pushed = now
                            await self._push_progress(job_progress(record, status, snap, status.state))
                        if self.timeout and time.time() - record.created_at > self.timeout:
                            yield self._timed_out(record, status, snap)
                            return
                    case JobState.SUCCEEDED | JobState.FAILED:
                        event = await self._finish(record, status, watch, snap)
                        await asyncio.sleep(LOG_SETTLE_S)
                        yield event
                        return
                    case _:
                        assert_never(status.state)

    def _timed_out(self, record: JobRecord, status: JobStatus, snap: Snapshot) -> TriggerEvent:
        """The sensor's own timeout passed while the job still ran."""
        reason = (f"the sensor's timeout of {self.timeout:.0f}s passed while the job still ran; "
                  f"it waited for {status.waiting_for(record.policy)}")
        self.log.error("TF job %s: %s", record.job, reason)
        emit(self._metrics.at_end(status, str(EndState.TIMED_OUT), None, None, time.time()))
        url = tensorboard_url(record.tensorboard_url, snap.tensorboard)
        summary = JobSummary.of(record, status, tensorboard_url=url)
        return self._end(TriggerOutcome("job", EndState.TIMED_OUT, reason, summary),
                         {"summary": summary.to_xcom(), **link_xcom(TensorBoardLink, url)})

    async def _push_progress(self, progress: JobProgress) -> None:
        """The sensor's XCom ``progress`` while the job runs (the TF jobs view reads it), and the
        TensorBoard link's XCom once its URL is known, so the link works while the job runs."""
        ti = self.task_instance
        if ti is None or not hasattr(ti, "xcom_push") or not hasattr(ti, "axcom_pull"):
            return  # deferred from a worker (dag.test()): the summary carries the progress at the end
        try:
            async with asyncio.timeout(XCOM_TIMEOUT_S):
                await axcom_push(ti, "progress", progress.to_xcom())
                if progress.tensorboard_url and progress.tensorboard_url != self._link_pushed:
                    await astore_link(ti, TensorBoardLink, progress.tensorboard_url)
                    self._link_pushed = progress.tensorboard_url
        except Exception as exc:  # noqa: BLE001 - progress is informative: never fail the job for it
            say = self.log.debug if self._push_failed else self.log.warning
            say("pushing the progress failed: %s: %s", type(exc).__name__, exc)
            self._push_failed = True

    def _say_tensorboard(self, record: JobRecord, snap: Snapshot) -> None:
        """One line per change of the job's TensorBoard (it never changes the job's outcome)."""
        if not record.tensorboard_pod:
            return
        state = snap.tensorboard
        url = tensorboard_url(record.tensorboard_url, state)
        where = f", at {url}" if url else ("" if record.tensorboard_url else
                                           " (no link: [tfk8s] tensorboard_url is not set)")
        line = f"TensorBoard {record.tensorboard_pod}: {state.describe() if state else 'no pod'}{where}"
        if line != self._tensorboard_said:
            self.log.info("%s", line)
            self._tensorboard_said = line

    async def _warn_simulated(self, watch: JobWatch, status: JobStatus, checked: set[str]) -> None:
        """Say once per replica when a program that should run landed on a simulated (KWOK) node."""
        for st in status.replicas.values():
            if st.node and st.has_command and st.key not in checked:
                checked.add(st.key)
                if await watch.is_simulated(st.node):
                    self.log.warning("%s runs on %s, a simulated (KWOK) node: its command does not really run "
                                     "there (fix: a node_selector for real nodes)", st.key, st.node)

    async def _finish(self, record: JobRecord, status: JobStatus, watch: JobWatch, snap: Snapshot) -> TriggerEvent:
        final = job_progress(record, status, snap, status.state)
        # overrides: e.g. the memory an OOM relaunch chose
        summary = JobSummary.of(record, status, tensorboard_url=final.tensorboard_url, progress=final,
                                overrides=watch.overrides)
        xcoms = {"summary": summary.to_xcom(), **link_xcom(TensorBoardLink, final.tensorboard_url)}
        # No last XCom 'progress': the summary carries it (the TF jobs view reads it there), and a
        # round trip to the triggerer's supervisor here waits behind every other task's ending.
        self.log.info("watch: %s", watch.stats())
        for key, rep in summary.replicas.items():
            duration = rep.get("duration_s")
            self.log.info("  %-12s %-10s exit=%s restarts=%s node=%s duration=%s", key, rep.get("phase"),
                          rep.get("exit_code", "-"), rep.get("restarts"), rep.get("node", "-"),
                          f"{duration}s" if duration is not None else "-")
        end = end_of(status.state)
        emit(self._metrics.at_end(status, str(end), status.failure_class, final, time.time()))
        if end == EndState.SUCCEEDED:
            self.log.info("TF job %s succeeded: %s", record.job, status.reason)
            return self._end(TriggerOutcome("job", end, status.reason, summary), xcoms)
        message = f"TF job {record.job} failed: {status.reason}"
        if status.failed_pod:
            st = next((r for r in status.replicas.values() if r.pod == status.failed_pod), None)
            log = await self._log_of(watch, status.failed_pod, status.failed_container or CONTAINER_NAME,
                                     st.restarts if st else 0, record)
            message += "\n" + log
        self.log.error("%s", message)
        return self._end(TriggerOutcome("job", end, status.reason, summary), xcoms)


class TFReplicaTrigger(_JobTriggerBase):
    """A replica task's trigger: that replica's outcome, and its log into the task log.

    :param replica: the replica's key (``worker-0``); default: the task's map index in the
        record's replica plan.
    """

    classpath = "tfk8s_airflow.triggers.job.TFReplicaTrigger"

    def __init__(self, *, replica: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.replica = replica

    def _kwargs(self) -> dict[str, Any]:
        return {**super()._kwargs(), "replica": self.replica}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            record = await self._record()
            if self.replica is not None:
                ref = record.replica_by_key(self.replica)
            else:
                map_index = getattr(self.task_instance, "map_index", None)
                ref = record.replica(int(map_index if map_index is not None else -1))
        except RecordError as exc:
            self.log.error("%s", exc)
            yield self._end(TriggerOutcome("replica", EndState.FAILED, str(exc)), {})
            return
        kind = "tracked" if ref.tracked else "untracked: it ends with the job"
        self.log.info("replica %s of TF job %s: pod %s/%s (%s)", ref.key, record.job, record.namespace, ref.pod, kind)
        async with self._watch(record) as watch:
            follower = await self._follower(record, ref, watch)
            link = await self._log_link(record, ref) if record.log_dir else {}
            try:
                async for event in self._follow_replica(record, ref, watch, follower, link):
                    yield event
                    return
            finally:
                if follower is not None:
                    await follower.close(0)

    async def _follow_replica(self, record: JobRecord, ref: ReplicaRef, watch: JobWatch,
                              follower: LogFollower | None, link: dict[str, str]) -> AsyncIterator[TriggerEvent]:
        """The replica's snapshots until its outcome: one event."""
        last = ""
        attempts_said = 0
        async for snap in watch.snapshots():
            if snap.error is not None:
                if snap.permanent:
                    reason = f"cannot watch job {record.job}: {snap.error}"
                    self.log.error("%s", reason)
                    yield self._end(TriggerOutcome("replica", EndState.FAILED, reason), {})
                    return
                continue
            status = snap.status
            assert status is not None
            for attempt in snap.attempts[attempts_said:]:
                mine = not attempt.replicas or ref.key in attempt.replicas
                self.log.warning("attempt %d of TF job %s (%s): %s%s", attempt.number, record.job,
                                 attempt.failure_class, attempt.reason,
                                 f"; {ref.key} was recreated" if mine else f"; {ref.key} kept running")
            attempts_said = len(snap.attempts)
            if snap.restarting:
                continue
            st = status.replicas.get(ref.key)
            now = st.describe() if st is not None else f"{ref.key}: no pod"
            if st is not None and snap.admission is not None and kueue_gates(st.held_by):
                now = f"{st.key} {st.phase} ({snap.admission.describe()})"
            if now != last:
                self.log.info("%s", now)
                last = now
            if follower is not None and st is not None:
                await self._feed(follower, watch, st)
            outcome = replica_outcome(status, ref.key, ref.tracked)
            if outcome is None:
                continue
            if st is None:  # its pod is gone: teardown ran before this task saw the job end
                outcome = await self._outcome_after_teardown(ref) or outcome
            streamed = None
            if follower is not None:
                await follower.close(LOG_DRAIN_RUNNING_S if st is not None and st.phase == "Running"
                                     else LOG_DRAIN_S)
                if follower.written:
                    streamed = follower.path
                    self.log.info("the whole log of %s (%d bytes) is in %s", ref.pod, follower.written,
                                  follower.path)
            result = ReplicaResult(key=ref.key, pod=ref.pod, state=outcome.state, reason=outcome.reason,
                                   phase=st.phase if st else "", exit_code=st.exit_code if st else None,
                                   restarts=st.restarts if st else 0, node=st.node if st else None,
                                   log=streamed, log_bytes=follower.written if streamed and follower else None)
            if st is not None:
                container = (status.failed_container if status.failed_pod == st.pod and status.failed_container
                             else st.init_failure.container if st.init_failure is not None else CONTAINER_NAME)
                self.log.info("%s", await self._log_of(watch, ref.pod, container, st.restarts, record))
            say = self.log.info if outcome.state != EndState.FAILED else self.log.error
            say("replica %s %s: %s", ref.key, outcome.state, outcome.reason)
            await asyncio.sleep(LOG_SETTLE_S)
            yield self._end(TriggerOutcome("replica", outcome.state, outcome.reason, replica=result),
                            {"replica": result.to_xcom(), **link})
            return

    async def _outcome_after_teardown(self, ref: ReplicaRef) -> ReplicaOutcome | None:
        """The outcome of a replica whose job is gone (its pods deleted by teardown before this task saw
        the job end: the triggerer was down, or this task started late), from the durable verdict: the
        job sensor's XCom ``summary`` (None when there is none to read: the judged outcome stands)."""
        ti = self.task_instance
        summary: Any = None
        if ti is not None and hasattr(ti, "axcom_pull") and getattr(ti, "task_id", None):
            source = sibling_task_id(ti.task_id, "wait")
            try:
                async with asyncio.timeout(XCOM_TIMEOUT_S):
                    summary = await ti.axcom_pull(task_ids=source, key="summary", map_indexes=-1)
            except Exception as exc:  # noqa: BLE001 - no verdict readable: said below
                self.log.warning("reading the job's verdict (XCom 'summary' of %s) failed: %s: %s", source,
                                 type(exc).__name__, exc)
        verdict = summary_verdict(summary)
        if verdict is None:
            return None
        state, reason, replicas = verdict
        gone = " (its pod was gone when this task looked: teardown had run)"
        mine = replicas.get(ref.key)
        phase = mine.get("phase") if isinstance(mine, Mapping) else None
        if ref.tracked and phase == "Succeeded":
            return ReplicaOutcome(EndState.SUCCEEDED, f"{ref.key} exited 0{gone}", None)
        if phase == "Failed":
            return ReplicaOutcome(EndState.FAILED, f"{ref.key} failed{gone}", None)
        found = replica_outcome(JobStatus(state, reason), ref.key, ref.tracked)
        return ReplicaOutcome(found.state, f"{found.reason}{gone}", None) if found is not None else None

    async def _follower(self, record: JobRecord, ref: ReplicaRef, watch: JobWatch) -> LogFollower | None:
        """A follower of the replica's log when the job has a log directory this process sees."""
        if not record.log_dir:
            return None
        try:
            await asyncio.to_thread(logs.open_log_dir, record.log_dir)
        except (OSError, DataError) as exc:
            self.log.info("the log of %s is not streamed: the job's log directory %s cannot be used here (%s; "
                          "mount it on the triggerer, or rely on teardown's tail)", ref.pod, record.log_dir, exc)
            return None
        self.log.info("streaming the whole log of %s to %s/%s/%s.log", ref.pod, record.log_dir, record.job, ref.pod)
        return LogFollower(open_api=watch.open_api, namespace=record.namespace, pod=ref.pod,
                           container=CONTAINER_NAME, log_dir=record.log_dir, job=record.job)

    async def _log_link(self, record: JobRecord, ref: ReplicaRef) -> dict[str, str]:
        """The replica log link's XCom (pushed now from the triggerer, so it works while the replica
        runs, and returned for the end event)."""
        ti = self.task_instance
        if ti is None or not getattr(ti, "run_id", None):
            return {}  # deferred from a worker (dag.test()): execute_complete stores the link
        link = link_xcom(ReplicaLogLink, replica_log_url(ti.dag_id, ti.run_id, record.job, ref.key))
        if hasattr(ti, "axcom_pull"):
            try:
                async with asyncio.timeout(XCOM_TIMEOUT_S):
                    await astore_link(ti, ReplicaLogLink, next(iter(link.values()), None))
            except Exception as exc:  # noqa: BLE001 - a link is informative: never fail the replica for it
                self.log.warning("storing the replica log link failed: %s: %s", type(exc).__name__, exc)
        return link

    async def _feed(self, follower: LogFollower, watch: JobWatch, st: ReplicaState) -> None:
        """Tell the follower which container runs; none on a simulated node (no log there)."""
        if st.container_id is None:  # not started yet, or waiting to restart
            follower.update(None, running=False)
            return
        if st.node and await watch.is_simulated(st.node):
            return
        running = st.phase == "Running" and st.exit_code is None
        follower.update(Incarnation(st.created, st.container_id, st.restarts), running=running)
