"""Deciding a job's state from its pods: pure, so every rule is unit-tested.

Why pure and in one place: the deferrable trigger, the non-deferrable poke and
the tests all judge the same way from one LIST of the job's pods. The rules are
TFJob's (success policy, restart budget, ExitCode's permanent 1-127) plus what
TFJob users asked for and did not get: a deadline enforced on every poll
(kubeflow/training-operator#3358), a bounded wait for unschedulable pods and
image pulls (#1282, #2001), and a dead parameter server failing the job instead
of leaving workers hanging.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tfk8s_airflow.contract import CONTAINER_NAME, LABEL_INDEX, LABEL_ROLE

RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_ERROR_REASONS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")


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

    @classmethod
    def from_spec(cls, spec: Any) -> JobPolicy:
        return cls(
            replicas={r.role: r.replicas for r in spec.active_roles},
            tracked={r.role: r.tracked for r in spec.active_roles},
            restart_policy={r.role: r.restart_policy for r in spec.active_roles},
            success=tuple(spec.success_replicas()),
            max_restarts=spec.max_restarts,
            schedule_timeout=float(spec.schedule_timeout),
            startup_timeout=float(spec.startup_timeout),
            active_deadline=float(spec.active_deadline) if spec.active_deadline else None,
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["success"] = [list(x) for x in self.success]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JobPolicy:
        return cls(**{**d, "success": tuple((r, int(i)) for r, i in d["success"])})

    def expected(self) -> list[tuple[str, int]]:
        return [(role, i) for role, n in self.replicas.items() for i in range(n)]


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
    reason: str | None = None  # pod-level reason (DeadlineExceeded, Evicted...)
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
        for key in ("reason", "waiting_reason"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class JobStatus:
    state: str
    reason: str = ""
    replicas: Mapping[str, ReplicaState] = field(default_factory=dict)
    failed_pod: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)

    def summary(self, job: str = "", namespace: str = "") -> dict[str, Any]:
        return {"job": job, "namespace": namespace, "state": self.state, "reason": self.reason,
                "failed_pod": self.failed_pod, "counts": dict(self.counts),
                "replicas": {k: r.summary() for k, r in sorted(self.replicas.items())}}

    def progress(self) -> str:
        parts = [f"{k}={val}" for k, val in sorted(self.counts.items()) if val]
        return ", ".join(parts) or "no pods yet"


def _ts(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    text = str(value).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


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


def replica_state(pod: Any) -> ReplicaState | None:
    labels = _get(pod, "metadata", "labels") or {}
    role, index = labels.get(LABEL_ROLE), labels.get(LABEL_INDEX)
    if role is None or index is None:
        return None
    status = _get(pod, "status") or {}
    unschedulable = None
    for cond in _get(status, "conditions") or []:
        if _get(cond, "type") == "PodScheduled" and _get(cond, "status") == "False":
            unschedulable = _get(cond, "message") or _get(cond, "reason") or "Unschedulable"
    cs = next((c for c in (_get(status, "containerStatuses") or []) if _get(c, "name") == CONTAINER_NAME), None)
    exit_code = last_exit = waiting = waiting_msg = started = finished = None
    restarts = 0
    if cs is not None:
        restarts = int(_get(cs, "restartCount") or 0)
        term = _get(cs, "state", "terminated")
        if term is not None:
            exit_code = _get(term, "exitCode")
            started, finished = _ts(_get(term, "startedAt")), _ts(_get(term, "finishedAt"))
        running = _get(cs, "state", "running")
        if running is not None:
            started = _ts(_get(running, "startedAt"))
        wait = _get(cs, "state", "waiting")
        if wait is not None:
            waiting, waiting_msg = _get(wait, "reason"), _get(wait, "message")
        last = _get(cs, "lastState", "terminated")
        if last is not None:
            last_exit = _get(last, "exitCode")
    return ReplicaState(
        role=role, index=int(index), pod=_get(pod, "metadata", "name") or "",
        phase=_get(status, "phase") or "Pending", restarts=restarts, exit_code=exit_code,
        last_exit_code=last_exit, waiting_reason=waiting, waiting_message=waiting_msg,
        unschedulable=unschedulable, reason=_get(status, "reason"),
        created=_ts(_get(pod, "metadata", "creationTimestamp")),
        started=started or _ts(_get(status, "startTime")), finished=finished,
    )


def evaluate(pods: Iterable[Any], policy: JobPolicy, now: float, watch_started: float) -> JobStatus:
    """The job's state from one LIST of its pods.

    ``watch_started`` is when the sensor first looked; a replica missing for
    longer than the startup timeout since then was never created.
    """
    states: dict[str, ReplicaState] = {}
    for pod in pods:
        if _get(pod, "metadata", "deletionTimestamp") is not None:
            continue
        st = replica_state(pod)
        if st is not None:
            states[st.key] = st
    counts: dict[str, int] = {}
    for st in states.values():
        counts[st.phase] = counts.get(st.phase, 0) + 1
        counts["restarts"] = counts.get("restarts", 0) + st.restarts

    def fail(reason: str, st: ReplicaState | None = None) -> JobStatus:
        return JobStatus(FAILED, reason, states, st.pod if st else None, counts)

    created = [s.created for s in states.values() if s.created]
    job_start = min(created) if created else watch_started
    if policy.active_deadline and now - job_start > policy.active_deadline:
        return fail(f"active_deadline of {policy.active_deadline:.0f}s passed "
                    f"(job running {now - job_start:.0f}s)")

    for role, index in policy.expected():
        key = f"{role}-{index}"
        st = states.get(key)
        if st is None:
            if now - watch_started > policy.startup_timeout:
                return fail(f"replica {key} has no pod {now - watch_started:.0f}s after the job "
                            f"started (startup_timeout {policy.startup_timeout:.0f}s): it was never "
                            "created or was deleted")
            continue
        tracked = policy.tracked.get(role, True)
        age = now - (st.created or watch_started)
        if st.phase == "Pending":
            if st.unschedulable and age > policy.schedule_timeout:
                return fail(f"{key} ({st.pod}) is Unschedulable for {age:.0f}s "
                            f"(schedule_timeout {policy.schedule_timeout:.0f}s): {st.unschedulable}", st)
            if st.waiting_reason in IMAGE_PULL_REASONS:
                return fail(f"{key} ({st.pod}) cannot pull its image: {st.waiting_reason}"
                            + (f": {st.waiting_message}" if st.waiting_message else ""), st)
            if st.waiting_reason in CONFIG_ERROR_REASONS:
                return fail(f"{key} ({st.pod}) cannot start its container: {st.waiting_reason}"
                            + (f": {st.waiting_message}" if st.waiting_message else ""), st)
            if not st.unschedulable and age > policy.startup_timeout:
                return fail(f"{key} ({st.pod}) has not started {age:.0f}s after creation "
                            f"(startup_timeout {policy.startup_timeout:.0f}s)"
                            + (f"; waiting: {st.waiting_reason}" if st.waiting_reason else ""), st)
        if st.phase == "Failed":
            code = st.exit_code if st.exit_code is not None else st.last_exit_code
            what = "tracked replica" if tracked else "untracked replica"
            return fail(f"{what} {key} ({st.pod}) failed"
                        + (f" with exit code {code}" if code is not None else "")
                        + (f" (reason {st.reason})" if st.reason else ""), st)
        if st.phase == "Succeeded" and not tracked:
            return fail(f"untracked replica {key} ({st.pod}) exited (code {st.exit_code}) before "
                        "the job finished; parameter servers and TF2 workers must keep serving", st)
        if st.restarts > policy.max_restarts:
            return fail(f"{key} ({st.pod}) restarted {st.restarts} times, more than max_restarts "
                        f"{policy.max_restarts}; last exit code {st.last_exit_code}", st)
        if (policy.restart_policy.get(role) == "ExitCode" and st.last_exit_code is not None
                and 1 <= st.last_exit_code <= 127):
            return fail(f"{key} ({st.pod}) exited with permanent exit code {st.last_exit_code} "
                        "(ExitCode policy: 1-127 are not retried)", st)

    if all(states.get(f"{r}-{i}") is not None and states[f"{r}-{i}"].phase == "Succeeded"
           for r, i in policy.success):
        return JobStatus(SUCCEEDED, "success policy met: " + ", ".join(f"{r}-{i}" for r, i in policy.success)
                         + " succeeded", states, None, counts)
    return JobStatus(RUNNING, "", states, None, counts)
