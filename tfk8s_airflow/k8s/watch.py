"""One LIST loop per job in the triggerer, shared by the job's sensor and all its replica tasks.

Why shared: a job of N replicas has N + 1 deferred tasks (one per replica, plus the sensor),
all waiting on the same pods. Each polling on its own would cost N + 1 LISTs per poll and
N + 1 judgements of the same pods. Here the first trigger of a job that subscribes starts
one loop for the job (per event loop: the triggerer's, or ``dag.test()``'s own per trigger);
every poll makes exactly one LIST request over one kept-open API connection, judges the pods
once (off the event loop, in a thread, so a 512-pod LIST never stalls other triggers) and
publishes the result to every subscriber. The loop ends with its last subscriber.

Per poll the loop also reads the job's progress (one bounded log read of the lead replica,
:mod:`tfk8s_airflow.k8s.logreads`, for its newest ``tfk8s.progress`` line, and the chief's
``checkpoint`` file when the model directory is visible here; both parsed by
:mod:`tfk8s_airflow.job.run.progress`), checks the nodes of the job's pods every few seconds
(:mod:`tfk8s_airflow.k8s.nodes`), and lets
the recovery planner (:mod:`tfk8s_airflow.job.run.recovery`) decide; a group restart or a
replacement is carried out here (:mod:`tfk8s_airflow.k8s.relaunch`) while the subscribers see
the job as running, restarting.

For a job with a Kueue ``queue``, while Kueue's gate holds its pods, each poll also reads the job's
Workload (one GET) and about once a minute its place in the queue (:mod:`tfk8s_airflow.k8s.queuewatch`):
published with the snapshot, and a Workload Kueue will never admit fails the job at once.

Transient API errors are published too (subscribers decide how many they tolerate);
permanent ones (403, 404 namespace) end the watch with that error.

Why nothing of it can wedge a trigger: every request carries a timeout
(:data:`REQUEST_TIMEOUT_S`), nothing raised inside a poll ends the loop (an unexpected error is
published as a transient one, and logged once), and a subscriber that waits longer than
:func:`stale_after` for a snapshot restarts the loop itself when it has stopped or stalled, so
the loop runs as long as anyone listens, whatever happened to it. Subscribers are counted by
token, so an exit can only ever remove its own subscription.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.contract import CONTAINER_NAME
from tfk8s_airflow.exceptions import DataError, KubernetesApiError, PermanentKubernetesApiError
from tfk8s_airflow.job.builders.tensorboard import TensorBoardState
from tfk8s_airflow.job.kueue import Admission
from tfk8s_airflow.job.run.judge import INFRASTRUCTURE, STALLED, JobPolicy, JobStatus
from tfk8s_airflow.job.run.observe import judge_pods
from tfk8s_airflow.job.run.progress import checkpoint_step_of, read_progress
from tfk8s_airflow.job.run.records import Attempt, JobRecord, ProgressPoint
from tfk8s_airflow.job.run.recovery import FAIL, REPLACE, RESTART_GROUP, Decision, Progress, decide
from tfk8s_airflow.job.states import JobState, is_final
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S, wrap_api_error
from tfk8s_airflow.k8s.logreads import BoundedLog, read_bounded
from tfk8s_airflow.k8s.nodes import NodeWatch
from tfk8s_airflow.k8s.queuewatch import QueueWatch
from tfk8s_airflow.k8s.relaunch import GONE_TIMEOUT_S
from tfk8s_airflow.nofollow import SafeDir

#: Seconds after an attempt is leased during which its recreated pods may not be recorded yet (created, then
#: recorded on the Service): a replica missing then, with unrecorded pods in its place, is not yet lost.
RECORD_GRACE_S = GONE_TIMEOUT_S + 4 * REQUEST_TIMEOUT_S
#: Consecutive failed polls after which the watch gives up (the API is unreachable).
MAX_CONSECUTIVE_ERRORS = 10
#: The API connection is reopened this often, so short-lived credentials (exec auth) refresh.
RECONNECT_S = 600.0
#: Parallel log reads per job when many replicas end at once.
LOG_CONCURRENCY = 8
#: Polls without a snapshot after which a subscriber restarts a stopped or stalled loop ...
STALE_POLLS = 4
#: ... but never sooner than this (a slow LIST, a recovery's API calls).
STALE_MIN_S = 20.0
#: The progress points kept (the summary's history).
HISTORY = 240
PROGRESS_TAIL_BYTES = 32 * 1024
CHECKPOINT_FILE_MAX = 64 * 1024


@dataclass(frozen=True)
class Snapshot:
    """One poll of a job: its judged status (or the error the LIST met), progress and attempts."""

    seq: int
    at: float
    status: JobStatus | None
    error: KubernetesApiError | None = None
    permanent: bool = False
    pods: int = 0
    progress: Progress | None = None
    history: tuple[ProgressPoint, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    restarting: str | None = None  # what the recovery is doing right now
    tensorboard: TensorBoardState | None = None  # the job's TensorBoard pod in the same LIST (never judged)
    admission: Admission | None = None  # a job with a queue, while Kueue holds its pods: what its Workload says


@dataclass(frozen=True)
class WatchKey:
    conn_id: str | None
    config_file: str | None
    namespace: str
    selector: str


def stale_after(interval: float) -> float:
    """Seconds without a snapshot after which a subscriber takes the job's loop for stopped."""
    return max(STALE_POLLS * interval, STALE_MIN_S)


def _judge(raw: bytes, policy: JobPolicy, now: float, watch_started: float,
           tensorboard_pod: str | None = None, recorded: dict[str, tuple[str, int]] | None = None
           ) -> tuple[JobStatus, int, TensorBoardState | None]:
    items = json.loads(raw).get("items") or []
    status, tensorboard = judge_pods(items, policy, now, watch_started, tensorboard_pod, recorded)
    return status, len(items), tensorboard


def checkpoint_step(model_dir: str) -> int | None:
    """The step of the chief's newest checkpoint, from TensorFlow's ``checkpoint`` file; None
    while there is none (no model directory or no ``checkpoint`` file yet, or no step in it).

    The file was written by a training pod on the shared volume, so it is read through
    :class:`~tfk8s_airflow.nofollow.SafeDir`: a symbolic link, a FIFO, a device or a file
    of several hard links at ``checkpoint`` is refused without being followed or opened for a
    blocking read, and a file larger than :data:`CHECKPOINT_FILE_MAX` bytes is not read.
    A refusal raises :class:`~tfk8s_airflow.exceptions.DataError` (a PathSafetyError for
    what is not a regular file of one link), so the watch can say so once.
    """
    try:
        with SafeDir.open(model_dir) as d:
            text = d.read_bytes("checkpoint", CHECKPOINT_FILE_MAX).decode("utf-8", "replace")
    except OSError:
        return None  # not there yet (or not readable here): no progress known
    return checkpoint_step_of(text)


class JobWatch:
    """The shared LIST loop of one job. Use :func:`watch_job`, not the constructor."""

    def __init__(self, record: JobRecord, key: WatchKey, interval: float, hook_factory: Callable[[], Any]) -> None:
        self.record = record
        self.key = key
        self.policy = record.policy
        self.recovery = record.recovery
        self.watch_started = record.created_at
        self.interval = interval
        self._tokens: set[object] = set()
        self.lists = 0  # LIST requests answered (tests and benchmarks read it)
        self.started = time.monotonic()
        self.max_gap = 0.0  # the longest time between two answered LISTs (event-loop stalls show here)
        self._last_answer: float | None = None
        self._hook_factory = hook_factory
        self._latest: Snapshot | None = None
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._beat = time.monotonic()  # the loop's last sign of life (each poll's start and end)
        self._busy_until = 0.0  # a recovery in progress may keep the loop from beating until then
        self.restarts = 0  # loops restarted by a subscriber that waited too long (tests read it)
        self._said_errors: set[str] = set()
        self._api: Any = None
        self._log_slots = asyncio.Semaphore(LOG_CONCURRENCY)
        self._node_watch = NodeWatch()
        self._progress: Progress | None = None
        self._history: list[ProgressPoint] = []
        self._checkpoint_refused = False  # said once in the log, then no progress from the file
        self._warned_pods: set[tuple[str, str]] = set()  # (pod, source) of ignored values said: once each
        self._recoverer: Any = None
        self._strangers: set[str] = set()  # UIDs of pods labelled as replicas that no record names (read again once)
        self._verdict: Snapshot | None = None  # the first snapshot with the job's final state: kept from then on
        self.queue = QueueWatch(record) if record.queue else None  # Kueue's Workload, read while it holds the pods

    # ------------------------------------------------------------------ subscribers
    @property
    def subscribers(self) -> int:
        """The triggers subscribed now."""
        return len(self._tokens)

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot published (None before the first poll)."""
        return self._latest

    @property
    def overrides(self) -> dict[str, dict[str, Any]]:
        """What recovery changed in the pods (e.g. the memory an OOM relaunch chose)."""
        return dict(self._recoverer.overrides) if self._recoverer is not None else {}

    async def next(self, after_seq: int = 0) -> Snapshot:
        """The first snapshot newer than ``after_seq`` (waits for the next poll).

        Never waits forever on a loop that stopped or stalled: after :func:`stale_after` seconds
        without one, the loop is started again (:meth:`heal`) and the wait goes on.
        """
        while True:
            try:
                async with asyncio.timeout(stale_after(self.interval)):
                    async with self._changed:
                        await self._changed.wait_for(
                            lambda: self._latest is not None and self._latest.seq > after_seq)
                        assert self._latest is not None
                        return self._latest
            except TimeoutError:
                self.heal()

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        """Every snapshot from now on (a slow subscriber skips to the newest)."""
        seq = 0
        while True:
            snap = await self.next(seq)
            seq = snap.seq
            yield snap
            if snap.permanent:
                return

    def heal(self) -> bool:
        """Start the loop again, while someone listens, when it ended, or when it has shown no sign of
        life for longer than any poll can take (:func:`stale_after` plus two requests' timeouts: each
        request is bounded, so only a loop stuck on something unbounded is that quiet); True when it did."""
        if not self._tokens:
            return False
        task = self._task
        now = time.monotonic()
        quiet = now - self._beat
        stuck_after = stale_after(self.interval) + 2 * REQUEST_TIMEOUT_S
        if task is not None and not task.done() and (quiet < stuck_after or now < self._busy_until):
            return False
        if task is None or task.done():
            why = "it had ended" + (f" ({_task_error(task)})" if task is not None else "")
        else:
            why = f"it had shown no sign of life for {quiet:.0f}s"
            task.cancel()  # not awaited: a loop stuck past its timeouts must not hold the subscriber
        self.restarts += 1
        _log.warning("job %s: the watch of its pods was started again: %s", self.record.job, why)
        self._task = None
        self._start()
        return True

    def _subscribe(self) -> object:
        token = object()
        self._tokens.add(token)
        self._start()
        return token

    def _unsubscribe(self, token: object) -> bool:
        """Drop one subscription; True when it was the last."""
        self._tokens.discard(token)
        return not self._tokens

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._beat = time.monotonic()
            self._task = asyncio.ensure_future(self._run())

    async def _stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=REQUEST_TIMEOUT_S)  # bounded: the caller's exit never hangs here

    def stats(self) -> str:
        """One line on the watch itself, for the sensor's log."""
        span = time.monotonic() - self.started
        return (f"{self.lists} LIST(s) of the job's pods in {span:.0f}s for {self.subscribers} task(s) "
                f"(poll {self.interval:g}s, longest gap {self.max_gap:.2f}s)")

    # ------------------------------------------------------------------ the loop
    async def _publish(self, snap: Snapshot) -> None:
        async with self._changed:
            if self._latest is not None and snap.seq <= self._latest.seq:
                # A second snapshot of one poll (a recovery's "restarting", then its error): every
                # subscriber already past the first must still see it.
                snap = dataclasses.replace(snap, seq=self._latest.seq + 1)
            self._latest = snap
            self._changed.notify_all()

    def _snapshot(self, seq: int, status: JobStatus | None, **kw: Any) -> Snapshot:
        attempts = tuple(self._recoverer.attempts) if self._recoverer is not None else ()
        return Snapshot(seq, time.time(), status, progress=self._progress, history=tuple(self._history),
                        attempts=attempts, **kw)

    async def _run(self) -> None:
        """Poll until cancelled or a permanent error; one connection at a time, reopened every
        :data:`RECONNECT_S`. Nothing raised inside ends it but cancellation: an error no handler
        expected is published as a transient one (and logged once, with its traceback)."""
        seq = self._latest.seq if self._latest else 0
        errors = 0
        while True:
            self._beat = time.monotonic()
            try:
                seq, errors, done = await self._connection(seq, errors)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the connection's config: never ends the loop silently
                seq += 1
                errors += 1
                done = await self._publish_error(seq, self._unexpected("opening the API connection", exc), errors)
                if not done:
                    await asyncio.sleep(self.interval)
            if done:
                return

    async def _connection(self, seq: int, errors: int) -> tuple[int, int, bool]:
        """Polls over one API connection: (the last seq, consecutive errors, whether the watch is over)."""
        from kubernetes_asyncio import client as async_client

        from tfk8s_airflow.k8s.relaunch import Recoverer

        hook = self._hook_factory()
        opened = time.monotonic()
        api = None
        try:
            async with hook.get_conn() as api:
                self._api = api
                if self._recoverer is None and self.record.templates:
                    recoverer = Recoverer(self.record, api)
                    try:
                        await recoverer.load()
                        self._recoverer = recoverer
                    except KubernetesApiError:
                        self._recoverer = None  # no Service to keep attempts on: no recovery, judged as is
                    except (ValueError, TypeError) as exc:  # its attempts cannot be read: none are trusted
                        self._recoverer = None
                        _log.warning("job %s: no recovery: the attempts on its Service cannot be read (%s)",
                                     self.record.job, exc)
                elif self._recoverer is not None:
                    self._recoverer.api = api
                v1 = async_client.CoreV1Api(api)
                while time.monotonic() - opened < RECONNECT_S:
                    t0 = self._beat = time.monotonic()
                    seq += 1
                    error = await self._poll(seq, v1)
                    self._beat = time.monotonic()
                    if error is None:
                        errors = 0
                    else:
                        errors += 1
                        if await self._publish_error(seq, error, errors):
                            return seq, errors, True
                    await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - t0)))
        finally:
            if self._api is api:  # a loop restarted by heal() has its own by now
                self._api = None
        return seq, errors, False

    async def _poll(self, seq: int, v1: Any) -> KubernetesApiError | None:
        """One LIST, judged and published; the error it met instead, if any."""
        from kubernetes_asyncio import client as async_client

        action = f"listing pods {self.key.selector} in {self.key.namespace}"
        if self._verdict is not None:  # the job's verdict is final: nothing to list, judge or recover
            await self._publish(dataclasses.replace(self._verdict, seq=seq, at=time.time()))
            return None
        try:
            resp: Any = await v1.list_namespaced_pod(namespace=self.key.namespace, label_selector=self.key.selector,
                                                     _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
            raw = await resp.read()  # the raw response: judged in a thread, not parsed here
            self._count_list()
            status, count, tensorboard = await asyncio.to_thread(
                _judge, raw, self.policy, time.time(), self.watch_started, self.record.tensorboard_pod,
                self._recorded())
            if status.strangers and self._recoverer is not None and \
                    (set(status.strangers) - self._strangers or status.state == JobState.FAILED):
                status, count, tensorboard = await self._judge_again(raw, status, count, tensorboard)
            self._say_ignored(status.ignored)
            admission = None
            if self.queue is not None:
                status, admission = await self.queue.judge(status, self._api)
            judged = await self._recover(seq, status, v1)
            if judged is not None:
                snap = self._snapshot(seq, judged, pods=count, tensorboard=tensorboard, admission=admission)
                await self._publish(snap)
                if is_final(judged.state):
                    self._verdict = snap
                    await self._record_verdict(judged)
            return None
        except asyncio.CancelledError:
            raise
        except async_client.ApiException as exc:
            return wrap_api_error(action, exc)
        except KubernetesApiError as exc:  # e.g. recovery refused by RBAC (403): that will not pass by itself
            return exc
        except (TimeoutError, OSError, ValueError) as exc:
            return KubernetesApiError(action, None, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - anything else met in a poll: published, never the loop's end
            return self._unexpected(action, exc)

    def _recorded(self) -> dict[str, tuple[str, int]] | None:
        """The job's own pods by UID: setup's record, and what recovery recorded on the Service."""
        return self._recoverer.recorded() if self._recoverer is not None else self.record.recorded_pods()

    async def _judge_again(self, raw: bytes, status: JobStatus, count: int, tensorboard: Any
                           ) -> tuple[JobStatus, int, Any]:
        """Pods with a replica's labels that no record names: another watch's recovery may have created (and
        recorded) them since this one read the Service. Read it again and judge again; a replica missing while
        the latest attempt's pods are still being recorded is not a failure yet."""
        self._strangers |= set(status.strangers)
        try:
            await self._recoverer.load()
        except (KubernetesApiError, ValueError, TypeError) as exc:
            _log.warning("job %s: recovery's record on its Service could not be read again: %s", self.record.job, exc)
            return status, count, tensorboard
        status, count, tensorboard = await asyncio.to_thread(
            _judge, raw, self.policy, time.time(), self.watch_started, self.record.tensorboard_pod, self._recorded())
        attempts = self._recoverer.attempts
        if status.state == JobState.FAILED and status.failed_pod is None and status.strangers and attempts \
                and time.time() - attempts[-1].at < RECORD_GRACE_S + self.recovery.restart_backoff:
            status = dataclasses.replace(status, state=JobState.RUNNING, reason="", failure_class=None,
                                         failed_key=None)
        return status, count, tensorboard

    def _say_ignored(self, ignored: tuple[tuple[str, str], ...], source: str = "its labels and status") -> None:
        """Log what of a pod was ignored (a value no kubelet or trainer writes), once per pod and source."""
        by_pod: dict[str, list[str]] = {}
        for pod, what in ignored:
            if (pod, source) not in self._warned_pods:
                by_pod.setdefault(pod, []).append(what)
        for pod, whats in by_pod.items():
            self._warned_pods.add((pod, source))
            _log.warning("job %s: pod %s: ignored in %s: %s", self.record.job, pod, source, "; ".join(whats[:5]))

    async def _publish_error(self, seq: int, error: KubernetesApiError, errors: int) -> bool:
        """Publish a failed poll; True when the watch ends with it (permanent, or too many in a row)."""
        permanent = isinstance(error, PermanentKubernetesApiError) or errors >= MAX_CONSECUTIVE_ERRORS
        await self._publish(self._snapshot(seq, None, error=error, permanent=permanent))
        return permanent

    def _unexpected(self, action: str, exc: Exception) -> KubernetesApiError:
        """An error no handler expected, as a transient API error; its traceback logged once per kind."""
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        if kind not in self._said_errors:
            self._said_errors.add(kind)
            _log.exception("job %s: %s met an unexpected %s (the watch goes on)", self.record.job, action,
                           type(exc).__name__, exc=exc)
        return KubernetesApiError(action, None, f"{type(exc).__name__}: {exc}")

    async def _record_verdict(self, status: JobStatus) -> None:
        """The verdict on the job's Service, so that no watch recovers the job after it (best effort:
        teardown writes one too, before it deletes anything)."""
        if self._recoverer is None:
            return  # no recovery for this job: nothing could act on it after its verdict
        try:
            await self._recoverer.record_verdict(status.state, status.reason, status.failure_class, status.failed_key)
        except (KubernetesApiError, TimeoutError, OSError) as exc:
            _log.warning("job %s: its verdict was not recorded on its Service: %s", self.record.job, exc)

    def _count_list(self) -> None:
        self.lists += 1
        now = time.monotonic()
        if self._last_answer is not None:
            self.max_gap = max(self.max_gap, now - self._last_answer)
        self._last_answer = now

    async def _recover(self, seq: int, status: JobStatus, v1: Any) -> JobStatus | None:
        """Progress, nodes and the recovery planner; the status to publish (None: a restart ran)."""
        await self._read_progress(status)
        if self._recoverer is None:
            return status
        verdict = self._recoverer.verdict
        if verdict is not None:
            # Recorded by another watch or by teardown: nothing is recovered any more. The pods stay the
            # truth of a success; a job they do not show ended is ended here as failed (what is on the
            # Service could have been written by anyone who may write Services: it may end a job's
            # watch, never make it succeed).
            if status.state == JobState.SUCCEEDED:
                return status
            if status.state == JobState.FAILED and status.failure_class != INFRASTRUCTURE:
                # The pods show the end themselves (lost or deleted pods excepted: teardown's). Its reason is the
                # planner's, as the watch that recorded the verdict gave it (why no recovery: "would exceed
                # max_memory"), never the Service's text; nothing the planner says is carried out any more.
                decision = await self._decide(status)
                return self._failed(status, decision) if decision.action == FAIL else status
            by = verdict["by"] or "another process"
            if verdict["state"] == JobState.FAILED:  # a failure as it was judged: its reason, class and replica
                known = {r.key for r in self.record.replicas}
                key = verdict["failed_replica"] if verdict["failed_replica"] in known else status.failed_key
                ref = next((r for r in self.record.replicas if r.key == key), None)
                return dataclasses.replace(
                    status, state=JobState.FAILED,
                    reason=f"{verdict['reason']} (recorded on the job's Service by {by})",
                    failure_class=verdict["failure_class"] or status.failure_class or INFRASTRUCTURE,
                    failed_key=key, failed_pod=ref.pod if ref is not None else status.failed_pod,
                    failed_container=CONTAINER_NAME if ref is not None else status.failed_container)
            return dataclasses.replace(status, state=JobState.FAILED,
                                       failure_class=status.failure_class or INFRASTRUCTURE,
                                       reason=f"the job had ended ({verdict['state']}: {verdict['reason'] or '-'}; "
                                              f"recorded on its Service by {by})")
        await self._node_watch.check(self._api, status)
        decision = await self._decide(status)
        if decision.action in (RESTART_GROUP, REPLACE):
            running = dataclasses.replace(status, state=JobState.RUNNING, reason="")
            what = "restarting the group" if decision.action == RESTART_GROUP else \
                f"replacing {', '.join(decision.replicas)}"
            await self._publish(self._snapshot(seq, running, restarting=f"{what} ({decision.failure_class}: "
                                                                        f"{decision.reason})"))
            # Deleting, waiting for the pods to go, the backoff, creating: the loop does not beat meanwhile.
            self._busy_until = time.monotonic() + stale_after(self.interval) + self.recovery.restart_backoff + \
                GONE_TIMEOUT_S + 4 * REQUEST_TIMEOUT_S
            try:
                attempt = await self._recoverer.execute(decision, self.recovery.restart_backoff, _log)
            except ValueError as exc:  # another watch's record, read back after a conflict, is not one
                _log.warning("job %s: no recovery: the attempts on its Service cannot be read (%s)",
                             self.record.job, exc)
                self._recoverer = None
                return status
            finally:
                self._busy_until = 0.0
            if attempt is not None:
                for node in decision.avoid_nodes:
                    self._node_watch.lost.pop(node, None)
                lead = self.record.lead
                if lead is not None and lead.key in attempt.replicas:
                    self._progress = dataclasses.replace(self._progress, changed_at=time.time()) \
                        if self._progress else None
            return None
        if decision.action == FAIL:
            return self._failed(status, decision)
        return status

    async def _decide(self, status: JobStatus) -> Decision:
        """The recovery planner's decision on a judged status (the recoverer's attempts and memory overrides)."""
        assert self._recoverer is not None
        roles = {r.key: r.role for r in self.record.replicas}
        memory = await self._recoverer.memory() if _oom_possible(status) else {}
        return decide(status, self.recovery, self._recoverer.attempts, time.time(), roles=roles,
                      lost_nodes=self._node_watch.lost, progress=self._progress, memory=memory)

    def _failed(self, status: JobStatus, decision: Decision) -> JobStatus:
        """The status failed as the planner says (its reason and class; a stall is the lead's)."""
        if status.state == JobState.FAILED and decision.reason == status.reason:
            return status
        lead = self.record.lead
        pod = status.failed_pod
        key = status.failed_key
        if decision.failure_class == STALLED and lead is not None:
            pod, key = lead.pod, lead.key
        return dataclasses.replace(status, state=JobState.FAILED, reason=decision.reason,
                                   failure_class=decision.failure_class, failed_pod=pod, failed_key=key,
                                   failed_container=status.failed_container or (CONTAINER_NAME if pod else None))

    # ------------------------------------------------------------------ progress
    async def _read_progress(self, status: JobStatus) -> None:
        lead = self.record.lead
        st = status.replicas.get(lead.key) if lead else None
        if lead is None or st is None or st.phase not in ("Running", "Succeeded"):
            return
        found: dict[str, Any] = {}
        try:
            log = await self.read_log(lead.pod, CONTAINER_NAME, max_bytes=PROGRESS_TAIL_BYTES, tail_only=True)
            read, problem = read_progress(log.head)
            found = read or {}
            if problem is not None:
                self._say_ignored(((lead.pod, problem),), "its progress lines")
        except KubernetesApiError:
            pass
        if self.record.model_dir:
            step = await asyncio.to_thread(self.checkpoint_progress)
            if step is not None and step > int(found.get("step", -1)):
                found = {**found, "step": step}  # the line's loss, rate and target stay: the newest known
        now = time.time()
        prev = self._progress
        if prev is None:
            started = st.started or now
            self._progress = Progress(step=None, changed_at=started)
            prev = self._progress
        step = found.get("step")
        if step is None:
            return
        grew = prev.step is None or step > prev.step
        self._progress = Progress(step=step, changed_at=now if grew else prev.changed_at, loss=found.get("loss"),
                                  examples_per_sec=found.get("examples_per_sec"),
                                  target_step=found.get("target_step", prev.target_step))
        if grew:
            self._history.append(ProgressPoint(now, step, found.get("loss"), found.get("examples_per_sec")))
            del self._history[:-HISTORY]

    def checkpoint_progress(self) -> int | None:
        """:func:`checkpoint_step` of the job's model directory; a refused ``checkpoint`` file
        (planted by a pod: a link, a FIFO, an oversize file) means no progress known from it,
        logged once per watch rather than every poll, and never ends the watch."""
        if not self.record.model_dir:
            return None
        try:
            return checkpoint_step(self.record.model_dir)
        except DataError as exc:
            if not self._checkpoint_refused:
                self._checkpoint_refused = True
                _log.warning("job %s: the checkpoint file is not read for progress: %s", self.record.job, exc)
            return None

    # ------------------------------------------------------------------ nodes
    async def node(self, name: str) -> dict[str, Any] | None:
        """A node's metadata (:meth:`tfk8s_airflow.k8s.nodes.NodeWatch.node`)."""
        return await self._node_watch.node(self._api, name)

    async def is_simulated(self, node: str) -> bool:
        return await self._node_watch.is_simulated(self._api, node)

    # ------------------------------------------------------------------ logs
    def open_api(self) -> Any:
        """A connection of its own (an async context manager yielding an ``ApiClient``), for a
        long request such as a followed log that must not hold the poll loop's."""
        return self._hook_factory().get_conn()

    async def read_log(self, pod: str, container: str, *, max_bytes: int, tail_lines: int = 5000,
                       previous: bool = False, tail_only: bool = False) -> BoundedLog:
        """A replica's log, bounded (:func:`tfk8s_airflow.k8s.logreads.read_bounded`), over the loop's
        connection (a short-lived one between connections), at most :data:`LOG_CONCURRENCY` at once."""
        from kubernetes_asyncio import client as async_client

        async with self._log_slots:
            hook_conn = None
            api = self._api
            if api is None:  # the loop is between connections: use a short-lived one
                hook_conn = self._hook_factory().get_conn()
                api = await hook_conn.__aenter__()
            try:
                return await read_bounded(async_client.CoreV1Api(api), self.key.namespace, pod, container,
                                          max_bytes=max_bytes, tail_lines=tail_lines, previous=previous,
                                          tail_only=tail_only)
            finally:
                if hook_conn is not None:
                    await hook_conn.__aexit__(None, None, None)


def _task_error(task: asyncio.Task[None]) -> str:
    """How a finished loop ended, for the log."""
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return f"{type(exc).__name__}: {exc}" if exc is not None else "returned"


def _oom_possible(status: JobStatus) -> bool:
    return any(st.oom for st in status.replicas.values())


class _Log:
    """The watch's own log lines go to the subscribing triggers' loggers' root (the triggerer's log)."""

    def __init__(self) -> None:
        import logging

        self._log = logging.getLogger("tfk8s_airflow.k8s.watch")

    def warning(self, msg: str, *args: Any) -> None:
        self._log.warning(msg, *args)

    def exception(self, msg: str, *args: Any, exc: BaseException) -> None:
        self._log.warning(msg, *args, exc_info=exc)


_log = _Log()

_WATCHES: dict[tuple[int, WatchKey], JobWatch] = {}


def _default_hook_factory(conn_id: str | None, config_file: str | None) -> Callable[[], Any]:
    def make() -> Any:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

        return AsyncKubernetesHook(conn_id=conn_id, config_file=config_file)
    return make


@asynccontextmanager
async def watch_job(record: JobRecord, *, interval: float | None = None, config_file: str | None = None,
                    hook_factory: Callable[[], Any] | None = None) -> AsyncIterator[JobWatch]:
    """Subscribe to the job's shared watch (started by the first subscriber of this event loop)."""
    key = WatchKey(record.kubernetes_conn_id, config_file, record.namespace, record.selector)
    loop_key = (id(asyncio.get_running_loop()), key)
    interval = record.poll_interval if interval is None else interval
    watch = _WATCHES.get(loop_key)
    if watch is None:
        watch = JobWatch(record, key, interval, hook_factory or _default_hook_factory(record.kubernetes_conn_id,
                                                                                      config_file))
        _WATCHES[loop_key] = watch
    watch.interval = min(watch.interval, interval)
    token = watch._subscribe()
    try:
        yield watch
    finally:
        if watch._unsubscribe(token):
            if _WATCHES.get(loop_key) is watch:
                del _WATCHES[loop_key]
            await watch._stop()
