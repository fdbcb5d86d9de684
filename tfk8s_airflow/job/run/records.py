"""Typed, versioned records: everything that crosses a task boundary (XCom, trigger events).

Why records and not dicts: setup, the replica tasks, the sensor, the triggers and teardown
run in different processes (a worker, the triggerer) and only share what XCom or a trigger
event carries. Reading that back by string keys in a dozen places is where a renamed key
goes unnoticed. Each record here has one ``to_xcom()`` (plain JSON data, with ``version``)
and one ``from_xcom()`` that refuses a record it cannot read, naming the fix; readers use
attributes.

Secrets never travel here: the job record holds names, the replica plan and the policy,
not the spec (whose ``env`` may hold values a pod needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tfk8s_airflow import untrusted
from tfk8s_airflow.exceptions import RecordError
from tfk8s_airflow.job.defaults import POLL_INTERVAL_S
from tfk8s_airflow.job.run.judge import JobPolicy, JobStatus
from tfk8s_airflow.job.run.recovery_policy import RecoveryPolicy
from tfk8s_airflow.job.spec import CLEAN_POD_POLICIES
from tfk8s_airflow.job.states import EndState, JobState

RECORD_VERSION = 1
#: Setup's XCom beside ``job``: the record's :attr:`JobRecord.job_id`, a few bytes the triggers pull first.
JOB_ID_KEY = "job_id"
#: Bytes of a record given as JSON text (XCom's, a trigger event's), read through the bounded reader.
RECORD_TEXT_MAX = 64 << 20


def _load(data: Any, what: str) -> dict[str, Any]:
    """The dict of a record, from XCom's value (a dict, or its JSON text)."""
    if isinstance(data, str):
        try:
            data = untrusted.loads(data, max_bytes=RECORD_TEXT_MAX, what="the record")
        except ValueError as exc:
            raise RecordError(f"{what}: not a JSON record ({exc})") from None
    if not isinstance(data, Mapping):
        raise RecordError(f"{what}: expected a mapping, got {type(data).__name__} (fix: pass the "
                          f"producing task's output, e.g. setup's XCom 'job')")
    version = data.get("version")
    if version != RECORD_VERSION:
        raise RecordError(f"{what}: record version {version!r}, this release reads version {RECORD_VERSION} "
                          "(fix: clear the task group so every task of the run uses one release)")
    return dict(data)


def _clean_pod_policy(value: Any) -> str:
    """A record's clean pod policy; one written before the field existed is All (what teardown did then)."""
    if value is None:
        return "All"
    if value not in CLEAN_POD_POLICIES:
        raise RecordError(f"job record: clean_pod_policy {value!r} is not one of {', '.join(CLEAN_POD_POLICIES)} "
                          "(fix: clear the task group so every task of the run uses one release)")
    return str(value)


@dataclass(frozen=True)
class ReplicaRef:
    """One replica of the plan: the replica task with this map index watches this pod."""

    key: str
    role: str
    index: int
    pod: str
    tracked: bool
    uid: str | None = None  # the pod's UID in setup's creation response: the judge counts only recorded pods


@dataclass(frozen=True)
class JobRecord:
    """What setup hands the replica tasks, the sensor and teardown (XCom key ``job``)."""

    job: str
    namespace: str
    service: str
    configmap: str
    selector: str
    policy: JobPolicy  # what the judge needs (in XCom: JobPolicy.to_dict())
    replicas: tuple[ReplicaRef, ...]
    created_at: float
    has_shards: bool = False
    log_dir: str | None = None  # a ``logs`` volume's host path: teardown's default archive root
    identity: Mapping[str, str] = field(default_factory=dict)
    kubernetes_conn_id: str | None = "kubernetes_default"  # how the triggers reach the cluster
    poll_interval: float = POLL_INTERVAL_S  # seconds between the job watch's LISTs
    templates: str | None = None  # the ConfigMap of the pods as created (recovery recreates from it)
    templates_digest: str | None = None  # "sha256:<hex>" of that ConfigMap's data as setup wrote it
    recovery: RecoveryPolicy = field(default_factory=RecoveryPolicy)  # in XCom: RecoveryPolicy.to_dict()
    model_dir: str | None = None  # a ``model`` volume's host path: the chief's checkpoints (progress)
    tensorboard_pod: str | None = None  # the job's TensorBoard pod (``tensorboard:`` in the spec)
    tensorboard_port: int | None = None
    tensorboard_url: str | None = None  # [tfk8s] tensorboard_url with what setup knows filled in ({pod_ip} may remain)
    clean_pod_policy: str = "All"  # the spec's: Running or None, teardown keeps the finished pods...
    finished_pod_ttl: int = 0  # ...this many seconds (a record without these fields: All, as before them)
    queue: str | None = None  # the Kueue LocalQueue its pods were submitted to, as one pod group per attempt
    service_uid: str | None = None  # the job's Service as setup created it: the owner of everything else it made
    version: int = RECORD_VERSION

    @property
    def keeps_finished_pods(self) -> bool:
        """Whether teardown keeps the finished pods for a while (``clean_pod_policy`` Running or None)."""
        return self.clean_pod_policy in ("Running", "None") and self.finished_pod_ttl > 0

    @property
    def job_id(self) -> str:
        """What changes whenever setup (re)creates the job: its name and creation time (XCom ``job_id``)."""
        return f"{self.job}@{self.created_at!r}"

    @property
    def lead(self) -> ReplicaRef | None:
        """The replica whose progress is the job's: the chief, else worker 0."""
        keys = {r.key: r for r in self.replicas}
        return keys.get("chief-0") or keys.get("worker-0")

    def replica(self, map_index: int) -> ReplicaRef:
        """The replica of a replica task's map index (plan order: chief, evaluator, ps, worker)."""
        if not 0 <= map_index < len(self.replicas):
            raise RecordError(f"map index {map_index} is outside the job's {len(self.replicas)} replicas "
                              f"(fix: the replica tasks must map over setup's output)")
        return self.replicas[map_index]

    def recorded_pods(self) -> dict[str, tuple[str, int]] | None:
        """Setup's pods by UID: ``{uid: (replica key, attempt 1)}``; None for a record written before setup
        recorded UIDs (its pods are then known by their labels, as they were)."""
        if not self.replicas or any(not r.uid for r in self.replicas):
            return None
        return {str(r.uid): (r.key, 1) for r in self.replicas}

    def replica_by_key(self, key: str) -> ReplicaRef:
        for ref in self.replicas:
            if ref.key == key:
                return ref
        raise RecordError(f"job {self.job} has no replica {key!r}: {', '.join(r.key for r in self.replicas)}")

    def to_xcom(self) -> dict[str, Any]:
        out = asdict(self)
        out["policy"] = self.policy.to_dict()
        out["identity"] = dict(self.identity)
        out["replicas"] = [asdict(r) for r in self.replicas]
        out["recovery"] = self.recovery.to_dict()
        return out

    @classmethod
    def from_xcom(cls, data: Any) -> JobRecord:
        d = _load(data, "job record")
        try:
            return cls(job=d["job"], namespace=d["namespace"], service=d["service"], configmap=d["configmap"],
                       selector=d["selector"], policy=JobPolicy.from_dict(d["policy"]),
                       replicas=tuple(ReplicaRef(**r) for r in d["replicas"]),
                       created_at=float(d["created_at"]), has_shards=bool(d.get("has_shards")),
                       log_dir=d.get("log_dir"), identity=dict(d.get("identity") or {}),
                       kubernetes_conn_id=d.get("kubernetes_conn_id"),
                       poll_interval=float(d.get("poll_interval") or POLL_INTERVAL_S), templates=d.get("templates"),
                       templates_digest=d.get("templates_digest"),
                       recovery=RecoveryPolicy.from_dict(d.get("recovery")), model_dir=d.get("model_dir"),
                       tensorboard_pod=d.get("tensorboard_pod"), tensorboard_port=d.get("tensorboard_port"),
                       tensorboard_url=d.get("tensorboard_url"),
                       clean_pod_policy=_clean_pod_policy(d.get("clean_pod_policy")),
                       finished_pod_ttl=int(d.get("finished_pod_ttl") or 0),
                       queue=str(d["queue"]) if d.get("queue") else None,
                       service_uid=str(d["service_uid"]) if d.get("service_uid") else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"job record: missing or malformed field {exc}") from None


@dataclass(frozen=True)
class ReplicaResult:
    """How one replica ended, as its replica task reports it."""

    key: str
    pod: str
    state: EndState  # succeeded | failed | skipped
    reason: str
    phase: str = ""
    exit_code: int | None = None
    restarts: int = 0
    node: str | None = None
    failure_class: str | None = None
    log: str | None = None  # the file its whole log was streamed to (None: not streamed)
    log_bytes: int | None = None  # that file's size when the replica task ended

    def to_xcom(self) -> dict[str, Any]:
        return {**asdict(self), "state": str(self.state), "version": RECORD_VERSION}

    @classmethod
    def from_xcom(cls, data: Any) -> ReplicaResult:
        d = _load(data, "replica result")
        d.pop("version", None)
        try:
            return cls(**{**d, "state": EndState(str(d.get("state")))})
        except (TypeError, ValueError) as exc:
            raise RecordError(f"replica result: malformed ({exc})") from None


@dataclass(frozen=True)
class JobSummary:
    """The job sensor's XCom ``summary``: the job's state, why, and each replica as the judge saw it.

    Built by :meth:`of` only, from the judge's status (the trigger's, the non-deferrable poke's, a
    watch that could not start). ``replicas`` maps ``<role>-<i>`` to the entry of
    :meth:`~tfk8s_airflow.job.run.judge.ReplicaState.summary` (``pod``, ``phase``, ``restarts``, and when
    known ``exit_code``, ``duration_s``, ``node``, ``reason``, ``waiting_reason``, ``container``,
    ``init_exit_code``). ``progress`` (with its ``attempts``) is the watch's last, when it had one;
    ``overrides`` what a recovery changed (e.g. the memory an OOM relaunch chose).
    """

    job: str
    namespace: str
    state: JobState
    reason: str = ""
    failed_pod: str | None = None
    failed_container: str | None = None
    failure_class: str | None = None
    failed_replica: str | None = None
    stopped: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    replicas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tensorboard_url: str | None = None
    progress: JobProgress | None = None
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, record: JobRecord, status: JobStatus, *, tensorboard_url: str | None = None,
           progress: JobProgress | None = None,
           overrides: Mapping[str, Mapping[str, Any]] | None = None) -> JobSummary:
        """The one way a summary is made: the job's record and the judge's status of it."""
        return cls(job=record.job, namespace=record.namespace, state=status.state, reason=status.reason,
                   failed_pod=status.failed_pod, failed_container=status.failed_container,
                   failure_class=status.failure_class, failed_replica=status.failed_key, stopped=status.stopped,
                   counts=dict(status.counts),
                   replicas={k: r.summary() for k, r in sorted(status.replicas.items())},
                   tensorboard_url=tensorboard_url, progress=progress, overrides=dict(overrides or {}))

    def to_xcom(self) -> dict[str, Any]:
        """The XCom ``summary`` (its keys as they have always been; ``progress``, ``attempts`` and
        ``overrides`` only when there are any)."""
        out: dict[str, Any] = {
            "job": self.job, "namespace": self.namespace, "state": str(self.state), "reason": self.reason,
            "failed_pod": self.failed_pod, "failed_container": self.failed_container,
            "failure_class": self.failure_class, "failed_replica": self.failed_replica,
            "stopped": list(self.stopped), "counts": dict(self.counts),
            "replicas": {k: dict(v) for k, v in self.replicas.items()}, "tensorboard_url": self.tensorboard_url}
        if self.progress is not None:
            progress = self.progress.to_xcom()
            out["progress"] = progress
            out["attempts"] = progress["attempts"]
        if self.overrides:
            out["overrides"] = {k: dict(v) for k, v in self.overrides.items()}
        return out

    @classmethod
    def from_xcom(cls, data: Any) -> JobSummary:
        """A summary read back (from a trigger event, or the XCom as a dict or its JSON text)."""
        if isinstance(data, str):
            try:
                data = untrusted.loads(data, max_bytes=RECORD_TEXT_MAX, what="the summary")
            except ValueError as exc:
                raise RecordError(f"job summary: not JSON ({exc})") from None
        if not isinstance(data, Mapping):
            raise RecordError(f"job summary: expected a mapping, got {type(data).__name__}")
        d = data
        try:
            return cls(job=str(d["job"]), namespace=str(d["namespace"]), state=JobState(d["state"]),
                       reason=str(d.get("reason") or ""), failed_pod=d.get("failed_pod"),
                       failed_container=d.get("failed_container"), failure_class=d.get("failure_class"),
                       failed_replica=d.get("failed_replica"), stopped=tuple(d.get("stopped") or ()),
                       counts=dict(d.get("counts") or {}),
                       replicas={str(k): dict(v) for k, v in (d.get("replicas") or {}).items()},
                       tensorboard_url=d.get("tensorboard_url"),
                       progress=JobProgress.from_xcom(d["progress"]) if d.get("progress") else None,
                       overrides=dict(d.get("overrides") or {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"job summary: missing or malformed field {exc}") from None


@dataclass(frozen=True)
class TriggerOutcome:
    """The event every trigger of the package fires: ``kind`` says whose, ``state`` how it ended.

    ``summary`` is the job's summary (``kind="job"``), ``replica`` the replica's result
    (``kind="replica"``); a partition trigger (``kind="partition"``) carries only the reason.
    """

    kind: str  # job | replica | partition
    state: EndState
    reason: str
    summary: JobSummary | None = None
    replica: ReplicaResult | None = None
    version: int = RECORD_VERSION

    def to_payload(self) -> dict[str, Any]:
        return {"kind": self.kind, "state": str(self.state), "reason": self.reason,
                "summary": self.summary.to_xcom() if self.summary is not None else None,
                "replica": self.replica.to_xcom() if self.replica else None, "version": self.version}

    @classmethod
    def from_payload(cls, data: Any) -> TriggerOutcome:
        d = _load(data, "trigger event")
        try:
            state = EndState(str(d.get("state")))
        except ValueError:
            raise RecordError(f"trigger event: unknown state {d.get('state')!r}") from None
        return cls(kind=str(d.get("kind")), state=state, reason=str(d.get("reason") or ""),
                   summary=JobSummary.from_xcom(d["summary"]) if d.get("summary") is not None else None,
                   replica=ReplicaResult.from_xcom(d["replica"]) if d.get("replica") else None)


@dataclass(frozen=True)
class Attempt:
    """One group restart or replica replacement the recovery made, and why."""

    number: int  # the job's attempt after it (the first run is attempt 1)
    failure_class: str  # code | infrastructure | oom | stalled | straggler | config
    reason: str
    at: float
    action: str = "restart_group"  # restart_group | replace
    replicas: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProgressPoint:
    at: float
    step: int
    loss: float | None = None
    examples_per_sec: float | None = None


@dataclass(frozen=True)
class JobProgress:
    """A running job as the UI and the task logs show it (the sensor's XCom ``progress``,
    refreshed while the job runs; its last value also goes into the summary).

    ``replicas`` maps ``<role>-<i>`` to ``{"pod", "phase", "restarts", "exit_code", "node"}``.
    """

    job: str
    namespace: str
    state: JobState
    updated_at: float
    step: int | None = None
    target_step: int | None = None
    loss: float | None = None
    examples_per_sec: float | None = None
    eta_s: float | None = None
    history: tuple[ProgressPoint, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    replicas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tensorboard_url: str | None = None
    waiting: str = ""  # what holds its pods before they start: Kueue's queue and place, or another's gate
    version: int = RECORD_VERSION

    def to_xcom(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = str(self.state)
        out["history"] = [asdict(p) for p in self.history]
        out["attempts"] = [{**asdict(a), "replicas": list(a.replicas)} for a in self.attempts]
        out["replicas"] = {k: dict(v) for k, v in self.replicas.items()}
        return out

    @classmethod
    def from_xcom(cls, data: Any) -> JobProgress:
        d = _load(data, "job progress")
        d.pop("version", None)
        try:
            d["history"] = tuple(ProgressPoint(**p) for p in d.get("history") or ())
            d["attempts"] = tuple(Attempt(**{**a, "replicas": tuple(a.get("replicas") or ())})
                                  for a in d.get("attempts") or ())
            d["state"] = JobState(str(d.get("state")))
            return cls(**d)
        except (TypeError, ValueError) as exc:
            raise RecordError(f"job progress: malformed ({exc})") from None
