"""What a job's watch reports as metrics (:mod:`tfk8s_airflow.metricnames`), from what it already judged.

The job sensor's trigger calls :class:`JobMetrics` on each snapshot and at the verdict; each point is made
once per job (the admission, all Running, each recovery attempt, the end). Pure: the trigger emits them
(:func:`tfk8s_airflow.metrics.emit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tfk8s_airflow.contract import LABEL_DAG
from tfk8s_airflow.job.run.judge import JobStatus
from tfk8s_airflow.job.run.records import Attempt, JobProgress, JobRecord, ProgressPoint
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.metricnames import Point

__all__ = ["JobMetrics", "job_tags", "steps_per_second"]

_STARTED = ("Running", "Succeeded", "Failed")


def _tag(value: object) -> str:
    return str(value)[:63]


def job_tags(record: JobRecord, dag: str | None, task: str | None) -> tuple[tuple[str, str], ...]:
    """The tags of every job metric (:data:`~tfk8s_airflow.metricnames.JOB_TAGS`); an unknown one is left out.
    Without the task instance (``dag.test()`` runs triggers without one) the DAG is the job's own label."""
    values = {"dag": dag or record.identity.get(LABEL_DAG), "task": task, "job": record.job, "queue": record.queue}
    return tuple((k, _tag(v)) for k, v in values.items() if v)


def steps_per_second(history: Sequence[ProgressPoint]) -> float | None:
    """Steps over seconds between the first and the last point of the progress history (None when it
    has fewer than two points apart in time)."""
    if len(history) < 2 or history[-1].at <= history[0].at:
        return None
    return max(0, history[-1].step - history[0].step) / (history[-1].at - history[0].at)


@dataclass
class JobMetrics:
    """The metric points of one job, each once."""

    record: JobRecord
    dag: str | None = None
    task: str | None = None
    admitted: bool = False
    running: bool = False
    attempts_seen: int = 0
    tags: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self) -> None:
        self.tags = job_tags(self.record, self.dag, self.task)

    def _since_created(self, name: str, now: float, *extra: tuple[str, str]) -> Point:
        return Point(name, max(0.0, now - self.record.created_at), (*self.tags, *extra))

    def on_status(self, status: JobStatus, attempts: Iterable[Attempt], now: float) -> list[Point]:
        """The points a snapshot makes: the admission (the job left ``queued``/``held``), every replica
        started, and each recovery attempt not seen before."""
        out: list[Point] = []
        if not self.admitted and status.state not in (JobState.QUEUED, JobState.HELD):
            self.admitted = True
            out.append(self._since_created("tfk8s.job.admission_wait", now))
        if (not self.running and status.replicas
                and all(r.phase in _STARTED for r in status.replicas.values())):
            self.running = True
            out.append(self._since_created("tfk8s.job.time_to_running", now))
        attempts = list(attempts)
        for attempt in attempts[self.attempts_seen:]:
            out.append(Point("tfk8s.job.restarts", 1, (*self.tags, ("class", _tag(attempt.failure_class)),
                                                        ("action", _tag(attempt.action)))))
        self.attempts_seen = max(self.attempts_seen, len(attempts))
        return out

    def at_end(self, status: JobStatus | None, outcome: str, failure_class: str | None,
               progress: JobProgress | None, now: float) -> list[Point]:
        """The verdict's points: duration and outcome (by class), each exited replica, the training rate."""
        verdict = (*self.tags, ("outcome", _tag(outcome)), ("class", _tag(failure_class or "none")))
        out = [self._since_created("tfk8s.job.duration", now, *verdict[len(self.tags):]),
               Point("tfk8s.job.outcome", 1, verdict)]
        for _key, rep in sorted((status.replicas if status else {}).items()):
            if rep.phase in ("Succeeded", "Failed"):
                out.append(Point("tfk8s.replica.exits", 1, (*self.tags, ("role", _tag(rep.role)),
                                                             ("outcome", "succeeded" if rep.phase == "Succeeded"
                                                              else "failed"))))
        if progress is not None:
            rate = steps_per_second(progress.history)
            if rate is not None:
                out.append(Point("tfk8s.job.steps_per_second", rate, self.tags))
            if progress.examples_per_sec is not None:
                out.append(Point("tfk8s.job.examples_per_second", float(progress.examples_per_sec), self.tags))
        return out
