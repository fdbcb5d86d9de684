"""The real TFJob operator as the oracle: each published manifest of the corpus that runs here
(tests/unit/test_tfjob_corpus.py) is created as a TFJob through Kubeflow's training-operator
(`devstack/up tfjob`: v1.9.4 built from its Go module, its TFJob controller only, its validating
webhook by loopback URL) on the devstack, and every pod it makes is compared, field by field,
with the pod `tfk8s render` makes of the same manifest.

What is compared: the replica counts; the pod's restart policy; the `tensorflow` container's
image, command, args, workingDir, port `tfjob-port`, imagePullPolicy (as the API server
defaults ours, which sets none when the manifest sets none), every env entry, TF_CONFIG byte for
byte once the operator's peer addresses are written as ours (the one documented difference);
the labels `training.kubeflow.org/job-name`, `replica-type`, `replica-index`, `job-role`; the
template's labels, annotations and volumes. The operator's pods never run a program: the
devstack's KWOK nodes take them (the real node is tainted).
"""
from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.k8s import DEVSTACK
from tests.fixtures.waiting import wait_until
from tests.unit.test_cli import tfk8s
from tests.unit.test_tfjob_corpus import CORPUS, POLICY, REFUSED

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(900)]
ACCEPTED = [p for p in CORPUS if p.name not in REFUSED]
ROLE = {"ps": "ps", "worker": "worker", "chief": "chief", "master": "chief", "evaluator": "evaluator"}


@pytest.fixture(scope="module")
def operator(k8s_cluster):
    """`devstack/up tfjob`; down again at the end when this module brought it up (fail, never skip)."""
    was_up = subprocess.run([str(DEVSTACK / "status"), "tfjob"], capture_output=True, timeout=60).returncode == 0
    up = subprocess.run([str(DEVSTACK / "up"), "tfjob"], capture_output=True, text=True, timeout=1800)
    if up.returncode != 0:
        pytest.fail(f"devstack/up tfjob failed (exit {up.returncode}):\n{up.stderr[-6000:]}", pytrace=False)
    yield
    if not was_up:
        subprocess.run([str(DEVSTACK / "down"), "tfjob"], capture_output=True, timeout=300)


def _default_pull_policy(image: str) -> str:
    """The API server's default for a container that sets none."""
    tail = image.rsplit("/", 1)[-1]
    return "Always" if "@" not in tail and (":" not in tail or tail.endswith(":latest")) else "IfNotPresent"


def _operator_pods(k8s_cluster, namespace: str, doc: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Create the TFJob through the operator; its name and, once all exist, its pods."""
    from kubernetes import client

    api = client.CustomObjectsApi(k8s_cluster.api_client)
    body = copy.deepcopy(doc)
    body["metadata"]["namespace"] = namespace
    for key in ("creationTimestamp", "generation", "resourceVersion", "selfLink", "uid"):
        body["metadata"].pop(key, None)
    body.pop("status", None)
    made = api.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "tfjobs", body)
    name = made["metadata"]["name"]
    total = sum(r.get("replicas", 1) for r in doc["spec"]["tfReplicaSpecs"].values())
    selector = f"training.kubeflow.org/job-name={name}"

    def pods():
        items = k8s_cluster.core_v1.list_namespaced_pod(namespace, label_selector=selector).items
        return items if len(items) == total else None

    found = wait_until(pods, 120, f"the operator's {total} pods of TFJob {name}")
    return name, [k8s_cluster.api_client.sanitize_for_serialization(p) for p in found]


def _ours(k8s_cluster, tmp_path: Path, path: Path, namespace: str, env: dict[str, str]) -> list[dict[str, Any]]:
    """Our pods of the manifest as the API server would store them (a server-side dry run applies its
    defaults, as it did to the operator's pods)."""
    doc = yaml.safe_load(path.read_text())
    doc["metadata"]["namespace"] = namespace
    spec = tmp_path / path.name
    spec.write_text(yaml.safe_dump(doc))
    out = tfk8s("render", str(spec), "--run-id", "oracle", env=env)
    assert out.returncode == 0, out.stderr
    pods = [o for o in yaml.safe_load_all(out.stdout) if o and o["kind"] == "Pod"]
    made = k8s_cluster.kubectl_run("create", "--dry-run=server", "-o", "json", "-f", "-",
                                   input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    decoder, text, out, at = json.JSONDecoder(), made.stdout, [], 0  # one JSON object per pod, in a row
    while text[at:].strip():
        obj, end = decoder.raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
        out += obj["items"] if obj.get("kind") == "List" else [obj]
        at = end
    return out


def _key(pod: dict[str, Any]) -> tuple[str, str]:
    labels = pod["metadata"]["labels"]
    return labels["training.kubeflow.org/replica-type"], labels["training.kubeflow.org/replica-index"]


def _manifest_main(doc: dict[str, Any], key: tuple[str, str]) -> dict[str, Any]:
    rspec = next(r for t, r in doc["spec"]["tfReplicaSpecs"].items() if t.lower() == key[0])
    return next(c for c in rspec["template"]["spec"]["containers"] if c["name"] == "tensorflow")


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")


@pytest.mark.parametrize("path", ACCEPTED, ids=[p.stem for p in ACCEPTED])
def test_the_operators_pods_are_ours_field_by_field(operator, k8s_cluster, k8s_namespace, tmp_path, path):
    doc = yaml.safe_load(path.read_text())
    env = dict(POLICY.get(path.name, ("", {}))[1])
    # The manifest is created in the test's namespace: the Secrets the corpus allows in the manifest's own
    # namespace are allowed in this one (allowed_secrets is by namespace).
    if env.get("TFK8S_ALLOWED_SECRETS"):
        env["TFK8S_ALLOWED_SECRETS"] = ",".join(f"{k8s_namespace}/{e.rsplit('/', 1)[-1]}"
                                                for e in env["TFK8S_ALLOWED_SECRETS"].split(","))
    ours = {_key(p): p for p in _ours(k8s_cluster, tmp_path, path, k8s_namespace, env)}
    name, theirs_list = _operator_pods(k8s_cluster, k8s_namespace, doc)
    theirs = {_key(p): p for p in theirs_list}
    assert sorted(ours) == sorted(theirs)  # the same replica types, counts and indexes
    service = next(iter(ours.values()))["spec"]["subdomain"]
    prefix = doc["metadata"].get("name") or doc["metadata"]["generateName"].rstrip("-")
    address = re.compile(rf"{re.escape(name)}-([a-z]+)-(\d+)\.{re.escape(k8s_namespace)}\.svc:(\d+)")

    def as_ours(tf_config: str) -> str:  # the operator's peer address, written as ours (docs/migration-tfjob.md)
        return address.sub(lambda m: f"{ROLE[m[1]]}-{m[2]}.{service}.{k8s_namespace}.svc:{m[3]}", tf_config)

    for key, their in theirs.items():
        our = ours[key]
        where = f"{path.name} {key}"
        assert our["spec"]["restartPolicy"] == their["spec"]["restartPolicy"], where
        a, b = _main(our), _main(their)
        for field in ("image", "command", "args", "workingDir"):
            assert a.get(field) == b.get(field), (where, field)
        assert a["imagePullPolicy"] == b["imagePullPolicy"], where  # both as the API server defaulted them
        if "imagePullPolicy" not in _manifest_main(doc, key):
            assert b["imagePullPolicy"] == _default_pull_policy(b["image"]), where
        port = [p["containerPort"] for p in b["ports"] if p["name"] == "tfjob-port"]
        assert [p["containerPort"] for p in a["ports"] if p["name"] == "tfjob-port"] == port, where
        our_env = {e["name"]: e for e in a.get("env") or ()}
        for entry in b.get("env") or ():
            if entry["name"] == "TF_CONFIG":
                assert our_env["TF_CONFIG"]["value"] == as_ours(entry["value"]), where
                json.loads(entry["value"])
            else:
                assert our_env[entry["name"]] == entry, (where, entry["name"])
        assert ("TF_CONFIG" in our_env) == any(e["name"] == "TF_CONFIG" for e in b.get("env") or ()), where
        kf = {k: v for k, v in their["metadata"]["labels"].items()
              if k.startswith("training.kubeflow.org/") and k != "training.kubeflow.org/operator-name"}
        kf["training.kubeflow.org/job-name"] = prefix if doc["metadata"].get("generateName") else name
        assert {k: v for k, v in our["metadata"]["labels"].items() if k.startswith("training.kubeflow.org/")} == kf
        for k, v in their["metadata"]["labels"].items():
            if not k.startswith("training.kubeflow.org/"):
                assert our["metadata"]["labels"].get(k) == v, (where, k)
        for k, v in (their["metadata"].get("annotations") or {}).items():
            assert (our["metadata"].get("annotations") or {}).get(k) == v, (where, k)
        our_volumes = {v["name"]: v for v in our["spec"].get("volumes") or ()}
        for vol in their["spec"].get("volumes") or ():
            if not vol["name"].startswith("kube-api-access-"):  # the token Kubernetes mounts; ours mount none
                assert our_volumes.get(vol["name"]) == vol, (where, vol["name"])
