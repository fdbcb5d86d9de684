"""The templates ConfigMap: the job's pods as setup creates them, kept for recovery.

Why a ConfigMap of the pods themselves: recovery recreates replicas (hours later, in the triggerer)
exactly as setup made them, whatever the spec or the deployment's settings are by then, so setup
stores its pod manifests beside the job (``<job>-pods``, owned by the job's Service) and keeps the
digest of what it wrote in the job record; recovery reads the pods only while the ConfigMap still
holds exactly that (:func:`tfk8s_airflow.k8s.relaunch.read_templates`).

Pure builders: the plan (:mod:`tfk8s_airflow.job.builders.plan`) builds the ConfigMap, setup checks
that it fits before anything is created, the I/O layer reads it back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow.exceptions import SpecError

__all__ = ["CONFIGMAP_MAX_BYTES", "TEMPLATES_KEY", "blob_digest", "check_templates_fit", "templates_blob",
           "templates_configmap", "templates_digest"]

TEMPLATES_KEY = "pods.json.xz"
CONFIGMAP_MAX_BYTES = 1024 * 1024  # the kube-apiserver's bound on a ConfigMap's data


def templates_blob(pods: Sequence[Mapping[str, Any]]) -> bytes:
    """The pods' manifests as stored: JSON, xz (preset 1, a 1 MiB window).

    xz, not gzip: a pod's TF_CONFIG names every replica, so at 512 replicas each pod is ~40 KB and
    gzip's 32 KiB window sees no pod twice (1.1 MB, over the ConfigMap bound); xz's window spans many
    pods and stores 512 of them in ~10 KB.
    """
    return lzma.compress(json.dumps(list(pods), separators=(",", ":")).encode(), preset=1)


def check_templates_fit(pods: Sequence[Mapping[str, Any]]) -> None:
    """Raise SpecError (before anything is created) when the templates would not fit a ConfigMap."""
    size = len(templates_blob(pods))
    if size > CONFIGMAP_MAX_BYTES - 64 * 1024:  # headroom for what setup adds (owner references)
        raise SpecError(f"the job's {len(pods)} pod manifests take {size} bytes compressed, more than the "
                        f"ConfigMap recovery keeps them in holds ({CONFIGMAP_MAX_BYTES}); nothing was created "
                        "(fix: fewer replicas, or smaller env/pod_template per replica)", field="replicas")


def templates_configmap(record_job: str, namespace: str, name: str, labels: Mapping[str, str],
                        pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ConfigMap of a job's pod manifests as setup creates them."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "binaryData": {TEMPLATES_KEY: base64.b64encode(templates_blob(pods)).decode()}}


def templates_digest(configmap: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a templates ConfigMap's data: setup keeps it in the job record (Airflow's
    database), and recovery reads the pods only when the ConfigMap still holds exactly that."""
    return blob_digest(base64.b64decode(configmap["binaryData"][TEMPLATES_KEY]))


def blob_digest(raw: bytes) -> str:
    """``sha256:<hex>`` of the stored (compressed) templates."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()
