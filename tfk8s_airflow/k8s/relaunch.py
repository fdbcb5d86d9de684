"""Carrying out a recovery decision: a group restart or a replica replacement, under a lease.

Why state lives on the cluster: the job's triggers may restart (a triggerer restart, HA
triggerers, ``dag.test()`` running one trigger after another), so the attempts made and the
overrides they brought (memory after an OOM, nodes to avoid) are kept as an annotation of the
job's Service. Patching it with the Service's resourceVersion is the lease: of two watches
that decide the same restart, one patch succeeds and only that watch acts. The pods are
recreated from the job's templates ConfigMap (``<job>-pods``, written by setup, xz-compressed JSON),
with the same names and DNS, a new ``tfk8s.io/attempt`` label, and again held by the scheduling
gate until every one exists. A job with a Kueue ``queue`` restarts as a whole new pod group (a new
group name, so a new Workload), its old Workload deleted first, and its pods under new names: a pod
recreated under its old name would wait for the old one, which Kueue's finalizer keeps until its group
is done. The DNS names (hostname and subdomain) stay.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
import lzma
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow.contract import CONTAINER_NAME, GANG_GATE, LABEL_ATTEMPT, LABEL_INDEX, LABEL_ROLE
from tfk8s_airflow.exceptions import KubernetesApiError, PermanentKubernetesApiError, SpecError
from tfk8s_airflow.job import kueue, podgroup
from tfk8s_airflow.job.builders.admission import admit_pods
from tfk8s_airflow.job.builders.objects import owner_reference
from tfk8s_airflow.job.builders.templatemap import TEMPLATES_KEY, blob_digest
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.policy.settings import lookup
from tfk8s_airflow.job.run.records import Attempt, JobRecord
from tfk8s_airflow.job.run.recovery import REPLACE, RESTART_GROUP, Decision, relaunch_memory
from tfk8s_airflow.job.run.recoverystate import ATTEMPTS_ANNOTATION, read_attempts, read_recreated
from tfk8s_airflow.job.run.verdict import read_verdict, verdict_body
from tfk8s_airflow.job.spec.quantity import quantity_to_float
from tfk8s_airflow.k8s.client import GATE_PATCH, GATE_PATCH_TYPE, REQUEST_TIMEOUT_S, wrap_api_error

TEMPLATES_MAX_JSON_BYTES = 256 * 1024 * 1024  # read bound: a ConfigMap that inflates beyond this is refused
GONE_TIMEOUT_S = 120.0
_log = logging.getLogger(__name__)


def read_templates(binary_data: Mapping[str, str] | None, where: str,
                   limit: int = TEMPLATES_MAX_JSON_BYTES, digest: str | None = None) -> list[dict[str, Any]]:
    """The pod manifests of a templates ConfigMap's ``binaryData``, inflated at most to the read bound.

    ``digest``: what setup wrote (the job record's). Anyone who may write ConfigMaps in the job's
    namespace could otherwise choose the pods recovery creates, past the deployment's policy that
    admitted setup's; a ConfigMap that no longer holds it is refused before it is inflated.
    """
    data = binary_data or {}
    if TEMPLATES_KEY not in data:
        raise _unreadable(where, f"it holds no {TEMPLATES_KEY}")
    raw = base64.b64decode(data[TEMPLATES_KEY])
    found = blob_digest(raw) if digest is not None else ""
    if digest is not None and found != digest:
        raise _unreadable(where, f"it no longer holds what setup wrote ({found[:19]}..., setup wrote "
                                 f"{digest[:19]}...): recovery creates only the pods setup admitted")
    try:
        text = lzma.LZMADecompressor().decompress(raw, limit + 1)
    except lzma.LZMAError as exc:
        raise _unreadable(where, f"it is not xz data ({exc})") from None
    if len(text) > limit:
        raise _unreadable(where, f"it inflates beyond {limit} bytes")
    try:
        pods = json.loads(text)
    except ValueError as exc:
        raise _unreadable(where, f"it is not JSON ({exc})") from None
    if not isinstance(pods, list) or not all(isinstance(p, dict) for p in pods):
        raise _unreadable(where, "it does not hold a list of pod manifests")
    return pods


def _unreadable(where: str, why: str) -> PermanentKubernetesApiError:
    """The templates cannot be trusted or read: recovery stops (the job is judged as it stands)."""
    return PermanentKubernetesApiError(f"reading the pod templates of {where}", None,
                                       f"{why}; the job cannot be recovered")


def memory_of(pod: Mapping[str, Any]) -> float | None:
    for c in pod.get("spec", {}).get("containers", []):
        if c.get("name") == CONTAINER_NAME:
            res = c.get("resources") or {}
            qty = (res.get("limits") or {}).get("memory") or (res.get("requests") or {}).get("memory")
            return quantity_to_float(qty) if qty else None
    return None


def rebuilt(template: Mapping[str, Any], attempt: int, override: Mapping[str, Any],
            group: tuple[str, int] | None = None, pod_group: str | None = None) -> dict[str, Any]:
    """A template made into the pod of ``attempt``: gated, labelled, with its overrides.

    ``group``: (the Kueue pod group's name, its size) for a job with a queue: the pod joins the attempt's
    new group under a new name of its own (:func:`~tfk8s_airflow.job.kueue.attempt_pod_name`).
    ``pod_group``: the attempt's PodGroup for a job admitted by the Workload API (its pods keep their names:
    no finalizer holds the old ones).
    """
    pod = copy.deepcopy(dict(template))
    pod["metadata"].setdefault("labels", {})[LABEL_ATTEMPT] = str(attempt)
    if group is not None:
        pod["metadata"]["name"] = kueue.attempt_pod_name(pod["metadata"]["name"], attempt)
        pod["metadata"]["labels"][kueue.GROUP_LABEL] = group[0]
        pod["metadata"].setdefault("annotations", {})[kueue.GROUP_TOTAL_ANNOTATION] = str(group[1])
    spec = pod["spec"]
    spec["schedulingGates"] = [{"name": GANG_GATE}]
    if pod_group is not None:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    memory = relaunch_memory(memory_of(template), override.get("memory"))  # never below the spec's own
    if memory:
        for c in spec.get("containers", []):
            if c.get("name") == CONTAINER_NAME:
                res = c.setdefault("resources", {})
                for kind in ("requests", "limits"):
                    res.setdefault(kind, {})["memory"] = str(memory)
    avoid = override.get("avoid_nodes") or []
    if avoid:
        required = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {}).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]})
        terms = required.setdefault("nodeSelectorTerms", [{}]) or [{}]
        for term in terms:
            term.setdefault("matchFields", []).append(
                {"key": "metadata.name", "operator": "NotIn", "values": sorted(avoid)})
        required["nodeSelectorTerms"] = terms
    return pod


class Recoverer:
    """The recovery side of one job's watch: its attempts, its templates, and the actions."""

    def __init__(self, record: JobRecord, api: Any, policy: DeploymentPolicy | None = None) -> None:
        self.record = record
        self.api = api
        self._policy = policy
        self.attempts: list[Attempt] = []
        self.overrides: dict[str, dict[str, Any]] = {}
        self._templates: dict[str, dict[str, Any]] | None = None
        self._version: str | None = None
        self.verdict: dict[str, Any] | None = None  # the job's verdict read from its Service: recover nothing
        #: the pods recovery created, from their creation responses: {uid: (name, replica key, attempt)}
        self.recreated: dict[str, tuple[str, str, int]] = {}

    def _v1(self) -> Any:
        from kubernetes_asyncio import client as async_client

        return async_client.CoreV1Api(self.api)

    async def _call(self, action: str, coro: Any) -> Any:
        from kubernetes_asyncio import client as async_client

        try:
            return await coro
        except async_client.ApiException as exc:
            raise wrap_api_error(action, exc) from exc

    async def load(self) -> None:
        """Read the attempts and overrides recorded on the job's Service."""
        rec = self.record
        svc = await self._call(f"reading Service {rec.namespace}/{rec.service}",
                               self._v1().read_namespaced_service(rec.service, rec.namespace,
                                                                                  _request_timeout=REQUEST_TIMEOUT_S))
        self._version = svc.metadata.resource_version
        self.verdict = read_verdict(svc.metadata.annotations)
        # Anyone who may write Services may have written it: bounded and validated (ValueError), never trusted.
        raw = (svc.metadata.annotations or {}).get(ATTEMPTS_ANNOTATION)
        self.attempts, self.overrides = read_attempts(raw, rec)
        self.recreated = read_recreated(raw, rec)

    def recorded(self) -> dict[str, tuple[str, int]] | None:
        """The job's own pods, ``{uid: (replica key, attempt)}``: setup's and recovery's (None: a record
        from before setup recorded UIDs)."""
        setup = self.record.recorded_pods()
        if setup is None:
            return None
        return {**setup, **{uid: (key, attempt) for uid, (_, key, attempt) in self.recreated.items()}}

    @property
    def attempt(self) -> int:
        return self.attempts[-1].number if self.attempts else 1

    async def templates(self) -> dict[str, dict[str, Any]]:
        if self._templates is None:
            rec = self.record
            name = rec.templates or ""
            cm = await self._call(f"reading ConfigMap {rec.namespace}/{name}",
                                  self._v1().read_namespaced_config_map(
                                      name, rec.namespace, _request_timeout=REQUEST_TIMEOUT_S))
            pods = read_templates(cm.binary_data, f"ConfigMap {rec.namespace}/{name}", digest=rec.templates_digest)
            by_pod = {(p.get("metadata") or {}).get("name"): p for p in pods}
            self._templates = {r.key: by_pod[r.pod] for r in rec.replicas if r.pod in by_pod}
        return self._templates

    async def memory(self) -> dict[str, float]:
        """Each replica's current memory limit (its template's, or an earlier OOM relaunch's)."""
        out = {k: m for k, t in (await self.templates()).items() if (m := memory_of(t))}
        out.update({k: float(m) for k, v in self.overrides.items()
                    if (m := relaunch_memory(out.get(k), v.get("memory"))) is not None})
        return out

    async def _lease(self, attempt: Attempt, overrides: dict[str, dict[str, Any]]) -> bool:
        """Record the attempt on the Service; False when another watch recorded one first."""
        from kubernetes_asyncio import client as async_client

        rec = self.record
        body = self._body([*self.attempts, attempt], overrides, self.recreated)
        try:
            svc = await self._v1().patch_namespaced_service(rec.service, rec.namespace, body,
                                                            _request_timeout=REQUEST_TIMEOUT_S)
        except async_client.ApiException as exc:
            if exc.status == 409:  # another watch acted on this failure: take its record
                await self.load()
                return False
            raise wrap_api_error(f"recording attempt {attempt.number} on Service {rec.service}", exc) from exc
        self._version = svc.metadata.resource_version
        self.attempts.append(attempt)
        self.overrides = overrides
        return True

    async def record_verdict(self, state: str, reason: str, failure_class: str | None = None,
                             failed_replica: str | None = None) -> None:
        """Write the job's verdict on its Service (a merge patch of one annotation; an existing one is kept)."""
        if self.verdict is not None:
            return
        rec = self.record
        await self._call(f"recording the verdict on Service {rec.namespace}/{rec.service}",
                         self._v1().patch_namespaced_service(
                             rec.service, rec.namespace,
                             verdict_body(state, reason, "watch", failure_class, failed_replica),
                             _request_timeout=REQUEST_TIMEOUT_S))
        self.verdict = {"state": state, "reason": reason, "by": "watch", "failure_class": failure_class,
                        "failed_replica": failed_replica}

    async def execute(self, decision: Decision, backoff: float, log: Any) -> Attempt | None:
        """Restart the group or replace replicas; the Attempt made, or None if another watch made it."""
        rec = self.record
        # Under a queue every recovery is a group restart: Kueue admits (and evicts) pod groups whole.
        whole = decision.action == RESTART_GROUP or bool(rec.queue)
        keys = [r.key for r in rec.replicas] if whole else list(decision.replicas)
        overrides = {k: dict(v) for k, v in self.overrides.items()}
        for key, mem in decision.memory.items():
            overrides.setdefault(key, {})["memory"] = mem
        for key in keys:
            if decision.avoid_nodes:
                avoid = set(overrides.setdefault(key, {}).get("avoid_nodes") or []) | set(decision.avoid_nodes)
                overrides[key]["avoid_nodes"] = sorted(avoid)
        attempt = Attempt(number=self.attempt + 1, failure_class=decision.failure_class or "", reason=decision.reason,
                          at=time.time(), action=RESTART_GROUP if whole else decision.action, replicas=tuple(keys))
        # The templates first: when they cannot be used (rewritten, unreadable), no attempt is recorded
        # that could never be made, and every watch of the job fails naming them, not a spent budget.
        templates = await self.templates()
        group = (kueue.group_name(rec.job, attempt.number), len(keys)) if rec.queue else None
        # Admitted by the Workload API (setup's pods name a PodGroup: the job's, or their role's): the attempt's
        # pods of each first-attempt group form a new PodGroup.
        firsts = {k: g for k in keys if (g := podgroup.pod_group_of(templates[k]))}
        gang = {k: podgroup.template_of(rec.job, _labels(templates[k]).get(LABEL_ROLE, ""), g)
                for k, g in firsts.items()}
        new_groups = {k: podgroup.group_name(rec.job, attempt.number, t) for k, t in gang.items()}
        pods = self._admitted([rebuilt(templates[k], attempt.number, overrides.get(k, {}), group, new_groups.get(k))
                               for k in keys])
        pod_group = ", ".join(sorted(set(new_groups.values()))) or None
        if self.verdict is not None or not await self._lease(attempt, overrides):
            return None  # another watch acted first, or the job has its verdict (teardown may be deleting it)
        what = "restarting the group" if whole else f"replacing {', '.join(keys)}"
        if rec.queue:
            what += f" as Kueue pod group {kueue.group_name(rec.job, attempt.number)} in queue {rec.queue}"
        if pod_group is not None:
            what += f" as PodGroup{'s' if ',' in pod_group else ''} {pod_group}"
        log.warning("TF job %s: attempt %d: %s (%s: %s)", rec.job, attempt.number, what, attempt.failure_class,
                    attempt.reason)
        current = await self._current_pods(keys)
        if rec.queue:  # the old group's Workload first: Kueue then lets its pods go and frees the quota
            await self._delete_workloads()
        await self._delete(current)
        await asyncio.sleep(backoff)
        for template in sorted(set(gang.values())):
            members = [k for k in keys if gang.get(k) == template]
            await self._create_pod_group(firsts[members[0]], template, templates[members[0]], len(members),
                                         attempt.number)
        uids = await self._create(pods)
        await self._record_pods([(uids[p["metadata"]["name"]], p["metadata"]["name"], k, attempt.number)
                                 for k, p in zip(keys, pods, strict=True) if p["metadata"]["name"] in uids])
        return attempt

    def _body(self, attempts: Sequence[Attempt], overrides: Mapping[str, Any],
              recreated: Mapping[str, tuple[str, str, int]]) -> dict[str, Any]:
        doc: dict[str, Any] = {"attempts": [dataclass_dict(a) for a in attempts], "overrides": overrides}
        if recreated:
            doc["pods"] = [{"uid": uid, "name": name, "key": key, "attempt": number}
                           for uid, (name, key, number) in recreated.items()]
        return {"metadata": {"resourceVersion": self._version,
                             "annotations": {ATTEMPTS_ANNOTATION: json.dumps(doc, separators=(",", ":"))}}}

    async def _record_pods(self, created: Sequence[tuple[str, str, str, int]], tries: int = 5) -> None:
        """Record the pods just created (UID, name, replica, attempt) beside the attempts on the Service: the
        judge counts only recorded pods. A conflict (a verdict or another watch wrote meanwhile) reads the
        record again and adds them to it."""
        from kubernetes_asyncio import client as async_client

        rec = self.record
        for _ in range(tries):
            recreated = {**self.recreated, **{uid: (name, key, n) for uid, name, key, n in created}}
            try:
                svc = await self._v1().patch_namespaced_service(
                    rec.service, rec.namespace, self._body(self.attempts, self.overrides, recreated),
                    _request_timeout=REQUEST_TIMEOUT_S)
            except async_client.ApiException as exc:
                if exc.status == 409:
                    await self.load()
                    continue
                raise wrap_api_error(f"recording the recreated pods on Service {rec.service}", exc) from exc
            self._version = svc.metadata.resource_version
            self.recreated = recreated
            return
        raise KubernetesApiError(f"recording the recreated pods on Service {rec.service}", 409,
                                 f"the Service changed {tries} times while it was written")

    async def _current_pods(self, keys: Sequence[str]) -> list[tuple[str, str | None]]:
        """The pods of these replicas now, as (name, UID): every pod setup or recovery recorded for them
        (a pod merely labelled as one of them is not the job's and is left alone). A record from before
        UIDs were recorded: the record's names, and under a queue the names found by the job's labels."""
        rec = self.record
        recorded = self.recorded()
        if recorded is not None:
            wanted = set(keys)
            out: list[tuple[str, str | None]] = [(r.pod, r.uid) for r in rec.replicas if r.key in wanted]
            out += [(name, uid) for uid, (name, key, _) in self.recreated.items() if key in wanted]
            return out
        names = [r.pod for r in rec.replicas if r.key in keys]
        if not rec.queue:
            return [(n, None) for n in names]
        listed = await self._call("listing pods", self._v1().list_namespaced_pod(
            rec.namespace, label_selector=rec.selector, _request_timeout=REQUEST_TIMEOUT_S))
        wanted = set(keys)
        for p in listed.items:
            labels = p.metadata.labels or {}
            if f"{labels.get(LABEL_ROLE)}-{labels.get(LABEL_INDEX)}" in wanted and p.metadata.name not in names:
                names.append(p.metadata.name)
        return [(n, None) for n in names]

    async def _delete_workloads(self) -> None:
        """Delete the job's Kueue Workloads of every earlier attempt (404: already gone): each only when a pod
        setup or recovery recorded owns it, by its UID (a Workload of that name that is not the job's, or
        that changed since it was read, stays)."""
        from kubernetes_asyncio import client as async_client

        rec = self.record
        api = async_client.CustomObjectsApi(self.api)
        recorded = self.recorded()
        for number in range(1, self.attempt + 1):
            name = kueue.group_name(rec.job, number)
            body = async_client.V1DeleteOptions()
            try:
                if recorded is not None:
                    wl = await api.get_namespaced_custom_object(kueue.GROUP, kueue.VERSION, rec.namespace,
                                                                kueue.PLURAL, name, _request_timeout=REQUEST_TIMEOUT_S)
                    meta = wl.get("metadata") or {}
                    if not {r.get("uid") for r in meta.get("ownerReferences") or []} & set(recorded):
                        _log.warning("Workload %s/%s is owned by no pod of job %s: left alone", rec.namespace, name,
                                     rec.job)
                        continue
                    body = async_client.V1DeleteOptions(preconditions=async_client.V1Preconditions(uid=meta.get("uid")))
                await api.delete_namespaced_custom_object(kueue.GROUP, kueue.VERSION, rec.namespace, kueue.PLURAL,
                                                          name, body=body, _request_timeout=REQUEST_TIMEOUT_S)
            except async_client.ApiException as exc:
                if exc.status not in (404, 409):  # gone, or another object of that name now
                    raise wrap_api_error(f"deleting Workload {rec.namespace}/{name}", exc) from exc

    def policy(self) -> DeploymentPolicy:
        """The deployment's policy, read as the ``tfk8s`` command reads it (Airflow's variables and
        file, then ``TFK8S_*``): the watch runs in the triggerer, under the deployment's configuration."""
        if self._policy is None:
            self._policy = DeploymentPolicy.from_settings(lookup(os.environ))
        return self._policy

    def _admitted(self, pods: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The pods to recreate as the deployment admits them now (host paths resolved again: a link
        planted through a writable mount since setup is refused here); nothing is deleted when refused."""
        try:
            return admit_pods(pods, self.policy(), what="recreated pod")
        except SpecError as exc:
            raise PermanentKubernetesApiError(
                f"recreating the pods of job {self.record.job}", None,
                f"the deployment's policy refuses them now: {exc}; the job cannot be recovered") from None

    async def _delete(self, pods: Sequence[tuple[str, str | None]]) -> None:
        """Delete these pods, each with its recorded UID as the precondition (409: the name is another
        pod's now, which is not ours to delete), and wait until they are gone."""
        from kubernetes_asyncio import client as async_client

        rec, v1 = self.record, self._v1()

        async def one(name: str, uid: str | None) -> None:
            body = async_client.V1DeleteOptions(
                grace_period_seconds=0, preconditions=async_client.V1Preconditions(uid=uid) if uid else None)
            try:
                await v1.delete_namespaced_pod(name, rec.namespace, body=body, grace_period_seconds=0,
                                               _request_timeout=REQUEST_TIMEOUT_S)
            except async_client.ApiException as exc:
                if exc.status not in (404, 409) or (exc.status == 409 and not uid):
                    raise wrap_api_error(f"deleting pod {rec.namespace}/{name}", exc) from exc

        await asyncio.gather(*(one(n, u) for n, u in pods))
        deadline = time.monotonic() + GONE_TIMEOUT_S
        wanted = {u or n for n, u in pods}
        while time.monotonic() < deadline:
            listed = await self._call("listing pods",
                                      v1.list_namespaced_pod(rec.namespace, label_selector=rec.selector,
                                                                             _request_timeout=REQUEST_TIMEOUT_S))
            left = wanted & ({p.metadata.name for p in listed.items} | {p.metadata.uid for p in listed.items})
            if not left:
                return
            await asyncio.sleep(0.5)
        raise KubernetesApiError("waiting for replaced pods to go", None, f"still there after {GONE_TIMEOUT_S:.0f}s")

    async def _create_pod_group(self, first: str, gang: str, template: Mapping[str, Any], size: int,
                                attempt: int) -> None:
        """The attempt's PodGroup for the ``size`` pods recreated from setup's PodGroup ``first`` (of the
        Workload's template ``gang``): its gang minimum ``size``, or the first group's when lower (a role's
        ``gang_min``; ``size`` when that group is gone), owned by the job's Service as setup's is; one of that
        name that exists already (another try of this attempt) is taken only when the Service owns it."""
        from kubernetes_asyncio import client as async_client

        rec = self.record
        custom = async_client.CustomObjectsApi(self.api)
        try:
            setup_group = await custom.get_namespaced_custom_object(
                podgroup.GROUP, podgroup.VERSION, rec.namespace, podgroup.POD_GROUPS, first,
                _request_timeout=REQUEST_TIMEOUT_S)
        except async_client.ApiException as exc:
            if exc.status != 404:
                raise wrap_api_error(f"reading PodGroup {rec.namespace}/{first} (setup's)", exc) from exc
            setup_group = {}
        low = podgroup.gang_of(setup_group)[1]
        labels = {k: v for k, v in _labels(template).items()
                  if k.startswith("tfk8s.io/") and k not in (LABEL_ROLE, LABEL_INDEX, LABEL_ATTEMPT)}
        body = podgroup.pod_group_manifest(rec.job, rec.namespace, labels, min(size, low or size), attempt, gang)
        name = body["metadata"]["name"]
        if rec.service_uid:
            body["metadata"]["ownerReferences"] = [owner_reference(rec.service, rec.service_uid)]
        try:
            await custom.create_namespaced_custom_object(podgroup.GROUP, podgroup.VERSION, rec.namespace,
                                                         podgroup.POD_GROUPS, body, _request_timeout=REQUEST_TIMEOUT_S)
        except async_client.ApiException as exc:
            if exc.status != 409:
                raise wrap_api_error(f"creating PodGroup {rec.namespace}/{name}", exc) from exc
            got = await custom.get_namespaced_custom_object(podgroup.GROUP, podgroup.VERSION, rec.namespace,
                                                            podgroup.POD_GROUPS, name,
                                                            _request_timeout=REQUEST_TIMEOUT_S)
            owners = [r.get("uid") for r in (got.get("metadata") or {}).get("ownerReferences") or ()]
            if not rec.service_uid or owners != [rec.service_uid]:
                raise PermanentKubernetesApiError(f"creating PodGroup {rec.namespace}/{name}", 409,
                                                  "a PodGroup of that name exists that the job's Service does not "
                                                  "own: recovery never adopts it") from exc

    async def _create(self, pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """Create the pods and release their gates; each pod's UID from its creation response, by name."""
        rec, v1 = self.record, self._v1()
        sem = asyncio.Semaphore(16)
        uids: dict[str, str] = {}

        # Each body is read so that its connection goes back to the pool for the next; its UID is kept.
        async def create(pod: Mapping[str, Any]) -> None:
            async with sem:
                resp = await self._call(f"recreating pod {pod['metadata']['name']}",
                                        v1.create_namespaced_pod(rec.namespace, pod, _preload_content=False,
                                                                 _request_timeout=REQUEST_TIMEOUT_S))
                created = json.loads(await resp.read())
                uid = (created.get("metadata") or {}).get("uid") if isinstance(created, dict) else None
                if isinstance(uid, str):
                    uids[pod["metadata"]["name"]] = uid

        async def release(pod: Mapping[str, Any]) -> None:
            async with sem:
                resp = await self._call(f"releasing the gates of {pod['metadata']['name']}", v1.patch_namespaced_pod(
                    pod["metadata"]["name"], rec.namespace, GATE_PATCH,
                    _preload_content=False, _content_type=GATE_PATCH_TYPE,
                    _request_timeout=REQUEST_TIMEOUT_S))
                await resp.read()

        await asyncio.gather(*(create(p) for p in pods))
        await asyncio.gather(*(release(p) for p in pods))
        return uids


def dataclass_dict(attempt: Attempt) -> dict[str, Any]:
    from dataclasses import asdict

    out = asdict(attempt)
    out["replicas"] = list(attempt.replicas)
    return out


def _labels(manifest: Mapping[str, Any]) -> Mapping[str, str]:
    return (manifest.get("metadata") or {}).get("labels") or {}


__all__ = ["ATTEMPTS_ANNOTATION", "Recoverer", "read_templates", "rebuilt", "memory_of", "REPLACE"]
