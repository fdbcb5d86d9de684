"""The Secret that hands a staging task's HDFS delegation token to its copy pods.

One Secret per staging task (``tfk8s-stage-<key>-hdfs`` in the copy pods' namespace, labelled like the
pods), created by the task before its pods, read back by the task to cancel the token, and deleted
when the copy finishes, fails or is cancelled. Its owner is the task's lease Job
(:mod:`tfk8s_airflow.staging.lease`), never a pod (the pods of a part are replaced when the part is
retried): a task that ended with nobody left to delete it loses the Secret with its lease. A Secret of
that name that this package did not create for this task (other labels) is never read, replaced or
deleted: the task fails naming it.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.k8s.client import wrap_api_error
from tfk8s_airflow.k8s.copypods import LABEL_STAGING
from tfk8s_airflow.staging import delegation

log = logging.getLogger(__name__)

__all__ = ["KEY", "secret_name", "create", "read_token", "delete", "env_entry", "issue", "release"]

#: The key of the token in the Secret's data.
KEY = "token"
LABEL_PURPOSE = "tfk8s.io/secret"
PURPOSE = "hdfs-delegation"


def secret_name(key: str) -> str:
    return f"tfk8s-stage-{key}-hdfs"


def env_entry(key: str) -> dict[str, object]:
    """The copy pods' ``TFK8S_HDFS_DELEGATION``: a reference to the Secret, never the token."""
    return {"name": "TFK8S_HDFS_DELEGATION",
            "valueFrom": {"secretKeyRef": {"name": secret_name(key), "key": KEY}}}


def _labels(key: str) -> dict[str, str]:
    return {LABEL_STAGING: key, LABEL_PURPOSE: PURPOSE, "app.kubernetes.io/managed-by": "tfk8s-airflow",
            "app.kubernetes.io/component": "staging"}


def _ours(secret: object, key: str) -> bool:
    labels: Mapping[str, str] = getattr(getattr(secret, "metadata", None), "labels", None) or {}
    return all(labels.get(k) == v for k, v in _labels(key).items())


def create(api: CoreV1Api, namespace: str, key: str, token: str, owner: Mapping[str, Any] | None = None) -> str:
    """Create the Secret of ``key`` holding ``token`` (owned by ``owner``, the task's lease); one left by an
    earlier try of the same task (our labels) gets the new token. Returns its name."""
    name = secret_name(key)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": _labels(key)}
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata,
                            "data": {KEY: base64.b64encode(token.encode()).decode()}}
    try:
        api.create_namespaced_secret(namespace, body)
        return name
    except ApiException as exc:
        if exc.status != 409:
            raise wrap_api_error(f"creating the delegation token Secret {namespace}/{name}", exc) from None
    existing = _read(api, namespace, name)
    if existing is None or not _ours(existing, key):
        raise StagingError(f"Secret {namespace}/{name} exists and was not created by tfk8s-airflow for this "
                           "staging task; it is left alone (delete or rename it, then retry the task)")
    try:
        version = getattr(getattr(existing, "metadata", None), "resource_version", None)
        api.replace_namespaced_secret(name, namespace, {**body, "metadata": {**metadata, "resourceVersion": version}})
    except ApiException as exc:
        raise wrap_api_error(f"replacing the delegation token Secret {namespace}/{name}", exc) from None
    return name


def _read(api: CoreV1Api, namespace: str, name: str) -> object | None:
    try:
        return api.read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise wrap_api_error(f"reading the delegation token Secret {namespace}/{name}", exc) from None


def read_token(api: CoreV1Api, namespace: str, key: str) -> str | None:
    """The token in the Secret of ``key`` (None when there is none, or it is not ours)."""
    secret = _read(api, namespace, secret_name(key))
    if secret is None or not _ours(secret, key):
        return None
    raw = (getattr(secret, "data", None) or {}).get(KEY)
    if not raw:
        return None
    try:
        return base64.b64decode(raw).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None


def delete(api: CoreV1Api, namespace: str, key: str) -> bool:
    """Delete the Secret of ``key`` if it is ours; False when there was none of ours."""
    name = secret_name(key)
    secret = _read(api, namespace, name)
    if secret is None or not _ours(secret, key):
        return False
    try:
        api.delete_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise wrap_api_error(f"deleting the delegation token Secret {namespace}/{name}", exc) from None
    return True


def issue(api: CoreV1Api, namespace: str, key: str, hdfs: Any, mask: Callable[[str], None],
          owner: Mapping[str, Any] | None = None) -> str:
    """Obtain a delegation token for the Kerberos connection ``hdfs`` (renewer: its login), hand it to
    ``mask`` (the task log's redaction) and put it in the Secret of ``key``. Returns the Secret's
    name; a token whose Secret could not be made is cancelled at once."""
    token = delegation.obtain(hdfs, hdfs.config.user)
    mask(token)
    try:
        return create(api, namespace, key, token, owner)
    except BaseException:
        try:
            delegation.cancel(hdfs, token)
        except Exception as exc:  # the original error matters more
            log.warning("cancelling the unused delegation token failed: %s", exc)
        raise


def release(api: CoreV1Api, namespace: str, key: str, hdfs: Any | None) -> bool:
    """Cancel the token in the Secret of ``key`` (when ``hdfs``, the Kerberos connection, is given) and
    delete the Secret. A failed cancellation is logged and the Secret still deleted (the token then
    lives until HDFS's maximum token lifetime). True when there was a Secret of ours."""
    token = read_token(api, namespace, key)
    if token is None:
        return delete(api, namespace, key)
    if hdfs is not None:
        try:
            delegation.cancel(hdfs, token)
        except Exception as exc:
            log.warning("cancelling the HDFS delegation token of staging %s failed: %s", key, exc)
    return delete(api, namespace, key)
