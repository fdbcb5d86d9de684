"""``tfk8s render`` prints what setup creates: compared object for object on the real API server (KWOK nodes).

Setup runs for real against the devstack (its own client, checks, creation, gate release); only its
task context is a stand-in, as in tests/airflow/test_tfjob_k8s.py's attach test. The job has shards and a
TensorBoard and no queue (the spec names none, and the test clears the deployment's ``default_queue``).
``tfk8s render`` then runs as a user runs it, with the same spec, shards, run id, DAG id and group, under the
same environment (so the same deployment settings).

What the comparison allows, and only this:

* **Server defaults.** Every field render prints (labels, annotations, and everything outside
  ``metadata``: ``spec``, ``data``, ``binaryData``) is on the server object with an equal value; a
  mapping on the server may have more keys (``dnsPolicy``, ``schedulerName``, ``clusterIPs``,
  ``terminationMessagePath``, a ``configMap`` volume's ``defaultMode``...), but a list must have the
  same length and its items compare pairwise the same way. Quantities under ``resources`` compare by
  value. The server's own metadata (``uid``, ``resourceVersion``, ``creationTimestamp``,
  ``managedFields``...) and ``status`` are not compared.
* **No other label.** The server object's labels are exactly render's.
* **Setup's mark.** On the Service, the ConfigMaps and the NetworkPolicy, the one annotation render does
  not print is ``tfk8s.io/setup-digest`` (:mod:`tfk8s_airflow.job.builders.ownership`), and it must be the
  mark of render's object as setup creates it; pods get no annotation render does not print.
* **The owner.** Every object but the Service has exactly one owner reference, to the job's Service by
  its UID; render prints none (the UID exists only once setup created the Service: docs/cli.md).
* **The templates ConfigMap's data.** It holds the pods with that owner reference (setup rebuilds it once
  the Service exists), so its bytes differ: its pods, decoded, are render's decoded pods each with the
  owner reference added, and setup's job record keeps the digest of the server's data.
* **The gate.** Setup releases ``tfk8s.io/gang`` once every pod exists: each replica pod render prints
  gated has on the server every gate render prints but that one (none here); the TensorBoard pod is
  not gated in either.

Run it (it needs the Kubernetes devstack; Airflow runs in-process, no scheduler or DB):
``.venv/bin/python -m pytest -p no:cacheprovider tests/airflow/test_render_is_what_setup_creates.py``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tfk8s_airflow.contract import GANG_GATE
from tfk8s_airflow.job.builders.objects import owned_by
from tfk8s_airflow.job.builders.ownership import MARK, marked
from tfk8s_airflow.job.builders.templatemap import TEMPLATES_KEY, templates_digest
from tfk8s_airflow.job.spec.quantity import quantity_to_float
from tfk8s_airflow.k8s.relaunch import read_templates

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

TFK8S = str(Path(sys.executable).with_name("tfk8s"))
DAG_ID, RUN_ID, GROUP = "tfk8s_t_render_parity", "parity-1", "train"
SHARDS = {"worker-0": ["/data/part-0", "/data/part-2"], "worker-1": ["/data/part-1"]}
#: KWOK pods (they run until deleted), a TensorBoard on the job's model volume, no queue.
SPEC = {"name": "parity", "image": "tfk8s/trainer:0.1", "node_selector": {"type": "kwok"}, "ps": 1,
        "worker": {"replicas": 2, "resources": {"cpu": "500m", "memory": "1Gi"}},
        "env": {"RUN_KIND": "parity"}, "annotations": {"example.com/owner": "ml"},
        "tensorboard": True,
        "volumes": [{"name": "model", "mount_path": "/model", "host_path": "/mnt/tfk8s-gluster/tfk8s-kwok/parity"}]}


def setup_job(namespace: str) -> dict[str, Any]:
    """Run setup (TFJobSetupOperator._setup through execute) for SPEC; the XComs it pushed."""
    from tfk8s_airflow.operators.setup import TFJobSetupOperator

    pushed: dict[str, Any] = {}
    op = TFJobSetupOperator(task_id=f"{GROUP}.setup", spec={**SPEC, "namespace": namespace}, shards=SHARDS,
                            job_group=GROUP, preflight="off")
    context = {"dag": SimpleNamespace(dag_id=DAG_ID, fileloc=None), "run_id": RUN_ID,
               "ti": SimpleNamespace(xcom_push=lambda key, value: pushed.__setitem__(key, value))}
    pushed["return_value"] = op.execute(context)
    return pushed


def render(namespace: str, tmp_path: Path) -> list[dict[str, Any]]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "namespace": namespace}))
    shards = tmp_path / "shards.json"
    shards.write_text(json.dumps(SHARDS))
    out = subprocess.run([TFK8S, "render", str(spec), "--shards", str(shards), "--run-id", RUN_ID,
                          "--dag-id", DAG_ID, "--group", GROUP], check=True, capture_output=True, text=True,
                         timeout=60)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def server_objects(k8s_cluster, namespace: str, selector: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every Service, ConfigMap, NetworkPolicy and Pod of the job as the API server has them (camelCase)."""
    from kubernetes.client import NetworkingV1Api

    core, api = k8s_cluster.core_v1, k8s_cluster.api_client
    net = NetworkingV1Api(api)
    out = {}
    for kind, lister in (("Service", core.list_namespaced_service), ("ConfigMap", core.list_namespaced_config_map),
                         ("NetworkPolicy", net.list_namespaced_network_policy), ("Pod", core.list_namespaced_pod)):
        for item in lister(namespace, label_selector=selector).items:
            out[(kind, item.metadata.name)] = api.sanitize_for_serialization(item)
    return out


def differences(want: Any, got: Any, path: str) -> list[str]:
    """Where ``got`` (the server's) lacks or changes what ``want`` (render's) says; extra mapping keys allowed."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: {got!r} is not a mapping"]
        return [d for k, v in want.items()
                for d in (differences(v, got[k], f"{path}.{k}") if k in got else [f"{path}.{k}: missing"])]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: {got!r} is not {want!r}"]
        return [d for i, (w, g) in enumerate(zip(want, got, strict=True)) for d in differences(w, g, f"{path}[{i}]")]
    if ".resources." in path and isinstance(want, str) and isinstance(got, str):
        return [] if quantity_to_float(want) == quantity_to_float(got) else [f"{path}: {got!r} is not {want!r}"]
    return [] if want == got else [f"{path}: {got!r} is not {want!r}"]


def mismatches(printed: dict[tuple[str, str], dict[str, Any]], server: dict[tuple[str, str], dict[str, Any]],
               record: dict[str, Any]) -> list[str]:
    """Every way a server object differs from render's beyond what the module's docstring allows."""
    job = record["job"]
    service = server[("Service", job)]
    owner = {"apiVersion": "v1", "kind": "Service", "name": job, "uid": service["metadata"]["uid"]}
    problems: list[str] = []
    for key, want in printed.items():
        got = server[key]
        where = f"{key[0]} {key[1]}"
        meta, gmeta = want["metadata"], got["metadata"]
        # Labels: exactly render's.
        if (gmeta.get("labels") or {}) != meta.get("labels", {}):
            problems.append(f"{where}: labels {gmeta.get('labels')} are not {meta.get('labels')}")
        # The owner: the Service's, on every object but the Service.
        owners = gmeta.get("ownerReferences") or []
        expected_owners = [] if key[0] == "Service" else [owner]
        if [{k: o.get(k) for k in ("apiVersion", "kind", "name", "uid")} for o in owners] != expected_owners:
            problems.append(f"{where}: ownerReferences {owners} are not {expected_owners}")
        # What setup made of render's object: owned, and the templates rebuilt from the owned pods.
        made = want if key[0] == "Service" else owned_by(want, owner)
        if key[1] == f"{job}-pods":
            pods = read_templates(want["binaryData"], f"render's {where}")
            held = read_templates(got.get("binaryData"), f"the server's {where}")
            if held != [owned_by(p, owner) for p in pods]:
                problems.append(f"{where}: the server's templates are not render's pods with the owner reference")
            made = {**made, "binaryData": got["binaryData"]}
            if templates_digest(made) != record["templates_digest"]:
                problems.append(f"{where}: the job record's digest is not that of the server's templates")
        # Annotations: render's, and on the objects setup marks only its mark, the mark of what it made.
        annotations = dict(gmeta.get("annotations") or {})
        if key[0] != "Pod":
            mark = annotations.pop(MARK, None)
            if mark != marked(made)["metadata"]["annotations"][MARK]:
                problems.append(f"{where}: setup's mark {mark!r} is not that of render's object")
        if annotations != meta.get("annotations", {}):
            problems.append(f"{where}: annotations {annotations} are not {meta.get('annotations', {})}")
        # Everything else render prints, with server defaults allowed; the gate setup released.
        body = {k: v for k, v in want.items() if k not in ("apiVersion", "kind", "metadata", "binaryData")}
        if key[0] == "Pod":
            gates = [g for g in body["spec"].get("schedulingGates", []) if g["name"] != GANG_GATE]
            if gates != (got["spec"].get("schedulingGates") or []):
                problems.append(f"{where}: scheduling gates {got['spec'].get('schedulingGates')} are not {gates}")
            body = {**body, "spec": {k: v for k, v in body["spec"].items() if k != "schedulingGates"}}
        problems += [f"{where}: {d}" for d in differences(body, got, "")]
    return problems


def test_every_object_setup_creates_is_the_one_render_prints(k8s_cluster, k8s_namespace, tmp_path, monkeypatch):
    for name in ("AIRFLOW__TFK8S__DEFAULT_QUEUE", "TFK8S_DEFAULT_QUEUE"):  # queue-less, whatever the machine says
        monkeypatch.delenv(name, raising=False)
    pushed = setup_job(k8s_namespace)
    record = pushed["job"]
    assert record["queue"] is None
    rendered = render(k8s_namespace, tmp_path)
    job = rendered[0]["metadata"]["labels"]["tfk8s.io/job"]
    assert rendered[0]["kind"] == "Service" and job == record["job"]
    server = server_objects(k8s_cluster, k8s_namespace, f"tfk8s.io/job={job}")

    # The same objects: kinds and names.
    printed = {(o["kind"], o["metadata"]["name"]): o for o in rendered}
    assert set(server) == set(printed), (sorted(set(server) ^ set(printed)))
    assert [k for k, _ in printed] == ["Service", "ConfigMap", "ConfigMap", "NetworkPolicy", "Pod", "Pod", "Pod",
                                       "Pod"]

    assert not (problems := mismatches(printed, server, record)), "\n".join(problems)

    # What the comparison rests on: the job has shards and a TensorBoard, and every replica pod was printed gated.
    assert (("ConfigMap", f"{job}-shards") in printed and ("Pod", f"{job}-tensorboard") in printed
            and record["tensorboard_pod"] == f"{job}-tensorboard")
    replicas = [o for o in rendered if o["kind"] == "Pod" and "tfk8s.io/role" in o["metadata"]["labels"]]
    assert len(replicas) == 3 and all(p["spec"]["schedulingGates"] == [{"name": GANG_GATE}] for p in replicas)
    assert [r["replica"] for r in pushed["return_value"]] == ["ps-0", "worker-0", "worker-1"]
    assert TEMPLATES_KEY in printed[("ConfigMap", f"{job}-pods")]["binaryData"]
