"""A job's Kueue objects on the cluster: its Workloads (deleted by teardown first) and Kueue's finalizer.

Why teardown deletes the Workloads itself: under Kueue, deleting a job's pods leaves them Terminating
behind Kueue's finalizer with the ClusterQueue's quota still held, and the next job in the queue stays
blocked; deleting the group's Workload makes Kueue release the quota and the pods at once (0.15-0.33 s
measured on the devstack). Garbage collection through the job's Service does not do it either.

What teardown may touch, and only then: the Workloads Kueue made for this job's pod groups (named by
the group label setup put on the pods, and owned by this job's pods), and Kueue's finalizer
(``kueue.x-k8s.io/managed``, nothing else) on this job's own pods once their Workload is gone and they
are still held after a bounded wait. Nobody else's object, gate or finalizer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.job.kueue import FINALIZER, GROUP, GROUP_LABEL, PLURAL, VERSION, group_name
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S, wrap_api_error

#: How long teardown waits for Kueue to let the job's deleted pods go before it removes its finalizer.
FINALIZER_WAIT_S = 30.0


def _owned_by_job(workload: Any, job: str) -> bool:
    refs = (workload.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "Pod" and str(r.get("name") or "").startswith(f"{job}-") for r in refs)


class KueueObjects:
    """The Kueue side of one job's teardown (synchronous, on the Kubernetes connection's client)."""

    def __init__(self, api: ApiClient, log: Any) -> None:
        self.custom = CustomObjectsApi(api)
        self.core = CoreV1Api(api)
        self.log = log

    def workloads(self, namespace: str, job: str, pods: Iterable[Any]) -> list[str]:
        """The job's Workloads that exist: one per pod group its pods name, and the first attempt's."""
        names = {group_name(job)} | {(p.metadata.labels or {}).get(GROUP_LABEL) for p in pods} - {None}
        found = []
        for name in sorted(n for n in names if n):
            try:
                wl = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                              _request_timeout=REQUEST_TIMEOUT_S)
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise wrap_api_error(f"reading Workload {namespace}/{name}", exc) from exc
            if _owned_by_job(wl, job) or not (wl.get("metadata") or {}).get("ownerReferences"):
                found.append(name)
            else:
                self.log.warning("Workload %s/%s is not owned by job %s's pods: left alone", namespace, name, job)
        return found

    def delete_workloads(self, namespace: str, names: Sequence[str]) -> int:
        deleted = 0
        for name in names:
            try:
                self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                            _request_timeout=REQUEST_TIMEOUT_S)
                deleted += 1
            except ApiException as exc:
                if exc.status != 404:
                    raise wrap_api_error(f"deleting Workload {namespace}/{name}", exc) from exc
        return deleted

    def release_held(self, namespace: str, selector: str, wait_s: float = FINALIZER_WAIT_S) -> list[str]:
        """After the job's Workloads and pods were deleted: wait up to ``wait_s`` for Kueue to let the pods
        go; then remove Kueue's finalizer (only it) from each of the job's pods still held by it. The
        names of the pods it was removed from."""
        deadline = time.monotonic() + wait_s
        held = self._held(namespace, selector)
        while held and time.monotonic() < deadline:
            time.sleep(0.5)
            held = self._held(namespace, selector)
        released = []
        for pod in held:
            finalizers = list(pod.metadata.finalizers or [])
            index = finalizers.index(FINALIZER)
            # Removes the entry at that index only if it is still Kueue's: another controller's finalizer
            # (or a list changed since it was read) makes the patch fail, never removes theirs.
            patch = [{"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
                     {"op": "remove", "path": f"/metadata/finalizers/{index}"}]
            try:
                self.core.patch_namespaced_pod(pod.metadata.name, namespace, patch,
                                               _content_type="application/json-patch+json",
                                               _request_timeout=REQUEST_TIMEOUT_S)
                released.append(pod.metadata.name)
            except ApiException as exc:
                if exc.status not in (404, 409, 422):
                    raise wrap_api_error(f"removing Kueue's finalizer from pod {namespace}/{pod.metadata.name}",
                                         exc) from exc
        if released:
            self.log.warning("removed Kueue's finalizer %s from %d pod(s) still held %.0fs after their Workload "
                             "was deleted: %s", FINALIZER, len(released), wait_s, ", ".join(released))
        return released

    def _held(self, namespace: str, selector: str) -> list[Any]:
        try:
            pods = self.core.list_namespaced_pod(namespace, label_selector=selector,
                                                 _request_timeout=REQUEST_TIMEOUT_S).items
        except ApiException as exc:
            raise wrap_api_error(f"listing pods {selector} in {namespace}", exc) from exc
        return [p for p in pods if p.metadata.deletion_timestamp and FINALIZER in (p.metadata.finalizers or [])]


def release_quota(api: ApiClient, namespace: str, job: str, pods: Iterable[Any], log: Any) -> list[str]:
    """Teardown's first step for a job with a queue: delete its Workloads (Kueue then frees the quota
    and lets the pods go). The Workloads deleted."""
    kueue = KueueObjects(api, log)
    names = kueue.workloads(namespace, job, pods)
    kueue.delete_workloads(namespace, names)
    if names:
        log.info("deleted the Kueue Workload(s) of job %s (its quota is released): %s", job, ", ".join(names))
    return names


__all__ = ["FINALIZER_WAIT_S", "KueueObjects", "release_quota"]
