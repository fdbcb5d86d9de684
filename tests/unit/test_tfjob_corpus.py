"""Published TFJob manifests (tests/corpus/tfjob, each with its source in a header) through
`tfk8s import`, `validate` and `render`, every pod compared with what Kubeflow's TFJob operator
(training-operator v1.9) creates for the same manifest.

The operator's behaviour is modelled here from its code, independently of the conversion:
replica counts (default 1), the pod's restart policy (the replica's, default Never; ExitCode is
Never), the container `tensorflow` with port `tfjob-port` (2222 unless given), TF_CONFIG (Go's
compact JSON: the cluster keyed by lowercased replica type, sorted, addresses in index order,
the task, `environment: cloud`; none for a job of one replica), the labels programs read
(`training.kubeflow.org/job-name`, `replica-type`, `replica-index`, `job-role`), the template's
image, command, args, env, imagePullPolicy, labels and annotations. The one documented
difference compared as such is the peer address (docs/migration-tfjob.md: `<role>-<i>.<service>.
<namespace>.svc:<port>` on one headless Service instead of `<job>-<type>-<i>.<namespace>.svc`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_cli import tfk8s

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "corpus" / "tfjob").glob("*.yaml"))
MIGRATION = (ROOT / "docs" / "migration-tfjob.md").read_text()

#: The manifests refused, the field named, and the reason as docs/migration-tfjob.md lists it.
REFUSED = {
    # kubeflow/examples' financial_time_series: a placeholder the kubelet could never pull
    "22-examples-tfjob1.yaml": ("spec.tfReplicaSpecs.Worker.template.spec.containers[tensorflow].image",
                                "is not a valid image reference"),
    "23-examples-tfjob2.yaml": ("spec.tfReplicaSpecs.Worker.template.spec.containers[tensorflow].image",
                                "is not a valid image reference"),
    "24-examples-tfjob3.yaml": ("spec.tfReplicaSpecs.Worker.template.spec.containers[tensorflow].image",
                                "is not a valid image reference"),
    # Katib's trial specs: Katib names each trial's TFJob; the API server refuses an object without a name
    "25-katib-trialspec-db4b68b.yaml": ("metadata.name", "Kubernetes names every object by name or generateName"),
    "26-katib-trialspec-7bf3922.yaml": ("metadata.name", "Kubernetes names every object by name or generateName"),
}
#: Manifests the default policy refuses (a Secret the pods read), admitted once the setting allows it.
POLICY = {"18-website-tensorflow-md-77.yaml": ("allowed_secrets",
                                              {"TFK8S_ALLOWED_SECRETS": "your-user-namespace/user-gcp-sa"})}


def source(path: Path) -> dict[str, str]:
    head = dict(re.findall(r"^# (repository|path|commit): (.+)$", path.read_text(), re.M))
    assert set(head) == {"repository", "path", "commit"}, f"{path.name}: its source header is incomplete"
    assert re.match(r"[0-9a-f]{40} ", head["commit"]), head
    return head


def test_the_corpus_is_published_v1_manifests_of_five_repositories_or_more():
    sources = [source(p) for p in CORPUS]
    assert len(CORPUS) >= 20
    assert len({s["repository"] for s in sources}) >= 5
    docs = [yaml.safe_load(p.read_text()) for p in CORPUS]
    assert all(d["kind"] == "TFJob" and d["apiVersion"] == "kubeflow.org/v1" for d in docs)
    assert len({json.dumps(d, sort_keys=True) for d in docs}) == len(docs)  # no manifest twice
    assert set(REFUSED) | set(POLICY) <= {p.name for p in CORPUS}


# ------------------------------------------------------------------------------ the operator, modelled
def _replica_types(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """TFJob's defaults: replica types camel-cased, replicas 1, restartPolicy Never, port tfjob-port 2222."""
    camel = {"ps": "PS", "worker": "Worker", "chief": "Chief", "master": "Master", "evaluator": "Evaluator"}
    out = {}
    for rtype, rspec in doc["spec"]["tfReplicaSpecs"].items():
        main = next(c for c in rspec["template"]["spec"]["containers"] if c["name"] == "tensorflow")
        port = next((p["containerPort"] for p in main.get("ports") or () if p.get("name") == "tfjob-port"), 2222)
        out[camel[rtype.lower()]] = {"replicas": rspec.get("replicas", 1), "restart": rspec.get("restartPolicy")
                                     or "Never", "port": port, "main": main,
                                     "metadata": rspec["template"].get("metadata") or {}}
    return out


def _operator_tf_config(types: dict[str, dict[str, Any]], rtype: str, index: int, address) -> str | None:
    """genTFConfigJSONStr: None when the job is not distributed (one replica in all)."""
    if sum(t["replicas"] for t in types.values()) == 1:
        return None
    cluster = {t.lower(): [address(t.lower(), i, spec["port"]) for i in range(spec["replicas"])]
               for t, spec in types.items()}
    config = {"cluster": dict(sorted(cluster.items())), "task": {"type": rtype.lower(), "index": index},
              "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def _operator_labels(doc: dict[str, Any], types: dict[str, Any], rtype: str, index: int) -> dict[str, str]:
    meta = doc["metadata"]
    name = meta.get("name") or meta["generateName"].rstrip("-")  # here the job keeps generateName's prefix
    labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": rtype.lower(),
              "training.kubeflow.org/replica-index": str(index)}
    has_chief = "Chief" in types or "Master" in types
    if rtype in ("Chief", "Master") or (not has_chief and rtype == "Worker" and index == 0):
        labels["training.kubeflow.org/job-role"] = "master"
    return labels


def compare_with_the_operator(doc: dict[str, Any], rendered: list[dict[str, Any]]) -> None:
    types = _replica_types(doc)
    pods = [o for o in rendered if o["kind"] == "Pod"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_type.setdefault(pod["metadata"]["labels"]["training.kubeflow.org/replica-type"], []).append(pod)
    assert {t: len(v) for t, v in by_type.items()} == {t.lower(): s["replicas"] for t, s in types.items()
                                                      if s["replicas"]}
    role = {"ps": "ps", "worker": "worker", "chief": "chief", "master": "chief", "evaluator": "evaluator"}
    for rtype, rspec in types.items():
        for pod in by_type.get(rtype.lower(), []):
            labels, spec = pod["metadata"]["labels"], pod["spec"]
            index = int(labels["training.kubeflow.org/replica-index"])
            where = f"{pod['metadata']['name']}"
            service, namespace = spec["subdomain"], pod["metadata"]["namespace"]

            def address(t: str, i: int, port: int, service: str = service, namespace: str = namespace) -> str:
                return f"{role[t]}-{i}.{service}.{namespace}.svc:{port}"  # the documented difference, and only it

            assert {k: v for k, v in labels.items() if k.startswith("training.kubeflow.org/")} == _operator_labels(
                doc, types, rtype, index), where
            for key, value in (rspec["metadata"].get("labels") or {}).items():
                assert labels[key] == value, where
            for key, value in (rspec["metadata"].get("annotations") or {}).items():
                assert pod["metadata"]["annotations"][key] == value, where
            assert spec["restartPolicy"] == ("Never" if rspec["restart"] == "ExitCode" else rspec["restart"]), where
            main = next(c for c in spec["containers"] if c["name"] == "tensorflow")
            assert {"name": "tfjob-port", "containerPort": rspec["port"]} in [
                {k: p[k] for k in ("name", "containerPort")} for p in main["ports"]], where
            for key in ("image", "command", "args", "imagePullPolicy", "workingDir"):
                assert main.get(key) == rspec["main"].get(key), (where, key)
            env = {e["name"]: e for e in main.get("env") or ()}
            for entry in rspec["main"].get("env") or ():
                assert env[entry["name"]] == entry, where
            tf_config = env.get("TF_CONFIG", {}).get("value")
            assert tf_config == _operator_tf_config(types, rtype, index, address), where


# ------------------------------------------------------------------------------ each manifest
@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_published_manifest_runs_as_tfjob_runs_it(tmp_path, path):
    setting, env = POLICY.get(path.name, ("", {}))
    imported = tfk8s("import", str(path), env=env)
    validated = tfk8s("validate", str(path), env=env)
    if path.name in REFUSED:
        field, reason = REFUSED[path.name]
        assert validated.returncode == 1 and f"{field}: " in validated.stderr and reason in validated.stderr
        assert "tfk8s import" not in validated.stderr  # no pseudo-problem
        assert reason in MIGRATION, "the migration page lists it as a limit"
        return
    if setting:  # the default policy refuses it, naming the setting; import translates all the same
        default = tfk8s("validate", str(path))
        assert default.returncode == 1 and setting in default.stderr
        plain = tfk8s("import", str(path))
        assert plain.returncode == 0 and plain.stdout == imported.stdout and setting in plain.stderr
    assert imported.returncode == 0, imported.stderr
    assert validated.returncode == 0, validated.stderr
    native = tmp_path / "native.yaml"
    native.write_text(imported.stdout)
    direct = tfk8s("render", str(path), "--run-id", "r1", env=env)
    again = tfk8s("render", str(native), "--run-id", "r1", env=env)
    assert direct.returncode == 0 and again.returncode == 0, direct.stderr + again.stderr
    assert direct.stdout == again.stdout  # import -> render gives exactly the pods of rendering the TFJob
    compare_with_the_operator(yaml.safe_load(path.read_text()), list(yaml.safe_load_all(direct.stdout)))


def test_the_corpus_counts():
    """What the corpus says, for the migration page: accepted, refused by a rule, refused by the default policy."""
    accepted = len(CORPUS) - len(REFUSED)
    assert (len(CORPUS), accepted, len(REFUSED), len(POLICY)) == (26, 21, 5, 1)
    assert "26 published" in MIGRATION and "21 run" in MIGRATION
