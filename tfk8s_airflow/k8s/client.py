"""Kubernetes operations of a job, on the cncf.kubernetes provider's hooks.

Why a backend module: operators stay thin and every API call is wrapped the same
way: a 404 on delete is success (teardown is idempotent), a 409 on create means
"already there" (setup is idempotent), other 4xx are permanent and name what was
being done, 5xx and connection errors are left to Airflow's retries.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes.client import ApiClient, CoreV1Api, V1DeleteOptions, V1Preconditions
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.contract import CONTAINER_NAME, GANG_GATE, LABEL_JOB, LABEL_RUN, LABEL_SECRET
from tfk8s_airflow.exceptions import KubernetesApiError, KubernetesConfigError, PermanentKubernetesApiError
from tfk8s_airflow.job.run.recoverystate import ATTEMPTS_ANNOTATION, read_recreated
from tfk8s_airflow.job.run.verdict import read_verdict, verdict_body
from tfk8s_airflow.threads import run_all

T = TypeVar("T")
PERMANENT_STATUSES = {400, 401, 403, 404, 405, 409, 410, 422}


def wrap_api_error(action: str, exc: ApiException) -> KubernetesApiError:
    """An ApiException as our error: permanent for 4xx, retryable otherwise."""
    reason = exc.reason or ""
    body = getattr(exc, "body", None)
    if body:
        try:
            reason = json.loads(body).get("message", reason)
        except (ValueError, AttributeError):
            reason = str(body)[:500]
    cls = PermanentKubernetesApiError if exc.status in PERMANENT_STATUSES else KubernetesApiError
    return cls(action, exc.status, reason)


def api_client(conn_id: str | None) -> ApiClient:
    """The provider's API client of the Kubernetes connection ``conn_id``.

    A connection that does not exist, or whose kubeconfig (or in-cluster account) is missing
    or unreadable, is a :class:`~tfk8s_airflow.exceptions.KubernetesConfigError` naming it and
    the fix: no retry reads a file that is not there. Loading the configuration makes no request.
    """
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
    from airflow.sdk.exceptions import AirflowNotFoundException
    from kubernetes.config.config_exception import ConfigException
    from yaml import YAMLError

    name = conn_id or "kubernetes_default"
    try:
        return KubernetesHook(conn_id=conn_id).api_client
    except AirflowNotFoundException as exc:
        raise KubernetesConfigError(
            f"the Kubernetes connection {name!r} does not exist (fix: create it, e.g. "
            f"AIRFLOW_CONN_{name.upper()}='{{\"conn_type\": \"kubernetes\", \"extra\": {{\"in_cluster\": true}}}}', "
            "or pass kubernetes_conn_id= of one that does)") from exc
    except (ConfigException, OSError, ValueError, YAMLError) as exc:
        raise KubernetesConfigError(
            f"the Kubernetes connection {name!r} cannot load its configuration: {type(exc).__name__}: "
            f"{str(exc)[:300]} (fix: give the connection a readable kubeconfig (extra kube_config_path, or "
            "kube_config with its content) or in_cluster: true where Airflow runs in the cluster; without "
            "either, the default kubeconfig ~/.kube/config or $KUBECONFIG is read)") from exc


def call(action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        raise wrap_api_error(action, exc) from exc


#: Parallel API requests of a batch (like a client's QPS/burst; client-go defaults to 5 QPS,
#: TFJob users raise it to 100-200). The API server's own priority and fairness still applies.
DEFAULT_CONCURRENCY = 16
#: Seconds any single request made from the triggerer may take (a LIST of 512 pods is ~20 MB: a few
#: seconds): no request of a job's watch, its recovery or a replica's trigger waits without bound.
REQUEST_TIMEOUT_S = 30.0
#: Releases the job's own scheduling gate and no other: a strategic-merge patch deleting the
#: ``tfk8s.io/gang`` entry by name (idempotent). Another controller's gate on the pod (Kueue's
#: admission gate, a policy's hold) stays, as the shared cluster requires: removing
#: ``/spec/schedulingGates`` as a whole would strip them too.
GATE_PATCH = {"spec": {"schedulingGates": [{"$patch": "delete", "name": GANG_GATE}]}}
GATE_PATCH_TYPE = "application/strategic-merge-patch+json"
#: The phases of a pod that has ended: the only pods a ``clean_pod_policy`` of Running or None keeps.
FINISHED_PHASES = ("Succeeded", "Failed")


def discard(resp: Any) -> None:
    """Read and drop the body of a ``_preload_content=False`` response, and give its connection back.

    Without it the kept-alive connection is never returned to the pool: each such request opens
    a new TLS connection, which in a 512-pod batch doubled setup's creation time and cost ~1.5
    CPU-seconds on each side (measured: docs/benchmarks.md).
    """
    resp.drain_conn()
    resp.release_conn()


@dataclass
class BatchResult:
    """What a batch creation did: pods it created, pods of the same run it found and adopted, and
    each one's UID (from the creation response, or the adopted pod as read) by name."""

    created: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    seconds: float = 0.0
    uids: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Owned:
    """Which of the objects that carry a job's label are the job's: the pods setup and recovery recorded
    by UID, and every object whose owner reference names the job's Service by the UID setup created it
    with. A label or a name alone proves nothing: anyone who may patch pods can write them."""

    owner_uid: str | None
    pod_uids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, record: Any) -> Owned | None:
        """A job record's (None for one written before setup recorded UIDs: labels, as then)."""
        if not record.service_uid:
            return None
        return cls(record.service_uid, frozenset(r.uid for r in record.replicas if r.uid))

    def _owner(self, obj: Any) -> bool:
        return bool(self.owner_uid) and any(
            getattr(ref, "uid", None) == self.owner_uid for ref in (obj.metadata.owner_references or []))

    def pod(self, pod: Any) -> bool:
        return pod.metadata.uid in self.pod_uids or self._owner(pod)

    def service(self, svc: Any) -> bool:
        return bool(self.owner_uid) and svc.metadata.uid == self.owner_uid

    def configmap(self, cm: Any) -> bool:
        return self._owner(cm)


class JobClient:
    """Synchronous operations on one namespace's job objects (setup, teardown, poke)."""

    def __init__(self, core: CoreV1Api):
        self.core = core
        self._api_client: ApiClient = core.api_client

    @classmethod
    def from_conn(cls, conn_id: str | None, pool_size: int = DEFAULT_CONCURRENCY) -> JobClient:
        """A client on the provider's KubernetesHook, with room for ``pool_size`` parallel requests."""
        api = api_client(conn_id)
        api.configuration.connection_pool_maxsize = max(pool_size, 4)
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = max(pool_size, 4)
        return cls(CoreV1Api(api))

    # ---------------------------------------------------------------- batches
    def create_pods(self, pods: Sequence[Mapping[str, Any]], concurrency: int = DEFAULT_CONCURRENCY,
                    inspect: Callable[[Mapping[str, Any]], None] | None = None) -> BatchResult:
        """Create every pod of a job in parallel, idempotently.

        A pod that already exists is adopted when it is this run's (same job and run labels:
        a retried setup), never duplicated; one of another run is an error. On the first
        failure no further pod is created, the ones in flight finish, and the error is raised;
        the caller removes what exists (``delete_job_objects``). ``inspect``: called with each
        created pod as the API server returned it (after admission webhooks); what it raises is
        such a failure.
        """
        result = BatchResult()
        lock = threading.Lock()
        t0 = time.monotonic()
        stop = threading.Event()

        def one(pod: Mapping[str, Any]) -> None:
            if stop.is_set():
                return
            meta = pod["metadata"]
            try:
                resp = self.core.create_namespaced_pod(namespace=meta["namespace"], body=pod, _preload_content=False)
                created = json.loads(resp.data)
                resp.release_conn()
                if inspect is not None:
                    inspect(created)
                with lock:
                    result.created.append(meta["name"])
                    result.uids[meta["name"]] = str((created.get("metadata") or {}).get("uid") or "")
            except ApiException as exc:
                if exc.status != 409:
                    stop.set()
                    raise wrap_api_error(f"creating pod {meta['namespace']}/{meta['name']}", exc) from exc
                uid = self._adopt(pod)
                with lock:
                    result.adopted.append(meta["name"])
                    result.uids[meta["name"]] = uid
            except BaseException:
                stop.set()
                raise

        self._parallel(one, pods, concurrency)
        result.seconds = time.monotonic() - t0
        return result

    def _adopt(self, pod: Mapping[str, Any]) -> str:
        """The UID of the existing pod of ``pod``'s name, when it is an earlier try's of this setup: this run's
        labels and, where the pod names an owner, the same owner (the job's Service by its UID)."""
        meta = pod["metadata"]
        existing = call(f"reading pod {meta['namespace']}/{meta['name']}", self.core.read_namespaced_pod,
                        name=meta["name"], namespace=meta["namespace"])
        labels = existing.metadata.labels or {}
        want = meta.get("labels") or {}
        for key in (LABEL_JOB, LABEL_RUN):
            if labels.get(key) != want.get(key):
                raise PermanentKubernetesApiError(
                    f"creating pod {meta['namespace']}/{meta['name']}", 409,
                    f"a pod of that name exists with {key}={labels.get(key)!r}, not {want.get(key)!r}: it is "
                    "not this run's (fix: delete it, or give the job another name)")
        owners = {r.get("uid") for r in meta.get("ownerReferences") or []}
        if owners and not owners & {r.uid for r in existing.metadata.owner_references or []}:
            raise PermanentKubernetesApiError(
                f"creating pod {meta['namespace']}/{meta['name']}", 409,
                "a pod of that name exists with this run's labels but is not owned by the job's Service: setup did "
                "not make it (fix: delete it, or give the job another name)")
        return str(existing.metadata.uid or "")

    def release_gates(self, namespace: str, names: Sequence[str], concurrency: int = DEFAULT_CONCURRENCY) -> float:
        """Remove the job's scheduling gate (``tfk8s.io/gang``, only it) from every named pod, in parallel;
        seconds taken.

        A pod whose gate is already gone (a retried setup) is fine; any other gate stays.
        """
        t0 = time.monotonic()

        def one(name: str) -> None:
            try:
                discard(self.core.patch_namespaced_pod(name=name, namespace=namespace, body=GATE_PATCH,
                                                       _content_type=GATE_PATCH_TYPE, _preload_content=False))
            except ApiException as exc:
                # 422: nothing to release (a pod already past its gates).
                if exc.status != 422:
                    raise wrap_api_error(f"releasing the scheduling gates of pod {namespace}/{name}", exc) from exc

        self._parallel(one, names, concurrency)
        return time.monotonic() - t0

    @staticmethod
    def _parallel(fn: Callable[[Any], None], items: Sequence[Any], concurrency: int) -> None:
        run_all(fn, items, concurrency, "tfk8s-batch")

    # ----------------------------------------------------------------- create
    def dry_run_pod(self, pod: Mapping[str, Any]) -> str | None:
        """Create a pod with a server-side dry run (validation and admission, nothing stored).

        Strict field validation: a field the pod schema does not have (a template's typo) is refused, not
        dropped with a warning nobody reads.

        Returns the API server's refusal (4xx), None when it accepts the pod or the pod exists
        already (a retried setup); other errors raise, to be retried.
        """
        meta = pod["metadata"]
        try:
            discard(self.core.create_namespaced_pod(namespace=meta["namespace"], body=pod, dry_run="All",
                                                    field_validation="Strict", _preload_content=False))
            return None
        except ApiException as exc:
            if exc.status == 409:
                return None
            err = wrap_api_error(f"dry-run of pod {meta['namespace']}/{meta['name']}", exc)
            if isinstance(err, PermanentKubernetesApiError):
                return err.reason
            raise err from exc

    def create_if_absent(self, obj: Mapping[str, Any]) -> bool:
        """Create a Service/ConfigMap/Pod; False when it already exists (idempotent setup)."""
        kind, ns, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
        fn = {"Service": self.core.create_namespaced_service,
              "ConfigMap": self.core.create_namespaced_config_map,
              "Pod": self.core.create_namespaced_pod}[kind]
        try:
            fn(namespace=ns, body=obj)
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise wrap_api_error(f"creating {kind} {ns}/{name}", exc) from exc

    def create_or_replace_configmap(self, obj: Mapping[str, Any]) -> bool:
        """Create a ConfigMap, or replace the one of that name with it; True when created."""
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        try:
            discard(self.core.create_namespaced_config_map(namespace=ns, body=obj, _preload_content=False))
            return True
        except ApiException as exc:
            if exc.status != 409:
                raise wrap_api_error(f"creating ConfigMap {ns}/{name}", exc) from exc
        discard(call(f"replacing ConfigMap {ns}/{name}", self.core.replace_namespaced_config_map,
                     name=name, namespace=ns, body=obj, _preload_content=False))
        return False

    def ensure_service(self, obj: Mapping[str, Any]) -> tuple[bool, str]:
        """Create the job's Service, or find the one an earlier try made: ``(created, uid)``.

        The uid is what the job's other objects name as their owner. A Service of that name
        being deleted is a transient error (its dependents would be collected at once).
        """
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        try:
            created = self.core.create_namespaced_service(namespace=ns, body=obj)
            return True, created.metadata.uid
        except ApiException as exc:
            if exc.status != 409:
                raise wrap_api_error(f"creating Service {ns}/{name}", exc) from exc
        existing = call(f"reading Service {ns}/{name}", self.core.read_namespaced_service, name=name, namespace=ns)
        if existing.metadata.deletion_timestamp is not None:
            raise KubernetesApiError(f"creating Service {ns}/{name}", 409,
                                     "a Service of that name is being deleted (an earlier run's teardown); retry")
        return False, existing.metadata.uid

    # ------------------------------------------------------------------- read
    def list_pods(self, namespace: str, selector: str) -> list[Any]:
        """One LIST call for every pod of the job, whatever the replica count."""
        return call(f"listing pods {selector} in {namespace}", self.core.list_namespaced_pod,
                    namespace=namespace, label_selector=selector).items

    def log_tail(self, namespace: str, pod: str, lines: int = 50, previous: bool = False) -> str:
        """The last lines of a replica's log; a ``<log unavailable: ...>`` line when it cannot be read."""
        text, error = self.try_log_tail(namespace, pod, lines, previous)
        return text if error is None else f"<log unavailable: {error}>"

    def try_log_tail(self, namespace: str, pod: str, lines: int = 50, previous: bool = False
                     ) -> tuple[str, str | None]:
        """``(text, None)``, or ``("", why)`` when the log cannot be read (a log tail never fails teardown)."""
        try:
            text = self.core.read_namespaced_pod_log(
                name=pod, namespace=namespace, container=CONTAINER_NAME, tail_lines=lines,
                previous=previous, _request_timeout=30, _preload_content=False).data
            return (text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text or "")), None
        except ApiException as exc:
            return "", f"HTTP {exc.status} {exc.reason}"
        except Exception as exc:  # noqa: BLE001 - a log tail must never fail teardown
            return "", str(exc)

    def read_pod(self, namespace: str, name: str) -> Any | None:
        """The pod, or ``None`` when there is none of that name."""
        try:
            return self.core.read_namespaced_pod(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise wrap_api_error(f"reading pod {namespace}/{name}", exc) from exc

    def delete_pod(self, namespace: str, name: str, grace_period_seconds: int = 0) -> bool:
        """Delete one pod; ``False`` when it was already gone."""
        return bool(self._delete(self.core.delete_namespaced_pod, "Pod", namespace, name, grace_period_seconds))

    def wait_pod_gone(self, namespace: str, name: str, timeout: float = 60, interval: float = 1) -> bool:
        """Poll until the pod no longer exists; ``False`` when it still does at the timeout."""
        deadline = time.monotonic() + timeout
        while self.read_pod(namespace, name) is not None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
        return True

    def service_account_exists(self, namespace: str, name: str) -> bool:
        try:
            self.core.read_namespaced_service_account(name=name, namespace=namespace)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise wrap_api_error(f"reading ServiceAccount {namespace}/{name}", exc) from exc

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the API server serves ``plural`` of ``group``/``version`` (``scheduling.k8s.io``, ``v1beta1``):
        one discovery GET; a group version it does not serve answers 404."""
        from kubernetes.client import CustomObjectsApi

        try:
            found = CustomObjectsApi(self.core.api_client).get_api_resources(group, version,
                                                                             _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise wrap_api_error(f"discovering {group}/{version}", exc) from exc
        return any(r.name == plural for r in found.resources or ())

    def package_secrets(self, namespace: str) -> frozenset[str]:
        """The names of ``namespace``'s Secrets that carry the package's own label (``tfk8s.io/secret``: a
        staging task's delegation token). Where the deployment may not list Secrets (403) there are none of
        the package's: it makes them only in ``staging_namespace``, where its Role lists them."""
        try:
            listed = self.core.list_namespaced_secret(namespace, label_selector=LABEL_SECRET,
                                                      _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 403:
                return frozenset()
            raise wrap_api_error(f"listing the Secrets of {namespace} labelled {LABEL_SECRET}", exc) from exc
        return frozenset(s.metadata.name for s in listed.items)

    def resource_quotas(self, namespace: str) -> list[Any]:
        return call(f"reading ResourceQuotas of {namespace}", self.core.list_namespaced_resource_quota,
                    namespace=namespace).items

    def recorded_pods(self, record: Any) -> dict[str, tuple[str, int]] | None:
        """The job's own pods by UID (``{uid: (replica key, attempt)}``): setup's record, and the pods its
        recovery recorded on the job's Service (read here; unreadable or gone: setup's alone)."""
        setup = record.recorded_pods()
        if setup is None or not record.templates:
            return setup
        try:
            svc = self.core.read_namespaced_service(record.service, record.namespace,
                                                    _request_timeout=REQUEST_TIMEOUT_S)
            recreated = read_recreated((svc.metadata.annotations or {}).get(ATTEMPTS_ANNOTATION), record)
        except (ApiException, ValueError, TypeError):
            return setup
        return {**setup, **{uid: (key, n) for uid, (_, key, n) in recreated.items()}}

    # ----------------------------------------------------------------- delete
    def record_verdict(self, namespace: str, service: str, state: str, reason: str, by: str) -> bool:
        """Write the job's verdict on its Service unless it has one; False when there is no Service or
        a verdict was there already."""
        try:
            svc = self.core.read_namespaced_service(service, namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise wrap_api_error(f"reading Service {namespace}/{service}", exc) from exc
        if read_verdict(svc.metadata.annotations) is not None:
            return False
        call(f"recording the verdict on Service {namespace}/{service}", self.core.patch_namespaced_service,
             service, namespace, verdict_body(state, reason, by), _request_timeout=REQUEST_TIMEOUT_S)
        return True

    def keep_finished_pods(self, namespace: str, selector: str, service: str,
                           skip: Collection[str] = (), owned: Owned | None = None) -> list[str]:
        """The job's finished pods (phase Succeeded or Failed, not being deleted), released from the Service's
        ownership so that deleting the Service does not collect them; their names.

        Only the owner reference setup put there (``v1`` Service ``service``) is removed, by a JSON patch
        that first tests it is still the one listed; a pod that changed or went meanwhile is not kept (it is
        deleted with the rest). Pods named in ``skip`` (the TensorBoard) are never kept.
        """
        kept = []
        for pod in self.list_pods(namespace, selector):
            if owned is not None and not owned.pod(pod):
                continue
            name = pod.metadata.name
            phase = pod.status.phase if pod.status else None
            if name in skip or pod.metadata.deletion_timestamp is not None or phase not in FINISHED_PHASES:
                continue
            refs = pod.metadata.owner_references or []
            patch: list[dict[str, Any]] = []
            for i in reversed(range(len(refs))):  # from the end, so each index still points at its reference
                ref = refs[i]
                if ref.api_version == "v1" and ref.kind == "Service" and ref.name == service:
                    patch += [{"op": "test", "path": f"/metadata/ownerReferences/{i}/uid", "value": ref.uid},
                              {"op": "remove", "path": f"/metadata/ownerReferences/{i}"}]
            if patch:
                try:
                    discard(self.core.patch_namespaced_pod(name=name, namespace=namespace, body=patch,
                                                           _preload_content=False))
                except ApiException as exc:
                    if exc.status in (404, 409, 422):  # gone, or changed since it was listed: not kept
                        continue
                    raise wrap_api_error(f"releasing pod {namespace}/{name} from Service {service}", exc) from exc
            kept.append(name)
        return kept

    def job_objects(self, namespace: str, selector: str, owned: Owned | None = None
                    ) -> tuple[list[Any], list[Any], list[Any], list[str]]:
        """(pods, Services, ConfigMaps) that carry the job's label and, with ``owned``, are the job's own; and
        ``kind/name`` of those with the label that are not (left alone: setup and recovery did not make them)."""
        pods = self.list_pods(namespace, selector)
        services = call("listing services", self.core.list_namespaced_service, namespace=namespace,
                        label_selector=selector).items
        cms = call("listing configmaps", self.core.list_namespaced_config_map, namespace=namespace,
                   label_selector=selector).items
        if owned is None:
            return pods, services, cms, []
        strangers = [f"pod/{p.metadata.name}" for p in pods if not owned.pod(p)]
        strangers += [f"service/{x.metadata.name}" for x in services if not owned.service(x)]
        strangers += [f"configmap/{x.metadata.name}" for x in cms if not owned.configmap(x)]
        return ([p for p in pods if owned.pod(p)], [x for x in services if owned.service(x)],
                [x for x in cms if owned.configmap(x)], strangers)

    def delete_job_objects(self, namespace: str, selector: str, grace_period_seconds: int = 0,
                           keep: Collection[str] = (), owned: Owned | None = None) -> dict[str, int]:
        """Delete every pod, Service and ConfigMap of the job but the pods named in ``keep``; counts.

        ``owned``: only the job's own objects (:class:`Owned`), each deleted with its UID as the precondition
        (an object of that name made since it was listed is not deleted); ``ignored`` counts the others that
        carry the job's label, left alone. Without it (a record from before UIDs were recorded, setup's
        clean-up before its Service exists): every object with the job's label, as before."""
        pods, services, cms, strangers = self.job_objects(namespace, selector, owned)
        counts = {"pods": 0, "services": 0, "configmaps": 0, "ignored": len(strangers)}
        uid = owned is not None
        for pod in pods:
            if pod.metadata.name in keep:
                continue
            counts["pods"] += self._delete(self.core.delete_namespaced_pod, "Pod", namespace,
                                           pod.metadata.name, grace_period_seconds, pod.metadata.uid if uid else None)
        for svc in services:
            counts["services"] += self._delete(self.core.delete_namespaced_service, "Service",
                                               namespace, svc.metadata.name, None, svc.metadata.uid if uid else None)
        for cm in cms:
            counts["configmaps"] += self._delete(self.core.delete_namespaced_config_map, "ConfigMap",
                                                 namespace, cm.metadata.name, None, cm.metadata.uid if uid else None)
        return counts

    def _delete(self, fn: Callable[..., Any], kind: str, namespace: str, name: str,
                grace: int | None, uid: str | None = None) -> int:
        """Delete one object (with ``uid``: only while it is that object); 1 when deleted, 0 when gone."""
        try:
            kwargs: dict[str, Any] = {"name": name, "namespace": namespace}
            if grace is not None:
                kwargs["grace_period_seconds"] = grace
            if uid:
                kwargs["body"] = V1DeleteOptions(grace_period_seconds=grace, preconditions=V1Preconditions(uid=uid))
            fn(**kwargs)
            return 1
        except ApiException as exc:
            if exc.status == 404 or (uid and exc.status == 409):  # gone, or another object of that name now
                return 0
            raise wrap_api_error(f"deleting {kind} {namespace}/{name}", exc) from exc

    def remaining(self, namespace: str, selector: str, keep: Collection[str] = (),
                  owned: Owned | None = None) -> list[str]:
        """What is left of the job (its own objects, with ``owned``) but the pods named in ``keep``,
        as ``kind/name``."""
        pods, services, cms, _ = self.job_objects(namespace, selector, owned)
        names = [f"pod/{p.metadata.name}" for p in pods if p.metadata.name not in keep]
        names += [f"service/{s.metadata.name}" for s in services]
        names += [f"configmap/{c.metadata.name}" for c in cms]
        return names

    def wait_gone(self, namespace: str, selector: str, timeout: float = 120, interval: float = 1,
                  keep: Collection[str] = (), owned: Owned | None = None) -> list[str]:
        """Poll until nothing of the job remains but the pods named in ``keep``; what is left at the timeout."""
        deadline = time.monotonic() + timeout
        left = self.remaining(namespace, selector, keep, owned)
        while left and time.monotonic() < deadline:
            time.sleep(interval)
            left = self.remaining(namespace, selector, keep, owned)
        return left


def pod_dicts(pods: Iterable[Any], api_client: ApiClient | None = None) -> list[dict[str, Any]]:
    """Client models as the API's own JSON (camelCase), the form the judge reads."""
    client = api_client or ApiClient()
    return [client.sanitize_for_serialization(p) if not isinstance(p, dict) else p for p in pods]
