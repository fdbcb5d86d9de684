"""The Secret that hands a staging task's HDFS delegation token to its copy pods.

One Secret per try of a staging task, in ``[tfk8s] staging_namespace`` (never the jobs' default namespace:
the task refuses that configuration, see :func:`tfk8s_airflow.staging.fanout.check_token_namespace`), under
an unpredictable name (``tfk8s-stage-<key>-hdfs-<8 random hex digits>``), labelled like the pods and owned
by the task's lease Job (:mod:`tfk8s_airflow.staging.lease`). The pods read it by ``secretKeyRef``; no job
spec may name it (admission refuses every Secret named ``tfk8s-stage-*``, whatever ``allowed_secrets``
says). The task reads it back to cancel the token and deletes it when the copy finishes, fails or is
cancelled; a new try first cancels and deletes the earlier tries' Secrets (ours: our labels and owned by the
same lease), so replacing a token never leaves the old one live. A task that ended with nobody left to
delete it loses its Secret with its lease. A Secret carrying our labels that the lease does not own is never
read, cancelled or deleted.
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.contract import LABEL_SECRET, STAGING_NAME_PREFIX
from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.k8s.client import wrap_api_error
from tfk8s_airflow.k8s.copypods import LABEL_STAGING
from tfk8s_airflow.staging import delegation

log = logging.getLogger(__name__)

__all__ = ["KEY", "new_secret_name", "create", "read_token", "env_entry", "issue", "release",
           "owned"]

#: The key of the token in the Secret's data.
KEY = "token"
LABEL_PURPOSE = LABEL_SECRET  # the package's own Secrets: no job may read one (admission)
PURPOSE = "hdfs-delegation"


def new_secret_name(key: str) -> str:
    """A name nobody can guess ahead of the task (so no spec is written to read it)."""
    return f"{STAGING_NAME_PREFIX}{key}-hdfs-{secrets.token_hex(4)}"


def env_entry(name: str) -> dict[str, object]:
    """The copy pods' ``TFK8S_HDFS_DELEGATION``: a reference to the Secret ``name``, never the token."""
    return {"name": "TFK8S_HDFS_DELEGATION", "valueFrom": {"secretKeyRef": {"name": name, "key": KEY}}}


def _labels(key: str) -> dict[str, str]:
    return {LABEL_STAGING: key, LABEL_PURPOSE: PURPOSE, "app.kubernetes.io/managed-by": "tfk8s-airflow",
            "app.kubernetes.io/component": "staging"}


def _ours(secret: object, key: str) -> bool:
    labels: Mapping[str, str] = getattr(getattr(secret, "metadata", None), "labels", None) or {}
    return all(labels.get(k) == v for k, v in _labels(key).items())


def create(api: CoreV1Api, namespace: str, key: str, token: str, owner: Mapping[str, Any] | None = None) -> str:
    """Create a new Secret of ``key`` holding ``token``, owned by ``owner`` (the task's lease); its name."""
    name = new_secret_name(key)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": _labels(key)}
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata,
                            "data": {KEY: base64.b64encode(token.encode()).decode()}}
    try:
        api.create_namespaced_secret(namespace, body)
    except ApiException as exc:
        if exc.status == 409:  # 32 random bits taken: never adopt what is there
            raise StagingError(f"Secret {namespace}/{name} exists already; it is left alone (retry the task)") \
                from None
        raise wrap_api_error(f"creating the delegation token Secret {namespace}/{name}", exc) from None
    return name


def owned(api: CoreV1Api, namespace: str, key: str, owner_uid: str | None) -> list[Any]:
    """The Secrets of ``key`` that are ours: our labels, and owned by the lease ``owner_uid``."""
    if not owner_uid:
        return []
    selector = ",".join(f"{k}={v}" for k, v in _labels(key).items())
    try:
        listed = api.list_namespaced_secret(namespace, label_selector=selector).items
    except ApiException as exc:
        raise wrap_api_error(f"listing the delegation token Secrets of staging {key}", exc) from None
    return [s for s in listed if _ours(s, key) and any(
        getattr(ref, "uid", None) == owner_uid for ref in (getattr(s.metadata, "owner_references", None) or ()))]


def read_token(secret: Any) -> str | None:
    """The token a Secret of ours holds (None when it holds none that reads as one)."""
    raw = (getattr(secret, "data", None) or {}).get(KEY)
    if not raw:
        return None
    try:
        return base64.b64decode(raw).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None


def _delete(api: CoreV1Api, namespace: str, name: str) -> None:
    try:
        api.delete_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise wrap_api_error(f"deleting the delegation token Secret {namespace}/{name}", exc) from None


def issue(api: CoreV1Api, namespace: str, key: str, hdfs: Any, mask: Callable[[str], None],
          owner: Mapping[str, Any], check: Callable[[], None] = lambda: None) -> str:
    """Obtain a delegation token for the Kerberos connection ``hdfs`` (renewer: its login), hand it to
    ``mask`` (the task log's redaction) and put it in a new Secret of ``key`` owned by ``owner`` (the task's
    lease), after cancelling and deleting an earlier try's. Returns the Secret's name. ``check`` runs once the
    token exists and again once its Secret does (the task's kill check): whatever it or the Secret's creation
    raises, the token is cancelled and its Secret deleted before the error goes on."""
    release(api, namespace, key, hdfs, str(owner["uid"]))
    token = delegation.obtain(hdfs, hdfs.config.user)
    mask(token)
    name = None
    try:
        check()
        name = create(api, namespace, key, token, owner)
        check()
        return name
    except BaseException:
        try:
            delegation.cancel(hdfs, token)
        except Exception as exc:  # the original error matters more
            log.warning("cancelling the unused delegation token failed: %s", exc)
        if name is not None:
            _delete(api, namespace, name)
        raise


def release(api: CoreV1Api, namespace: str, key: str, hdfs: Any | None, owner_uid: str | None,
            handle: str | None = None) -> int:
    """Cancel the token of every Secret of ``key`` the lease ``owner_uid`` owns (when ``hdfs``, the Kerberos
    connection, is given) and delete the Secret. A failed cancellation is logged and the Secret still deleted
    (the token then lives until HDFS's maximum token lifetime). With no such Secret left (a lease that ran out
    took it), ``handle`` (:func:`tfk8s_airflow.staging.delegation.handle` of the task's token) cancels the
    token. How many Secrets there were."""
    found = owned(api, namespace, key, owner_uid)
    for secret in found:
        token = read_token(secret)
        if hdfs is not None and token is not None:
            try:
                delegation.cancel(hdfs, token)
            except Exception as exc:
                log.warning("cancelling the HDFS delegation token of staging %s failed: %s", key, exc)
        _delete(api, namespace, secret.metadata.name)
    if not found and hdfs is not None and handle:
        try:
            delegation.cancel(hdfs, handle)  # a token HDFS no longer knows counts as cancelled
        except Exception as exc:
            log.warning("cancelling the HDFS delegation token of staging %s (its Secret gone) failed: %s", key, exc)
    return len(found)
