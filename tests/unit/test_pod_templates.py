"""The job's pod templates (recovery recreates replicas from them): stored so 512 replicas fit a ConfigMap.

A pod's TF_CONFIG names every replica, so a 512-replica job's pods are ~40 KB each and ~20 MB
together; the ConfigMap that keeps them for recovery holds 1 MiB. What is read back is bounded and
checked: the ConfigMap sits in the job's namespace, where others may write.
"""
from __future__ import annotations

import base64
import gzip
import json
import lzma
import os

import pytest

from tfk8s_airflow.exceptions import PermanentKubernetesApiError, SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.templatemap import (
    CONFIGMAP_MAX_BYTES,
    TEMPLATES_KEY,
    check_templates_fit,
    templates_configmap,
    templates_digest,
)
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s.relaunch import read_templates


def pods_of(replicas: int, **spec) -> list[dict]:
    doc = {"name": "bench", "namespace": "bench-221f261b", "image": "tfk8s/trainer:0.1", "ps": 1,
           "worker": replicas - 1, **spec}
    s = parse_spec(doc)
    run = "manual__2026-12-01T15:12:00.502648+00:00"
    names = JobNames.for_run(s, run, "train", "tfk8s_t_from_conf")
    return list(plan_job(s, names, DeploymentPolicy(), dag_id="tfk8s_t_from_conf", run_id=run,
                         task_id="train.replica").pods)


def stored(cm: dict, key: str = TEMPLATES_KEY) -> bytes:
    return base64.b64decode(cm["binaryData"][key])


def test_512_replicas_fit_the_configmap_and_read_back_whole():
    pods = pods_of(512)
    raw = json.dumps(pods, separators=(",", ":")).encode()
    assert len(raw) > 16 * CONFIGMAP_MAX_BYTES  # every pod names every replica
    assert len(gzip.compress(raw, 6)) > CONFIGMAP_MAX_BYTES  # gzip's 32 KiB window: the pods do not fit
    cm = templates_configmap("job", "ns", "job-pods", {"a": "b"}, pods)
    assert len(stored(cm)) < CONFIGMAP_MAX_BYTES // 16
    assert read_templates(cm["binaryData"], "ConfigMap ns/job-pods") == pods
    check_templates_fit(pods)  # no error


def test_pods_that_cannot_fit_are_refused_naming_replicas_and_the_fix():
    # Each replica its own incompressible env (16 KiB of entropy): 96 of them are ~1.5 MiB compressed.
    pods = pods_of(96)
    for pod in pods:
        pod["spec"]["containers"][0].setdefault("env", []).append({"name": "OWN", "value": os.urandom(16 * 1024).hex()})
    with pytest.raises(SpecError) as err:
        check_templates_fit(pods)
    assert err.value.problems[0].field == "replicas"
    assert "nothing was created" in str(err.value) and "fix: fewer replicas" in str(err.value)


@pytest.mark.parametrize("data, why", [
    ({}, "holds no pods.json.xz"),
    ({TEMPLATES_KEY: base64.b64encode(b"not xz at all").decode()}, "is not xz data"),
    ({TEMPLATES_KEY: base64.b64encode(lzma.compress(b"{nope")).decode()}, "is not JSON"),
    ({TEMPLATES_KEY: base64.b64encode(lzma.compress(b'{"a": 1}')).decode()}, "not hold a list of pod manifests"),
    ({TEMPLATES_KEY: base64.b64encode(lzma.compress(b"[1, 2]")).decode()}, "not hold a list of pod manifests"),
])
def test_unreadable_templates_stop_recovery_with_a_permanent_error_saying_why(data, why):
    with pytest.raises(PermanentKubernetesApiError) as err:
        read_templates(data, "ConfigMap ns/job-pods")
    assert why in str(err.value) and "ConfigMap ns/job-pods" in str(err.value)
    assert "cannot be recovered" in str(err.value)


def test_a_planted_templates_bomb_is_refused_at_the_read_bound():
    bomb = lzma.compress(b"[" + b" " * (8 * 1024 * 1024) + b"]", preset=1)  # 8 MiB of spaces, ~1 KB stored
    data = {TEMPLATES_KEY: base64.b64encode(bomb).decode()}
    assert read_templates(data, "cm", limit=16 * 1024 * 1024) == []  # under the bound: read
    with pytest.raises(PermanentKubernetesApiError) as err:
        read_templates(data, "cm", limit=1024 * 1024)
    assert "inflates beyond 1048576 bytes" in str(err.value)


def test_templates_are_read_only_while_they_hold_what_setup_wrote():
    """Setup keeps the digest in the job record (Airflow's database); a ConfigMap rewritten by
    anyone who may write ConfigMaps in the namespace is refused before it is inflated."""
    pods = pods_of(4)
    cm = templates_configmap("bench", "bench-221f261b", "bench-pods", {}, pods)
    digest = templates_digest(cm)
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert read_templates(cm["binaryData"], "ConfigMap x", digest=digest) == pods

    evil = [{**p, "spec": {**p["spec"], "containers": [{**p["spec"]["containers"][0], "image": "evil/miner"}]}}
            for p in pods]
    swapped = templates_configmap("bench", "bench-221f261b", "bench-pods", {}, evil)
    with pytest.raises(PermanentKubernetesApiError, match="no longer holds what setup wrote"):
        read_templates(swapped["binaryData"], "ConfigMap x", digest=digest)
