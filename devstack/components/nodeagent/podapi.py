"""The node agent's requests to the API server on behalf of its pods.

Why a module of its own: the pod workers report status (``pods/status``), delete a pod
once its processes are gone, and read what a pod's volumes and env refer to (ConfigMaps,
Secrets, a service-account token); each request's error handling (a pod already gone, an
optional source missing, a source that makes the container unstartable) is written here
once.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from podconfig import ConfigError

log = logging.getLogger("nodeagent")


class PodApi:
    """Pod status, deletion and the objects a pod refers to, through one CoreV1Api client."""

    def __init__(self, core: Any) -> None:
        self.core = core

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.patch_namespaced_pod_status(name, namespace, {"status": status},
                                                  _content_type="application/merge-patch+json")
            return True
        except ApiException as exc:
            if exc.status == 404:
                return True  # gone: nothing to report to
            log.warning("status of %s/%s: HTTP %s %s", namespace, name, exc.status, exc.reason)
        except Exception as exc:  # noqa: BLE001
            log.warning("status of %s/%s: %s", namespace, name, exc)
        return False

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0,
                                            body=client.V1DeleteOptions(grace_period_seconds=0,
                                                                        preconditions={"uid": uid}))
            log.info("%s/%s: deleted", namespace, name)
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("deleting %s/%s: HTTP %s %s", namespace, name, exc.status, exc.reason)

    def read_configmap(self, namespace: str, name: str, optional: bool) -> dict[str, bytes]:
        from kubernetes.client.exceptions import ApiException

        try:
            cm = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            raise ConfigError(f'configmap "{name}" not found' if exc.status == 404
                              else f"reading configmap {name}: HTTP {exc.status}") from exc
        out = {k: v.encode() for k, v in (cm.data or {}).items()}
        out.update({k: base64.b64decode(v) for k, v in (cm.binary_data or {}).items()})
        return out

    def read_secret(self, namespace: str, name: str, optional: bool) -> dict[str, bytes]:
        from kubernetes.client.exceptions import ApiException

        try:
            s = self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            raise ConfigError(f'secret "{name}" not found' if exc.status == 404
                              else f"reading secret {name}: HTTP {exc.status}") from exc
        return {k: base64.b64decode(v) for k, v in (s.data or {}).items()}

    def token_for(self, pod: dict[str, Any], src: dict[str, Any]) -> str:
        sa = pod["spec"].get("serviceAccountName") or "default"
        body = {"spec": {"expirationSeconds": int(src.get("expirationSeconds") or 3600),
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                            "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}}}
        if src.get("audience"):
            body["spec"]["audiences"] = [src["audience"]]
        try:
            return self.core.create_namespaced_service_account_token(
                sa, pod["metadata"]["namespace"], body).status.token
        except Exception as exc:  # noqa: BLE001 - a TF program does not need it
            log.warning("token for %s/%s: %s", pod["metadata"]["namespace"], sa, exc)
            return ""

    def list_raw(self, fn, **kwargs) -> list[dict[str, Any]]:
        resp = fn(_preload_content=False, _request_timeout=30, **kwargs)
        return json.loads(resp.data).get("items") or []
