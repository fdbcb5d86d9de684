"""The package's one vocabulary of states: what the judge says of a job, and how a task of it ends.

Why enums and exhaustive matches: every place that acts on a state (the judge, the recovery
planner, the watch, the triggers, the sensor, the replica task, the TF jobs view) matches it
with ``match`` and ends in :func:`typing.assert_never`. Adding a state is one line here; mypy
then names every ``match`` that does not handle it yet, so no consumer is forgotten
(docs/architecture.md, "Adding a state").

Both are ``str`` enums: a state is written to XCom, to trigger events and to the job's
Service as the same string it always was (``"running"``, ``"succeeded"``...).
"""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

__all__ = ["JobState", "EndState", "is_final", "end_of"]


class JobState(StrEnum):
    """The judge's state of a job (:class:`~tfk8s_airflow.job.run.judge.JobStatus`, the summary, the progress)."""

    RUNNING = "running"  # not ended: pods pending, running or being recovered
    QUEUED = "queued"  # not ended, not started: Kueue holds every pod until its queue admits the job whole
    HELD = "held"  # not ended, not started: another controller's scheduling gate holds the pods
    SUCCEEDED = "succeeded"  # the success policy is met
    FAILED = "failed"  # a replica, a timeout or the recovery planner failed the job


class EndState(StrEnum):
    """How a task of a job ends: a replica task's outcome (succeeded, failed, skipped) and the
    state of every trigger event of the package (:class:`~tfk8s_airflow.job.run.records.TriggerOutcome`)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # a tracked replica that did not finish because another one failed the job
    TIMED_OUT = "timed_out"  # a sensor's own timeout passed (the job's wait, a partition's)


def is_final(state: JobState) -> bool:
    """Whether the job has ended: nothing watches, recovers or waits for it any more."""
    match state:
        case JobState.RUNNING | JobState.QUEUED | JobState.HELD:
            return False
        case JobState.SUCCEEDED | JobState.FAILED:
            return True
        case _:
            assert_never(state)


def end_of(state: JobState) -> EndState:
    """How the job sensor's task ends for a final job state (a running job has no end yet)."""
    match state:
        case JobState.SUCCEEDED:
            return EndState.SUCCEEDED
        case JobState.FAILED:
            return EndState.FAILED
        case JobState.RUNNING | JobState.QUEUED | JobState.HELD:
            raise ValueError("a running job has no end state")
        case _:
            assert_never(state)
