"""What a replica task's log says when its container has no log yet: words, not the API server's JSON."""
from __future__ import annotations

import asyncio
import json

from tfk8s_airflow.exceptions import KubernetesApiError
from tfk8s_airflow.triggers.job import TFReplicaTrigger

NOT_FOUND = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                        "message": "the server could not find the requested resource", "reason": "NotFound"})


class _Watch:
    def __init__(self, exc: Exception):
        self.exc = exc

    async def read_log(self, pod, container, **kwargs):
        raise self.exc


def _bounded(exc: Exception, previous: bool = False) -> str:
    trigger = TFReplicaTrigger(job={}, replica="worker-0")
    return asyncio.run(trigger._bounded(_Watch(exc), "j-worker-0", "tensorflow", previous=previous, where=""))


def test_a_container_with_no_log_yet_is_said_in_words():
    text = _bounded(KubernetesApiError("reading the log of j-worker-0", 404, NOT_FOUND))
    assert text.startswith("<no log yet: container tensorflow of j-worker-0 has none to give (not started yet")
    assert "{" not in text and "NotFound" not in text
    waiting = _bounded(KubernetesApiError("reading the log", 400, 'container "tensorflow" is waiting to start'),
                       previous=True)
    assert waiting.startswith("<no log yet: the previous container of j-worker-0")


def test_other_api_errors_still_say_what_failed():
    text = _bounded(KubernetesApiError("reading the log of j-worker-0", 500, "etcdserver: request timed out"))
    assert text == ("<log unavailable: Kubernetes API error while reading the log of j-worker-0: HTTP 500: "
                    "etcdserver: request timed out>")
