"""A job's verdict as it is kept on the job's Service: written once the job has one, read by every watch.

Why on the Service: the verdict must outlive the process that found it. A watch that starts later
(a restarted or another triggerer, a replica task that started late) reads it there and takes the
job as ended; no recovery recreates a pod of a job that has one; and teardown writes one (``ended``
when the sensor found none) before it deletes anything, so a watch still running while teardown
deletes the pods never takes the deletions for lost replicas. The Service is the job's own and is
deleted last. A value written by anyone else is parsed defensively and can at most end the job's
watch early, never make anything run.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job.run.judge import FAILURE_CLASSES
from tfk8s_airflow.job.run.records import RECORD_TEXT_MAX
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.untrusted import clean_text, loads, read

__all__ = ["VERDICT_ANNOTATION", "VERDICT_STATES", "read_verdict", "verdict_body", "summary_verdict"]

#: The job's verdict on its Service, once known (by the watch that judged it, or by teardown before
#: it deletes anything): no recovery acts on a job that has one, and a watch started later takes it.
VERDICT_ANNOTATION = "tfk8s.io/verdict"
#: A final job state, or ``ended``: teardown ran before the job had one.
VERDICT_STATES = (str(JobState.SUCCEEDED), str(JobState.FAILED), "ended")
#: Characters of a verdict's reason kept on the Service.
VERDICT_REASON_MAX = 1000
_REPLICA_KEY = re.compile(r"[a-z]{1,20}-\d{1,6}")


def verdict_body(state: str, reason: str, by: str, failure_class: str | None = None,
                 failed_replica: str | None = None) -> dict[str, Any]:
    """The merge patch that records a job's verdict on its Service (a failure with its class and replica)."""
    doc: dict[str, Any] = {"state": state, "reason": reason[:VERDICT_REASON_MAX], "by": by,
                           "at": round(time.time(), 3)}
    if failure_class:
        doc["failure_class"] = failure_class
    if failed_replica:
        doc["failed_replica"] = failed_replica
    return {"metadata": {"annotations": {VERDICT_ANNOTATION: json.dumps(doc, separators=(",", ":"))}}}


def read_verdict(annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The verdict recorded on a Service's annotations; None when there is none or it is not one
    (a namespace writer's value is ignored, never trusted for more than ending the job's watch).

    Read through the bounded reader (:func:`tfk8s_airflow.untrusted.read`): a value too large, nested
    too deep or not JSON is ignored with a warning, never raised into the watch or teardown. Its
    reason and author become the job's failure reason, so they are cleaned: control and format
    characters removed, at most :data:`VERDICT_REASON_MAX` and 64 characters."""
    raw = (annotations or {}).get(VERDICT_ANNOTATION) if isinstance(annotations, Mapping) else None
    if raw is None:
        return None
    doc = read(raw, max_bytes=4 * VERDICT_REASON_MAX, what=f"the annotation {VERDICT_ANNOTATION}")
    if not isinstance(doc, dict) or doc.get("state") not in VERDICT_STATES:
        return None
    cls, key = doc.get("failure_class"), doc.get("failed_replica")
    by = doc.get("by", "")
    return {"state": doc["state"], "reason": clean_text(doc.get("reason"), VERDICT_REASON_MAX),
            "by": clean_text(by if isinstance(by, str) else str(by)[:64], 64),
            "failure_class": cls if cls in FAILURE_CLASSES else None,
            "failed_replica": key if isinstance(key, str) and _REPLICA_KEY.fullmatch(key) else None}


def summary_verdict(summary: Any) -> tuple[JobState, str, Mapping[str, Any]] | None:
    """(state, reason, per-replica entries) of the job sensor's XCom ``summary`` when it holds a final
    verdict (succeeded or failed); None otherwise. XCom gives the summary as a dict, or as its JSON text
    when the sensor ended in the triggerer."""
    if isinstance(summary, str):
        try:
            summary = loads(summary, max_bytes=RECORD_TEXT_MAX, what="the job's summary")
        except ValueError:
            return None
    if not isinstance(summary, Mapping) or summary.get("state") not in (JobState.SUCCEEDED, JobState.FAILED):
        return None
    replicas = summary.get("replicas")
    return (JobState(summary["state"]), str(summary.get("reason") or ""),
            replicas if isinstance(replicas, Mapping) else {})
