"""Deciding a job's state from its pods: pure, so every rule is unit-tested.

Why pure and in one place: the triggers (the sensor's and every replica task's), the
non-deferrable poke and the tests all judge the same way from one LIST of the job's pods.
The rules are TFJob's (success policy, restart budget, ExitCode's permanent 1-127) plus
what TFJob users asked for and did not get: a deadline enforced on every poll
(kubeflow/training-operator#3358), a bounded wait for unschedulable pods and image pulls
(#1282, #2001), a dead parameter server failing the job instead of leaving workers
hanging, and init containers (the code fetcher) judged like the training container, so a
bad code URI fails the job at once with the fetcher's own message.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, assert_never

from tfk8s_airflow.contract import (
    CONTAINER_NAME,
    FETCH_CONTAINER,
    GANG_GATE,
    LABEL_ATTEMPT,
    LABEL_INDEX,
    LABEL_ROLE,
    is_retryable_exit,
)
from tfk8s_airflow.job import podgroup
from tfk8s_airflow.job.kueue import KUEUE_GATES
from tfk8s_airflow.job.states import EndState, JobState
from tfk8s_airflow.redaction import redact_text

IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_ERROR_REASONS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
GATED_REASON = "SchedulingGated"
OOM_REASON = "OOMKilled"
#: Pod-level reasons of the kubelet and the node lifecycle controller that mean the node, not the program.
INFRA_POD_REASONS = ("Evicted", "Preempting", "NodeLost", "Shutdown", "Terminated", "NodeShutdown",
                     "UnexpectedAdmissionError", "OutOfcpu", "OutOfmemory", "OutOfpods")

#: The failure classes (docs/recovery.md): what failed a replica, as Kubernetes reports it.
CODE, INFRASTRUCTURE, OOM = "code", "infrastructure", "oom"
STALLED, STRAGGLER, CONFIG = "stalled", "straggler", "config"
FAILURE_CLASSES = (CODE, INFRASTRUCTURE, OOM, STALLED, STRAGGLER, CONFIG)
#: Signals that end a process from outside (exit code 128 + n): SIGHUP, SIGINT, SIGQUIT, SIGKILL,
#: SIGTERM. A program's own crash (SIGSEGV 139, SIGABRT 134, SIGBUS, SIGFPE, SIGILL) is its code's.
EXTERNAL_SIGNALS = frozenset({1, 2, 3, 9, 15})
MESSAGE_MAX = 2000  # characters of a container's termination message kept in a reason
PENDING_MESSAGE_MAX = 300  # characters of the scheduler's message in the sensor's waiting line
TEXT_MAX = 100  # characters of a timestamp read; longer is no timestamp
SHOWN_MAX = 60  # characters of a bad value a warning quotes
_WHOLE = re.compile(r"-?[0-9]{1,18}")


@dataclass(frozen=True)
class JobPolicy:
    """What the judge needs from a spec; plain data so it travels to the triggerer."""

    replicas: Mapping[str, int]
    tracked: Mapping[str, bool]
    restart_policy: Mapping[str, str]
    success: tuple[tuple[str, int], ...]
    max_restarts: int
    schedule_timeout: float
    startup_timeout: float
    active_deadline: float | None
    straggler_timeout: float | None = None
    admission_timeout: float | None = None  # a pod held by another controller's gate (a queue) this long fails
    lead: tuple[str, int] | None = None  # the chief, else worker 0: whose end starts the straggler clock

    @classmethod
    def from_spec(cls, spec: Any, active_deadline: float | None = None) -> JobPolicy:
        """``active_deadline`` (seconds) overrides the spec's, e.g. with the deployment's default."""
        deadline = active_deadline if active_deadline is not None else spec.active_deadline
        return cls(
            replicas={r.role: r.replicas for r in spec.active_roles},
            tracked={r.role: r.tracked for r in spec.active_roles},
            restart_policy={r.role: r.restart_policy for r in spec.active_roles},
            success=tuple(spec.success_replicas()),
            max_restarts=spec.max_restarts,
            schedule_timeout=float(spec.schedule_timeout),
            startup_timeout=float(spec.startup_timeout),
            active_deadline=float(deadline) if deadline else None,
            straggler_timeout=float(spec.straggler_timeout) if spec.straggler_timeout else None,
            admission_timeout=float(spec.admission_timeout) if spec.admission_timeout else None,
            lead=("chief", 0) if spec.replicas("chief") else ("worker", 0),
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["success"] = [list(x) for x in self.success]
        d["lead"] = list(self.lead) if self.lead else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JobPolicy:
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in known}  # the record's policy may carry more (recovery)
        lead = d.get("lead")
        return cls(**{**d, "success": tuple((r, int(i)) for r, i in d["success"]),
                      "lead": (lead[0], int(lead[1])) if lead else None})

    def expected(self) -> list[tuple[str, int]]:
        return [(role, i) for role, n in self.replicas.items() for i in range(n)]


@dataclass(frozen=True)
class ContainerFailure:
    """An init container that failed (terminated non-zero now, or before its last restart)."""

    container: str
    exit_code: int
    message: str | None
    restarts: int
    current: bool  # terminated now (not only in lastState)


@dataclass(frozen=True)
class ReplicaState:
    role: str
    index: int
    pod: str
    phase: str
    restarts: int = 0
    exit_code: int | None = None
    last_exit_code: int | None = None
    waiting_reason: str | None = None
    waiting_message: str | None = None
    unschedulable: str | None = None  # the scheduler's message
    gated: bool = False  # held by scheduling gates (setup releases them once every pod exists)
    held_by: tuple[str, ...] = ()  # other controllers' gates (a queue's admission, e.g. Kueue's), its PodGroup's wait
    reason: str | None = None  # pod-level reason (DeadlineExceeded, Evicted...)
    message: str | None = None  # the training container's termination message
    node: str | None = None
    has_command: bool = False  # the training container names a command (a program that should run)
    disruption: str | None = None  # the DisruptionTarget condition: preemption, eviction, node shutdown, PodGC
    oom: bool = False  # the training container was OOMKilled (now, or before its last restart)
    attempt: int = 1  # tfk8s.io/attempt: group restarts and replacements count up
    deleting: bool = False  # has a deletionTimestamp: someone (not teardown, which runs after the sensor) deletes it
    init_failure: ContainerFailure | None = None
    container_id: str | None = None  # the training container running or terminated now (None while waiting)
    created: float | None = None
    started: float | None = None
    finished: float | None = None

    @property
    def key(self) -> str:
        return f"{self.role}-{self.index}"

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod, "phase": self.phase, "restarts": self.restarts}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.started and self.finished:
            out["duration_s"] = round(self.finished - self.started, 3)
        for key in ("node", "reason", "waiting_reason"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.init_failure is not None:
            out["container"] = self.init_failure.container
            out["init_exit_code"] = self.init_failure.exit_code
        return out

    def describe(self) -> str:
        """One line for the sensor's replica table and its periodic 'waiting for' line."""
        where = f" on {self.node}" if self.node else ""
        extra = self.waiting_reason or (f"held by {', '.join(self.held_by)}" if self.held_by else
                                        "gated" if self.gated else "")
        return f"{self.key} {self.phase}{f' ({extra})' if extra else ''}{where}"


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    reason: str = ""
    replicas: Mapping[str, ReplicaState] = field(default_factory=dict)
    failed_pod: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    failed_container: str | None = None  # the container whose log explains the failure
    failure_class: str | None = None  # one of FAILURE_CLASSES when a replica failed the job
    failed_key: str | None = None  # the replica that failed it (<role>-<i>)
    stopped: tuple[str, ...] = ()  # tracked replicas still running when the job succeeded (stragglers)
    #: (pod, what of it was ignored): values no kubelet writes (a label ``tfk8s.io/index: x``), for a warning
    ignored: tuple[tuple[str, str], ...] = ()
    #: UIDs of pods with a replica's labels that setup and recovery did not record (ignored; the watch may
    #: read recovery's record again before it believes a replica lost)
    strangers: tuple[str, ...] = ()

    def progress(self) -> str:
        parts = [f"{k}={val}" for k, val in sorted(self.counts.items()) if val]
        return ", ".join(parts) or "no pods yet"

    def waiting_for(self, policy: JobPolicy) -> str:
        """What the job still waits for: the success policy's replicas that have not succeeded."""
        pending = []
        for role, index in policy.success:
            st = self.replicas.get(f"{role}-{index}")
            if st is None:
                pending.append(f"{role}-{index} (no pod yet)")
            elif st.phase != "Succeeded":
                pending.append(st.describe())
        return ", ".join(pending) or "nothing"

    def pending_note(self, policy: JobPolicy, now: float, job_start: float) -> str:
        """How long the longest-waiting Pending replica has waited, for what, and which timeout
        ends the wait: the sensor's periodic line while pods wait for a node, an image or the
        gates. Empty when no replica is Pending."""
        pending = [st for st in self.replicas.values() if st.phase == "Pending"]
        if not pending:
            return ""
        st = min(pending, key=lambda r: (r.created or job_start, r.key))
        waited = max(0.0, now - (st.created or job_start))
        if st.unschedulable:
            why, limit = f"Unschedulable: {st.unschedulable[:PENDING_MESSAGE_MAX]}", \
                f"schedule_timeout {policy.schedule_timeout:.0f}s"
        elif st.held_by:
            why = f"held by {', '.join(st.held_by)}"
            limit = (f"admission_timeout {policy.admission_timeout:.0f}s" if policy.admission_timeout else
                     f"active_deadline {policy.active_deadline:.0f}s" if policy.active_deadline else "no timeout")
        else:
            why = "scheduling gates" if st.gated else (st.waiting_reason or "not started")
            limit = f"startup_timeout {policy.startup_timeout:.0f}s"
        others = f" ({len(pending)} replicas Pending)" if len(pending) > 1 else ""
        return f"{st.key} Pending for {waited:.0f}s{others}, {why}; the job fails at {limit}"


def _ts(value: Any) -> float | None:
    """A timestamp as seconds since the epoch; None when there is none or it is not one (never raises)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            out = float(value)
        elif isinstance(value, datetime):
            out = (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
        elif isinstance(value, str) and len(value) <= TEXT_MAX:
            out = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return out if math.isfinite(out) else None


def _get(obj: Any, *path: str) -> Any:
    """Read a field from a pod as a dict (camelCase) or a kubernetes client model (snake_case)."""
    for key in path:
        if obj is None:
            return None
        if isinstance(obj, Mapping):
            obj = obj.get(key)
            if obj is None:
                continue
        else:
            obj = getattr(obj, _snake(key), None)
    return obj


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _short(text: Any) -> str | None:
    """A container's termination message as a reason quotes it: cut, and URIs without credentials."""
    if not text:
        return None
    text = str(text).strip()
    text = text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX] + " [...]"
    return redact_text(text)


def _int(value: Any, default: int) -> int:
    """A whole number of a pod's fields or labels; ``default`` for anything else (never raises)."""
    found = _whole(value)
    return default if found is None else found


def _whole(value: Any) -> int | None:
    """An int of at most 18 digits (an int, or a string of ASCII digits with an optional minus);
    None for anything else: a bool, a float, ``"١"``, ``"1e3"``, ``" 1"``, a huge number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 10**18 else None
    if isinstance(value, str) and _WHOLE.fullmatch(value):
        return int(value)
    return None


def _text(value: Any) -> str | None:
    """A string field of a pod (a reason, a name, a phase); None for anything that is not a string."""
    return value if isinstance(value, str) else None


def _items(value: Any) -> list[Any]:
    """A list field of a pod (conditions, statuses, gates); empty for anything that is not a list."""
    return list(value) if isinstance(value, (list, tuple)) else []


def _init_failure(status: Any) -> ContainerFailure | None:
    """The first init container that terminated non-zero, now or before its last restart."""
    for cs in _items(_get(status, "initContainerStatuses")):
        restarts = max(_int(_get(cs, "restartCount"), 0), 0)
        for current, path in ((True, ("state", "terminated")), (False, ("lastState", "terminated"))):
            term = _get(cs, *path)
            code = _whole(_get(term, "exitCode")) if term is not None else None
            if code:
                return ContainerFailure(str(_text(_get(cs, "name")) or "?"), code, _short(_get(term, "message")),
                                        restarts, current)
    return None


def replica_state(pod: Any) -> ReplicaState | None:
    """The replica a pod of the job is (None: not a replica, e.g. the TensorBoard, or a pod whose
    role or index label is not one). Never raises, whatever the pod holds; see :func:`read_replica`."""
    return read_replica(pod)[0]


def read_replica(pod: Any, known: tuple[str, int] | None = None) -> tuple[ReplicaState | None, tuple[str, ...]]:
    """The replica a pod is, and what of the pod was ignored because it is not what Kubernetes writes.

    Labels and annotations may be written by anyone who may patch the job's pods, and the judge runs
    in the job's shared watch: a value of the wrong kind (an index ``"x"`` or ``"1e3"``, an attempt
    ``"NaN"``, a timestamp that is no time, a list where a string goes) is ignored, never raised,
    and named in the second item so the watch can say so once per pod.

    ``known``: the replica key and attempt that setup or recovery recorded for this pod's UID. The pod is
    then that replica whatever its labels say (labels that name another are a problem named, not obeyed).
    """
    problems: list[str] = []
    labels = _get(pod, "metadata", "labels")
    labels = labels if isinstance(labels, Mapping) else {}
    role, raw_index = labels.get(LABEL_ROLE), labels.get(LABEL_INDEX)
    if known is not None:
        key, recorded_attempt = known
        if f"{role}-{raw_index}" != key:
            problems.append(f"labels {LABEL_ROLE}={_shown(role)} {LABEL_INDEX}={_shown(raw_index)} are not "
                            f"those of replica {key}, as recorded for its UID (the record's are taken)")
        role, raw_index = key.rsplit("-", 1)
    elif role is None or raw_index is None:
        return None, ()
    index = _whole(raw_index)
    if not isinstance(role, str) or index is None or index < 0:
        return None, (f"labels {LABEL_ROLE}={_shown(role)} {LABEL_INDEX}={_shown(raw_index)} name no replica",)
    status = _get(pod, "status") or {}
    unschedulable = None
    gated = False
    disruption = None
    for cond in _items(_get(status, "conditions")):
        if _get(cond, "type") == "DisruptionTarget" and _get(cond, "status") == "True":
            disruption = (f"{_text(_get(cond, 'reason')) or 'DisruptionTarget'}"
                          + (f": {_get(cond, 'message')}" if _text(_get(cond, "message")) else ""))
        if _get(cond, "type") == "PodScheduled" and _get(cond, "status") == "False":
            if _get(cond, "reason") == GATED_REASON:
                gated = True
            else:
                unschedulable = _text(_get(cond, "message")) or _text(_get(cond, "reason")) or "Unschedulable"
    gates = [g for g in (_text(_get(g, "name")) for g in _items(_get(pod, "spec", "schedulingGates"))) if g]
    if gates:
        gated = True
    held_by = tuple(g for g in gates if g != GANG_GATE)
    group = _text(_get(pod, "spec", "schedulingGroup", "podGroupName"))
    if group and podgroup.waits_for_group(unschedulable):
        # Kubernetes' gang scheduling holds the whole group (admission workload): a wait for room, as behind
        # a queue, judged by admission_timeout, not an Unschedulable pod judged by schedule_timeout.
        held_by, unschedulable = (*held_by, podgroup.held_by(group, unschedulable or "")), None
    cs = next((c for c in _items(_get(status, "containerStatuses")) if _get(c, "name") == CONTAINER_NAME), None)
    exit_code = last_exit = started = finished = message = None
    waiting = waiting_msg = container_id = None
    restarts = 0
    oom = False
    if cs is not None:
        oom = OOM_REASON in (_get(cs, "state", "terminated", "reason"), _get(cs, "lastState", "terminated", "reason"))
        restarts = max(_int(_get(cs, "restartCount"), 0), 0)
        term = _get(cs, "state", "terminated")
        if term is not None:
            exit_code = _exit(_get(term, "exitCode"), problems)
            message = _short(_get(term, "message"))
            started, finished = _ts(_get(term, "startedAt")), _ts(_get(term, "finishedAt"))
        running = _get(cs, "state", "running")
        if running is not None:
            started = _ts(_get(running, "startedAt"))
        if running is not None or term is not None:
            container_id = _text(_get(cs, "containerID")) or None
        wait = _get(cs, "state", "waiting")
        if wait is not None:
            waiting, waiting_msg = _text(_get(wait, "reason")), _text(_get(wait, "message"))
        last = _get(cs, "lastState", "terminated")
        if last is not None:
            last_exit = _exit(_get(last, "exitCode"), problems)
    container = next((c for c in _items(_get(pod, "spec", "containers")) if _get(c, "name") == CONTAINER_NAME), None)
    init_failure = _init_failure(status)
    if init_failure is not None:
        restarts = max(restarts, init_failure.restarts)
    raw_attempt = labels.get(LABEL_ATTEMPT)
    attempt = _int(raw_attempt, 1) if raw_attempt is not None else 1
    if known is not None:
        attempt = known[1]  # the record's: a label anyone who may patch the pod can write is not asked
    elif raw_attempt is not None and (_whole(raw_attempt) is None or attempt < 1):
        problems.append(f"label {LABEL_ATTEMPT}={_shown(raw_attempt)} is no attempt number (taken as 1)")
        attempt = 1
    created = _get(pod, "metadata", "creationTimestamp")
    if created is not None and _ts(created) is None:
        problems.append(f"creationTimestamp {_shown(created)} is no time")
    return ReplicaState(
        role=role, index=index, pod=_text(_get(pod, "metadata", "name")) or "",
        phase=_phase(pod, status), restarts=restarts, exit_code=exit_code,
        last_exit_code=last_exit, waiting_reason=waiting, waiting_message=waiting_msg,
        unschedulable=unschedulable, gated=gated, held_by=held_by, reason=_text(_get(status, "reason")),
        message=message, node=_text(_get(pod, "spec", "nodeName")), has_command=bool(_get(container, "command")),
        init_failure=init_failure, container_id=container_id,
        disruption=_short(disruption), oom=oom, attempt=attempt,
        deleting=_get(pod, "metadata", "deletionTimestamp") is not None,
        created=_ts(created),
        started=started or _ts(_get(status, "startTime")), finished=finished,
    ), tuple(problems)


def _phase(pod: Any, status: Any) -> str:
    """The pod's phase; for a ``Running`` pod whose every container has ended and none will restart, the
    terminal phase the kubelet writes next (Succeeded when all exited 0, else Failed under ``Never``).

    A real kubelet writes a container's end at once but the pod's terminal phase only once it has stopped
    the pod (its sandbox too), about a second later: a replica read in between, a worker that exited 0, would
    be judged, summarized and shown as still running."""
    phase = _text(_get(status, "phase")) or "Pending"
    if phase != "Running":
        return phase
    statuses = _items(_get(status, "containerStatuses"))
    if not statuses or len(statuses) < len(_items(_get(pod, "spec", "containers"))):
        return phase
    codes = [_get(cs, "state", "terminated", "exitCode") for cs in statuses]
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
        return phase
    policy = _text(_get(pod, "spec", "restartPolicy")) or "Always"
    if policy in ("Never", "OnFailure") and all(c == 0 for c in codes):
        return "Succeeded"
    return "Failed" if policy == "Never" else phase


def _exit(value: Any, problems: list[str]) -> int | None:
    """A container's exit code (an int32); None, and a problem named, for anything else."""
    if value is None:
        return None
    code = _whole(value)
    if code is None or not -(2**31) <= code < 2**31:
        problems.append(f"exitCode {_shown(value)} is no exit code")
        return None
    return code


def _shown(value: Any) -> str:
    """A value of a pod as a warning quotes it: short, printable."""
    text = repr(value) if not isinstance(value, str) else repr(value[:SHOWN_MAX])
    return text if len(text) <= SHOWN_MAX + 8 else text[:SHOWN_MAX] + "...'"


def evaluate(pods: Iterable[Any], policy: JobPolicy, now: float, watch_started: float,
             recorded: Mapping[str, tuple[str, int]] | None = None) -> JobStatus:
    """The job's state from one LIST of its pods.

    ``watch_started`` is when the job's pods were created (setup's record). Setup creates
    every pod before anything watches the job, so a replica without a pod was deleted (by
    someone other than teardown): an infrastructure failure.

    ``recorded``: the job's own pods, ``{uid: (replica key, attempt)}`` as setup and recovery recorded
    them from their creation responses. Only those speak for the job: any other pod that carries a
    replica's labels (anyone who may patch pods can relabel a finished one ``worker-0``) is ignored, named
    in ``strangers`` and ``ignored`` for a warning. None: a record from before UIDs were recorded (labels).
    """
    states: dict[str, ReplicaState] = {}
    ignored: list[tuple[str, str]] = []
    strangers: list[str] = []
    for pod in pods:
        known = None
        if recorded is not None:
            uid = _get(pod, "metadata", "uid")
            known = recorded.get(uid) if isinstance(uid, str) else None
            if known is None:
                if replica_state(pod) is not None:
                    name = _text(_get(pod, "metadata", "name")) or "?"
                    strangers.append(uid if isinstance(uid, str) else "")
                    ignored.append((name, f"it carries the labels of a replica, but its UID {_shown(uid)} is not one "
                                          "setup or recovery recorded: not the job's pod, ignored"))
                continue
        st, problems = read_replica(pod, known)
        if problems:
            name = _text(_get(pod, "metadata", "name")) or "?"
            ignored.extend((name, p) for p in problems)
        # A replica's newest attempt is the replica (under Kueue, recovery recreates it under a new name while
        # the old pod may still be going).
        if st is not None and (st.key not in states or st.attempt >= states[st.key].attempt):
            states[st.key] = st
    status = _judge_states(states, policy, now, watch_started)
    return dataclasses.replace(status, ignored=tuple(ignored), strangers=tuple(strangers)) if ignored else status


def _judge_states(states: dict[str, ReplicaState], policy: JobPolicy, now: float, watch_started: float) -> JobStatus:
    counts: dict[str, int] = {}
    for one in states.values():
        counts[one.phase] = counts.get(one.phase, 0) + 1
        counts["restarts"] = counts.get("restarts", 0) + one.restarts

    def fail(reason: str, st: ReplicaState | None = None, container: str = CONTAINER_NAME,
             failure_class: str | None = None, key: str | None = None) -> JobStatus:
        return JobStatus(JobState.FAILED, reason, states, st.pod if st else None, counts, container if st else None,
                         failure_class, key or (st.key if st else None))

    created = [s.created for s in states.values() if s.created]
    job_start = min(created) if created else watch_started
    if policy.active_deadline and now - job_start > policy.active_deadline:
        holding = [st.describe() for (r, i) in policy.success
                   if (st := states.get(f"{r}-{i}")) is not None and st.phase != "Succeeded"]
        return fail(f"active_deadline of {policy.active_deadline:.0f}s passed (job running {now - job_start:.0f}s)"
                    + (f"; the success policy still waited for: {', '.join(holding)}" if holding else ""))

    for role, index in policy.expected():
        key = f"{role}-{index}"
        st = states.get(key)
        if st is None:
            return fail(f"replica {key} has no pod: it was deleted, not by teardown", None,
                        failure_class=INFRASTRUCTURE, key=key)
        verdict = _judge_replica(st, policy, now, watch_started)
        if verdict is not None:
            reason, container, failure_class = verdict
            return fail(reason, st, container, failure_class)

    done = [states[f"{r}-{i}"].phase == "Succeeded" if f"{r}-{i}" in states else False for r, i in policy.success]
    met = "success policy met: " + ", ".join(f"{r}-{i}" for r, i in policy.success) + " succeeded"
    if all(done):
        return _stragglers(JobStatus(JobState.SUCCEEDED, met, states, None, counts), policy, now)
    if policy.straggler_timeout and policy.lead and policy.lead in policy.success:
        lead = states.get(f"{policy.lead[0]}-{policy.lead[1]}")
        if lead is not None and lead.phase == "Succeeded" and lead.finished \
                and now - lead.finished > policy.straggler_timeout:
            late = [states[f"{r}-{i}"] for r, i in policy.success
                    if f"{r}-{i}" in states and states[f"{r}-{i}"].phase != "Succeeded"]
            return fail(f"straggler_timeout of {policy.straggler_timeout:.0f}s passed since {lead.key} finished; "
                        f"still running: {', '.join(s.describe() for s in late)}", late[0] if late else None,
                        failure_class=STRAGGLER)
    return JobStatus(_waiting_state(states), "", states, None, counts)


def _waiting_state(states: Mapping[str, ReplicaState]) -> JobState:
    """A job not ended: QUEUED while no replica has started and Kueue's gate holds one (its queue admits the
    job whole) or the scheduler holds its PodGroup (admission workload: placed whole), HELD while no replica
    has started and another controller's gate holds one, else RUNNING."""
    if not states or any(st.phase != "Pending" for st in states.values()):
        return JobState.RUNNING
    gates = {g for st in states.values() for g in st.held_by}
    if not gates:
        return JobState.RUNNING
    whole = gates & set(KUEUE_GATES) or any(podgroup.is_group_hold(g) for g in gates)
    return JobState.QUEUED if whole else JobState.HELD


def _stragglers(status: JobStatus, policy: JobPolicy, now: float) -> JobStatus:
    """The success policy is met: with ``straggler_timeout``, tracked replicas it did not need get
    that long to finish; then (or at once without it) the job succeeds and teardown stops them."""
    tracked_running = [st for st in status.replicas.values()
                       if policy.tracked.get(st.role, True) and st.phase in ("Running", "Pending")]
    if not tracked_running:
        return status
    if policy.straggler_timeout:
        met_at = max((status.replicas[f"{r}-{i}"].finished or now) for r, i in policy.success)
        if now - met_at <= policy.straggler_timeout:
            return dataclasses.replace(status, state=JobState.RUNNING, reason="")
    names = tuple(sorted(st.key for st in tracked_running))
    return dataclasses.replace(status, reason=status.reason + f"; stopping {', '.join(names)} (not needed by "
                               "the success policy)", stopped=names)


def _judge_replica(st: ReplicaState, policy: JobPolicy, now: float,
                   watch_started: float) -> tuple[str, str, str] | None:
    """Why this replica fails the job, which container's log says more, and the failure class; or None."""
    key = f"{st.key} ({st.pod})"
    tracked = policy.tracked.get(st.role, True)
    if st.deleting and st.phase not in ("Succeeded",):
        return (f"{key} is being deleted, not by teardown" + (f": {st.disruption}" if st.disruption else ""),
                CONTAINER_NAME, INFRASTRUCTURE)
    init = st.init_failure
    if init is not None:
        what = f"{key}: init container {init.container} failed with exit code {init.exit_code}"
        detail = f": {init.message}" if init.message else ""
        # The code fetcher's contract: 1-127 permanent (bad URI, 404, checksum, entrypoint).
        if init.container == FETCH_CONTAINER and not is_retryable_exit(init.exit_code):
            return what + " (permanent: the fetcher's message says what to fix in code:)" + detail, init.container, \
                CONFIG
        if st.phase == "Failed":
            return what + detail, init.container, CONFIG if init.container == FETCH_CONTAINER else CODE
        if init.restarts > policy.max_restarts:
            return (f"{what} and restarted {init.restarts} times, more than max_restarts "
                    f"{policy.max_restarts}{detail}"), init.container, (
                        CONFIG if init.container == FETCH_CONTAINER else CODE)
    age = now - (st.created or watch_started)
    if st.phase == "Pending":
        if st.unschedulable and age > policy.schedule_timeout:
            return (f"{key} is Unschedulable for {age:.0f}s (schedule_timeout "
                    f"{policy.schedule_timeout:.0f}s): {st.unschedulable}"), CONTAINER_NAME, CONFIG
        if st.waiting_reason in IMAGE_PULL_REASONS:
            return (f"{key} cannot pull its image: {st.waiting_reason}"
                    + (f": {st.waiting_message}" if st.waiting_message else "")), CONTAINER_NAME, CONFIG
        if st.waiting_reason in CONFIG_ERROR_REASONS:
            return (f"{key} cannot start its container: {st.waiting_reason}"
                    + (f": {st.waiting_message}" if st.waiting_message else "")), CONTAINER_NAME, CONFIG
        if st.held_by:  # waiting for another controller's admission: its own timeout, not startup_timeout
            if policy.admission_timeout and age > policy.admission_timeout:
                return (f"{key} is held by {', '.join(st.held_by)} {age:.0f}s after creation (admission_timeout "
                        f"{policy.admission_timeout:.0f}s)"), CONTAINER_NAME, CONFIG
            return None
        if not st.unschedulable and age > policy.startup_timeout:
            waiting = "scheduling gates" if st.gated else st.waiting_reason
            return (f"{key} has not started {age:.0f}s after creation (startup_timeout "
                    f"{policy.startup_timeout:.0f}s)" + (f"; waiting: {waiting}" if waiting else "")
                    + (f" on node {st.node}" if st.node else "")), CONTAINER_NAME, CONFIG
    if st.phase == "Failed":
        code = st.exit_code if st.exit_code is not None else st.last_exit_code
        what = "tracked replica" if tracked else "untracked replica"
        reason = (f"{what} {key} failed" + (f" with exit code {code}" if code is not None else "")
                  + (f" (reason {st.reason})" if st.reason else "")
                  + (f": {st.disruption}" if st.disruption else "")
                  + (f": {st.message}" if st.message else "")
                  + (" (OOMKilled)" if st.oom else ""))
        if policy.restart_policy.get(st.role) == "ExitCode" and code is not None and 1 <= code <= 127:
            reason += " (ExitCode: 1-127 are permanent, never retried)"
        return reason, CONTAINER_NAME, _exit_class(st, code)
    if st.phase == "Succeeded" and not tracked:
        return (f"untracked replica {key} exited (code {st.exit_code}) before the job finished; "
                "parameter servers and TF2 workers must keep serving"), CONTAINER_NAME, CODE
    if st.restarts > policy.max_restarts:
        return (f"{key} restarted {st.restarts} times, more than max_restarts {policy.max_restarts}; "
                f"last exit code {st.last_exit_code}" + (" (OOMKilled)" if st.oom else "")), CONTAINER_NAME, \
            _exit_class(st, st.last_exit_code)
    if (policy.restart_policy.get(st.role) == "ExitCode" and st.last_exit_code is not None
            and 1 <= st.last_exit_code <= 127):
        return (f"{key} exited with permanent exit code {st.last_exit_code} "
                "(ExitCode policy: 1-127 are not retried)"), CONTAINER_NAME, CODE
    return None


def _exit_class(st: ReplicaState, code: int | None) -> str:
    """A replica that ended: the node's doing (a disruption, an eviction, a signal) or the program's."""
    if st.disruption or (st.reason in INFRA_POD_REASONS):
        return INFRASTRUCTURE
    if st.oom:
        return OOM
    if code is not None and is_retryable_exit(code) and code - 128 in EXTERNAL_SIGNALS:
        return INFRASTRUCTURE  # killed from outside the program: SIGKILL (OOM killer, node), SIGTERM...
    return CODE  # its own exit, or a signal the program raised itself (SIGSEGV, SIGABRT, SIGFPE...)


# ----------------------------------------------------------------------------- replica outcome
@dataclass(frozen=True)
class ReplicaOutcome:
    """How one replica's task ends, decided from the same JobStatus the sensor judges."""

    state: EndState  # succeeded | failed | skipped
    reason: str
    replica: ReplicaState | None


def _never_ran(st: ReplicaState) -> bool:
    """Its training container has not run yet: still in its init containers, gated, or unscheduled."""
    return st.phase == "Pending" and st.exit_code is None and st.last_exit_code is None


def replica_outcome(status: JobStatus, key: str, tracked: bool) -> ReplicaOutcome | None:
    """The replica task's outcome, or None while it still has none.

    * A tracked replica succeeds when its pod succeeded, fails when its pod failed or when it
      is the replica that failed the job; a failed replica's reason carries the job's (what the
      sensor found), and its own init container's failure when it has one. Still running when
      the job ended: it succeeds if the job succeeded (the success policy did not need it;
      teardown stops it), and is skipped if the job failed because of another replica (it was
      healthy, but it did not finish).
    * An untracked replica (a PS, a TF2 worker) succeeds when the job ended with it healthy,
      and fails if it died first (or is what failed the job). One whose training container had
      not started when the job failed (still fetching code, say) was never healthy: skipped.
    """
    st = status.replicas.get(key)
    mine = (st is not None and status.failed_pod == st.pod) or (
        st is None and status.reason.startswith(f"replica {key} has no pod"))
    if status.state == JobState.FAILED and mine:
        return ReplicaOutcome(EndState.FAILED, status.reason, st)
    if st is not None and st.init_failure is not None and status.state == JobState.FAILED:
        # Its own init container failed too (every fetcher of a bad code URI does): its own message.
        init = st.init_failure
        return ReplicaOutcome(EndState.FAILED, f"{key} ({st.pod}): init container {init.container} failed with exit "
                              f"code {init.exit_code}" + (f": {init.message}" if init.message else "")
                              + f"; the job failed: {status.reason}", st)
    if st is not None and st.phase == "Failed":
        return ReplicaOutcome(EndState.FAILED, f"{key} failed"
                              + (f" with exit code {st.exit_code}" if st.exit_code is not None else "")
                              + (f"; the job failed: {status.reason}" if status.state == JobState.FAILED else ""), st)
    if st is not None and st.phase == "Succeeded":
        if tracked:
            return ReplicaOutcome(EndState.SUCCEEDED, f"{key} exited 0", st)
        return ReplicaOutcome(EndState.FAILED, f"untracked replica {key} exited (code {st.exit_code}) "
                              "before the job ended", st)
    match status.state:
        case JobState.SUCCEEDED:
            if not tracked:
                return ReplicaOutcome(EndState.SUCCEEDED, f"{key} served until the job succeeded", st)
            return ReplicaOutcome(EndState.SUCCEEDED, f"{key} had not finished when the job succeeded "
                                  f"({status.reason}); teardown stops it", st)
        case JobState.FAILED:
            if st is not None and _never_ran(st):
                return ReplicaOutcome(EndState.SKIPPED, f"{key} had not started when the job failed "
                                      f"({status.reason})", st)
            if not tracked:
                return ReplicaOutcome(EndState.SUCCEEDED, f"{key} was healthy when the job failed: {status.reason}",
                                      st)
            return ReplicaOutcome(EndState.SKIPPED, f"{key} did not finish: the job failed ({status.reason})", st)
        case JobState.RUNNING | JobState.QUEUED | JobState.HELD:
            return None
        case _:
            assert_never(status.state)
