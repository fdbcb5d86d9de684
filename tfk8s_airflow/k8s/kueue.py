"""A job's Kueue objects on the cluster: its Workloads (deleted by teardown first) and Kueue's finalizer.

Why teardown deletes the Workloads itself: under Kueue, deleting a job's pods leaves them Terminating
behind Kueue's finalizer with the ClusterQueue's quota still held, and the next job in the queue stays
blocked; deleting the group's Workload makes Kueue release the quota and the pods at once (0.15-0.33 s
measured on the devstack). Garbage collection through the job's Service does not do it either.

What teardown may touch, and only then: the Workloads Kueue made for this job's pod groups (named by
the group label setup put on the pods, and owned by this job's own pods: by UID, those setup and recovery
created), each deleted with its UID as the precondition, and Kueue's finalizer (``kueue.x-k8s.io/managed``,
nothing else) on this job's own pods once their Workload is gone and they are still held after a bounded
wait. Nobody else's object, gate or finalizer: a Workload of the job's name owned by no pod of the job, or
by none at all, and a pod that only carries the job's label, are left alone.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.job.kueue import FINALIZER, GROUP, GROUP_LABEL, PLURAL, VERSION, group_name
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S, Owned, wrap_api_error

#: How long teardown waits for Kueue to let the job's deleted pods go before it removes its finalizer.
FINALIZER_WAIT_S = 30.0


def _owned_by(workload: Any, uids: Collection[str]) -> bool:
    refs = (workload.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "Pod" and r.get("uid") in uids for r in refs)


class KueueObjects:
    """The Kueue side of one job's teardown (synchronous, on the Kubernetes connection's client)."""

    def __init__(self, api: ApiClient, log: Any) -> None:
        self.custom = CustomObjectsApi(api)
        self.core = CoreV1Api(api)
        self.log = log

    def workloads(self, namespace: str, job: str, pods: Iterable[Any]) -> dict[str, str]:
        """The job's Workloads that exist, ``{name: uid}``: one per pod group its own ``pods`` name, and the
        first attempt's; each only when one of those pods owns it."""
        pods = list(pods)
        uids = {p.metadata.uid for p in pods}
        names = {group_name(job)} | {(p.metadata.labels or {}).get(GROUP_LABEL) for p in pods} - {None}
        found = {}
        for name in sorted(n for n in names if n):
            try:
                wl = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                              _request_timeout=REQUEST_TIMEOUT_S)
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise wrap_api_error(f"reading Workload {namespace}/{name}", exc) from exc
            if _owned_by(wl, uids):
                found[name] = str((wl.get("metadata") or {}).get("uid") or "")
            else:
                self.log.warning("Workload %s/%s is owned by none of job %s's own pods: left alone", namespace, name,
                                 job)
        return found

    def delete_workloads(self, namespace: str, names: Mapping[str, str] | Sequence[str]) -> int:
        """Delete these Workloads (given ``{name: uid}``: each only while it is that object)."""
        deleted = 0
        uids = names if isinstance(names, Mapping) else dict.fromkeys(names, "")
        for name, uid in uids.items():
            try:
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, body={"preconditions": {"uid": uid}} if uid else None,
                    _request_timeout=REQUEST_TIMEOUT_S)
                deleted += 1
            except ApiException as exc:
                if exc.status != 404 and not (uid and exc.status == 409):
                    raise wrap_api_error(f"deleting Workload {namespace}/{name}", exc) from exc
        return deleted

    def release_held(self, namespace: str, selector: str, wait_s: float = FINALIZER_WAIT_S,
                     owned: Owned | None = None) -> list[str]:
        """After the job's Workloads and pods were deleted: wait up to ``wait_s`` for Kueue to let the pods
        go; then remove Kueue's finalizer (only it) from each of the job's own pods (``owned``) still held
        by it. The names of the pods it was removed from."""
        deadline = time.monotonic() + wait_s
        held = self._held(namespace, selector, owned)
        while held and time.monotonic() < deadline:
            time.sleep(0.5)
            held = self._held(namespace, selector, owned)
        released = []
        for pod in held:
            finalizers = list(pod.metadata.finalizers or [])
            index = finalizers.index(FINALIZER)
            # Removes the entry at that index only if it is still Kueue's: another controller's finalizer
            # (or a list changed since it was read) makes the patch fail, never removes theirs.
            patch = [{"op": "test", "path": "/metadata/uid", "value": pod.metadata.uid},
                     {"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
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

    def _held(self, namespace: str, selector: str, owned: Owned | None) -> list[Any]:
        try:
            pods = self.core.list_namespaced_pod(namespace, label_selector=selector,
                                                 _request_timeout=REQUEST_TIMEOUT_S).items
        except ApiException as exc:
            raise wrap_api_error(f"listing pods {selector} in {namespace}", exc) from exc
        return [p for p in pods if p.metadata.deletion_timestamp and FINALIZER in (p.metadata.finalizers or [])
                and (owned is None or owned.pod(p))]


def release_quota(api: ApiClient, namespace: str, job: str, pods: Iterable[Any], log: Any,
                  owned: Owned | None = None) -> list[str]:
    """Teardown's first step for a job with a queue: delete its Workloads (Kueue then frees the quota
    and lets the pods go): those owned by the job's own ``pods`` (with ``owned``, only those of them setup
    and recovery made). The Workloads deleted."""
    kueue = KueueObjects(api, log)
    mine = [p for p in pods if owned is None or owned.pod(p)]
    found = kueue.workloads(namespace, job, mine)
    kueue.delete_workloads(namespace, found)
    names = sorted(found)
    if names:
        log.info("deleted the Kueue Workload(s) of job %s (its quota is released): %s", job, ", ".join(names))
    return names


__all__ = ["FINALIZER_WAIT_S", "KueueObjects", "release_quota"]
