"""Running an evaluation pod to its end: create it, wait, read how it ended, delete it.

Why its own module: the evaluation pod is one pod that runs once (``restartPolicy: Never``),
not a job: no gang, no watch shared with other tasks, no teardown. The task that starts it
waits for it, reads its container's termination message (the evaluator's result) and the
tail of its log, and deletes it whatever happened, so nothing of an evaluation outlives its
task; its ``activeDeadlineSeconds`` bounds it if the task itself dies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tfk8s_airflow.contract import CONTAINER_NAME
from tfk8s_airflow.exceptions import PermanentKubernetesApiError
from tfk8s_airflow.k8s.client import JobClient

__all__ = ["PodEnding", "run_pod"]

#: Waiting reasons that never resolve by waiting longer.
_STUCK = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                    "CreateContainerError"})


class Logger(Protocol):
    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...


@dataclass(frozen=True)
class PodEnding:
    """How the evaluation pod ended."""

    phase: str
    exit_code: int | None  # None: the container never ran to an end (deadline, image, eviction)
    reason: str
    message: str  # the termination message (the result, or the log's tail after a failure)
    log: str  # the tail of the container's log ('' when it could not be read)


def _container(pod: Any) -> Any:
    return next((cs for cs in (pod.status.container_statuses or []) if cs.name == CONTAINER_NAME), None)


def run_pod(client: JobClient, pod: Mapping[str, Any], *, timeout: float, poll_interval: float = 2.0,
            log_lines: int = 40, logger: Logger | None = None) -> PodEnding:
    """Create ``pod`` (deleting one of the same name an earlier try left), wait until it ends or
    ``timeout`` seconds pass (:class:`TimeoutError`), and delete it in any case."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    if client.delete_pod(ns, name) and not client.wait_pod_gone(ns, name):
        raise TimeoutError(f"the evaluation pod {ns}/{name} of an earlier try is still being deleted")
    if not client.create_if_absent(pod):
        raise PermanentKubernetesApiError(f"creating pod {ns}/{name}", 409, "a pod of that name appeared meanwhile")
    try:
        return _wait(client, ns, name, timeout, poll_interval, log_lines, logger)
    finally:
        client.delete_pod(ns, name)


def _wait(client: JobClient, ns: str, name: str, timeout: float, poll_interval: float, log_lines: int,
          logger: Logger | None) -> PodEnding:
    deadline = time.monotonic() + timeout
    seen = ""
    while True:
        current = client.read_pod(ns, name)
        if current is None:
            return PodEnding("Gone", None, "the evaluation pod was deleted", "", "")
        status = _container(current)
        state = status.state if status is not None else None
        phase = current.status.phase or "Pending"
        waiting = state.waiting.reason if state is not None and state.waiting is not None else ""
        where = f"{phase}{f' ({waiting})' if waiting else ''} on {current.spec.node_name or 'no node yet'}"
        if where != seen and logger is not None:
            logger.info("evaluation pod %s: %s", name, where)
        seen = where
        if phase in ("Succeeded", "Failed") or waiting in _STUCK:
            break
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the evaluation pod {ns}/{name} did not finish within {timeout:.0f}s ({where})")
        time.sleep(poll_interval)
    terminated = state.terminated if state is not None else None
    text, _error = client.try_log_tail(ns, name, log_lines)
    if terminated is None:
        reason = waiting or current.status.reason or current.status.message or phase
        return PodEnding(phase, None, str(reason), "", text)
    return PodEnding(phase, terminated.exit_code, terminated.reason or "", terminated.message or "", text)
