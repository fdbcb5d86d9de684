"""Kubernetes operations of a job, on the cncf.kubernetes provider's hooks.

Why a backend module: operators stay thin and every API call is wrapped the same
way: a 404 on delete is success (teardown is idempotent), a 409 on create means
"already there" (setup is idempotent), other 4xx are permanent and name what was
being done, 5xx and connection errors are left to Airflow's retries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.contract import CONTAINER_NAME
from tfk8s_airflow.exceptions import KubernetesApiError, PermanentKubernetesApiError

T = TypeVar("T")
PERMANENT_STATUSES = {400, 401, 403, 404, 405, 409, 410, 422}


def wrap_api_error(action: str, exc: ApiException) -> KubernetesApiError:
    """An ApiException as our error: permanent for 4xx, retryable otherwise."""
    reason = exc.reason or ""
    body = getattr(exc, "body", None)
    if body:
        try:
            import json
            reason = json.loads(body).get("message", reason)
        except (ValueError, AttributeError):
            reason = str(body)[:500]
    cls = PermanentKubernetesApiError if exc.status in PERMANENT_STATUSES else KubernetesApiError
    return cls(action, exc.status, reason)


def call(action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        raise wrap_api_error(action, exc) from exc


class JobClient:
    """Synchronous operations on one namespace's job objects (setup, teardown, poke)."""

    def __init__(self, core: CoreV1Api):
        self.core = core
        self._api_client: ApiClient = core.api_client

    @classmethod
    def from_conn(cls, conn_id: str | None) -> JobClient:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
        return cls(KubernetesHook(conn_id=conn_id).core_v1_client)

    # ----------------------------------------------------------------- create
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

    # ------------------------------------------------------------------- read
    def list_pods(self, namespace: str, selector: str) -> list[Any]:
        """One LIST call for every pod of the job, whatever the replica count."""
        return call(f"listing pods {selector} in {namespace}", self.core.list_namespaced_pod,
                    namespace=namespace, label_selector=selector).items

    def log_tail(self, namespace: str, pod: str, lines: int = 50, previous: bool = False) -> str:
        """The last lines of a replica's log; '' when the node serves no logs."""
        try:
            text = self.core.read_namespaced_pod_log(
                name=pod, namespace=namespace, container=CONTAINER_NAME, tail_lines=lines,
                previous=previous, _request_timeout=30, _preload_content=False).data
            return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text or "")
        except ApiException as exc:
            return f"<log unavailable: HTTP {exc.status} {exc.reason}>"
        except Exception as exc:  # noqa: BLE001 - a log tail must never fail teardown
            return f"<log unavailable: {exc}>"

    def service_account_exists(self, namespace: str, name: str) -> bool:
        try:
            self.core.read_namespaced_service_account(name=name, namespace=namespace)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise wrap_api_error(f"reading ServiceAccount {namespace}/{name}", exc) from exc

    def resource_quotas(self, namespace: str) -> list[Any]:
        return call(f"reading ResourceQuotas of {namespace}", self.core.list_namespaced_resource_quota,
                    namespace=namespace).items

    # ----------------------------------------------------------------- delete
    def delete_job_objects(self, namespace: str, selector: str, grace_period_seconds: int = 0) -> dict[str, int]:
        """Delete every pod, Service and ConfigMap with the job label; returns counts."""
        counts = {"pods": 0, "services": 0, "configmaps": 0}
        pods = self.list_pods(namespace, selector)
        for pod in pods:
            counts["pods"] += self._delete(self.core.delete_namespaced_pod, "Pod", namespace,
                                           pod.metadata.name, grace_period_seconds)
        services = call("listing services", self.core.list_namespaced_service, namespace=namespace,
                        label_selector=selector).items
        for svc in services:
            counts["services"] += self._delete(self.core.delete_namespaced_service, "Service",
                                               namespace, svc.metadata.name, None)
        cms = call("listing configmaps", self.core.list_namespaced_config_map, namespace=namespace,
                   label_selector=selector).items
        for cm in cms:
            counts["configmaps"] += self._delete(self.core.delete_namespaced_config_map, "ConfigMap",
                                                 namespace, cm.metadata.name, None)
        return counts

    def _delete(self, fn: Callable[..., Any], kind: str, namespace: str, name: str,
                grace: int | None) -> int:
        try:
            kwargs: dict[str, Any] = {"name": name, "namespace": namespace}
            if grace is not None:
                kwargs["grace_period_seconds"] = grace
            fn(**kwargs)
            return 1
        except ApiException as exc:
            if exc.status == 404:
                return 0
            raise wrap_api_error(f"deleting {kind} {namespace}/{name}", exc) from exc

    def remaining(self, namespace: str, selector: str) -> list[str]:
        names = [f"pod/{p.metadata.name}" for p in self.list_pods(namespace, selector)]
        names += [f"service/{s.metadata.name}" for s in call(
            "listing services", self.core.list_namespaced_service, namespace=namespace,
            label_selector=selector).items]
        names += [f"configmap/{c.metadata.name}" for c in call(
            "listing configmaps", self.core.list_namespaced_config_map, namespace=namespace,
            label_selector=selector).items]
        return names

    def wait_gone(self, namespace: str, selector: str, timeout: float = 120, interval: float = 1) -> list[str]:
        """Poll until nothing of the job remains; returns what is left at the timeout."""
        deadline = time.monotonic() + timeout
        left = self.remaining(namespace, selector)
        while left and time.monotonic() < deadline:
            time.sleep(interval)
            left = self.remaining(namespace, selector)
        return left


async def list_pods_async(hook: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    """One LIST through the provider's AsyncKubernetesHook, as plain dicts for the judge."""
    from kubernetes_asyncio import client as async_client
    async with hook.get_conn() as api:
        v1 = async_client.CoreV1Api(api)
        try:
            result = await v1.list_namespaced_pod(namespace=namespace, label_selector=selector,
                                                  _preload_content=False)
        except async_client.ApiException as exc:
            raise wrap_api_error(f"listing pods {selector} in {namespace}", exc) from exc
        import json
        body = json.loads(await cast(Any, result).read())  # the raw response (_preload_content=False)
        return list(body.get("items") or [])


def pod_dicts(pods: Iterable[Any], api_client: ApiClient | None = None) -> list[dict[str, Any]]:
    """Client models as the API's own JSON (camelCase), the form the judge reads."""
    client = api_client or ApiClient()
    return [client.sanitize_for_serialization(p) if not isinstance(p, dict) else p for p in pods]
