"""Good pod templates and TFJob manifests, and every single-point mutation of them into hostile values.

A template with every field tfk8s-airflow reads itself (sidecar and init containers with env,
envFrom, ports, mounts, security contexts; volumes of each source; image pull secrets), a TFJob
manifest with the same template, and :func:`mutations`: each node (a mapping, a list, an item, a
scalar) replaced in turn by each value of :data:`HOSTILE` (wrong types, a YAML date, bytes, huge and
non-finite numbers). Used by the fuzz test (tests/security/test_spec_fuzz.py).
"""
from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator
from typing import Any

HOSTILE: tuple[Any, ...] = (None, True, 0, -1, 10**30, 1.5, float("nan"), "", "x", datetime.date(2024, 1, 2),
                            b"x", [], ["x"], {}, {"x": 1})

SIDECAR = {"name": "side", "image": "busybox:1.36", "command": ["sh"], "args": ["-c", "sleep 1"],
           "env": [{"name": "A", "value": "1"},
                   {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
           "envFrom": [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "c"}, "prefix": "P_"}],
           "ports": [{"containerPort": 8080, "name": "http"}],
           "volumeMounts": [{"name": "scratch", "mountPath": "/scratch", "readOnly": True}],
           "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}},
           "securityContext": {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": False,
                               "seccompProfile": {"type": "RuntimeDefault"}}}
GOOD_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "ads"}, "annotations": {"example.com/owner": "ads"}},
    "spec": {
        "priorityClassName": "high",
        "affinity": {"nodeAffinity": {}},
        "securityContext": {"runAsUser": 1000, "seLinuxOptions": {"level": "s0:c1,c2"}},
        "imagePullSecrets": [{"name": "pull"}],
        "containers": [
            {"name": "tensorflow", "env": [{"name": "EXTRA", "value": "1"}],
             "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
             "securityContext": {"readOnlyRootFilesystem": True}},
            SIDECAR],
        "initContainers": [{**SIDECAR, "name": "init"}],
        "volumes": [
            {"name": "scratch", "emptyDir": {"medium": "Memory"}},
            {"name": "cm", "configMap": {"name": "c"}},
            {"name": "sec", "secret": {"secretName": "s"}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}},
            {"name": "proj", "projected": {"sources": [{"secret": {"name": "s"}}, {"configMap": {"name": "c"}}]}},
            {"name": "host", "hostPath": {"path": "/mnt/tfk8s-gluster/x"}},
            {"name": "csi", "csi": {"driver": "d.example.com", "nodePublishSecretRef": {"name": "s"}}},
        ],
    },
}
_TFJOB_TEMPLATE = copy.deepcopy(GOOD_TEMPLATE)
_TFJOB_TEMPLATE["spec"]["containers"][0].update(image="img:1", command=["python", "train.py"],
                                                ports=[{"name": "tfjob-port", "containerPort": 2222}],
                                                resources={"limits": {"cpu": "1"}})
_TFJOB_TEMPLATE["spec"].update(nodeSelector={"pool": "gpu"}, tolerations=[{"key": "gpu", "operator": "Exists"}])
GOOD_TFJOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "t"},
    "spec": {"runPolicy": {"cleanPodPolicy": "None"},
             "tfReplicaSpecs": {"PS": {"replicas": 1, "restartPolicy": "Never", "template": _TFJOB_TEMPLATE},
                                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": _TFJOB_TEMPLATE}}},
}


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*path, i))


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = copy.deepcopy(value)
    return out


def mutations(doc: dict[str, Any], under: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """``doc`` with one node under a top-level key of ``under`` replaced by each hostile value in turn."""
    for path in _paths(doc):
        if len(path) < 2 or path[0] not in under:
            continue
        for value in HOSTILE:
            yield _replaced(doc, path, value)
