"""A Kubeflow TFJob manifest through tf_job(), its replicas real TensorFlow containers on the real node.

The manifest is ``examples/tfjob-dist-mnist.yaml`` (TF1 between-graph, one PS, two workers
with ``restartPolicy: ExitCode``, ``successPolicy: AllWorkers``) with the program a TFJob
user would have in their image: ``tests/tf/programs/tfjob_style.py``, which knows nothing of
tfk8s-airflow and reads only TF_CONFIG. Its pods select the devstack's real node and run the
training image (TensorFlow), and the program and the model directory come from hostPath
volumes. Each worker writes the TF_CONFIG it saw: exactly TFJob's.
"""
from __future__ import annotations

import json
import time

import pytest
import yaml

from tests.dagrun import states, xcom
from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.realpods.support import GOOD, REPO, JobWatch, read_json, report

pytestmark = [pytest.mark.k8s, pytest.mark.tf, pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.usefixtures("allowed_host_paths")]
PROGRAMS, MODEL = "/opt/tfk8s-programs", "/mnt/tfk8s-realpod/model"


def manifest(namespace: str, model_dir, steps: int, program: str = "tfjob_style.py", extra=(), *,
             image: str) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "tfjob-dist-mnist.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    for rspec in doc["spec"]["tfReplicaSpecs"].values():
        pod = rspec["template"]["spec"]
        main = pod["containers"][0]
        main.pop("resources")  # the node is this machine: no room for the example's 4Gi workers
        main["image"] = image
        main["command"] = ["python3", f"{PROGRAMS}/{program}"]
        main["args"] = [f"--steps={steps}", "--out", MODEL, *extra]
        main["env"] = [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}]
        main["volumeMounts"] = [{"name": "programs", "mountPath": PROGRAMS, "readOnly": True},
                                {"name": "model", "mountPath": MODEL}]
        pod["volumes"] = [{"name": "programs", "hostPath": {"path": str(REPO / "tests" / "tf" / "programs")}},
                          {"name": "model", "hostPath": {"path": str(model_dir)}}]
        pod["nodeSelector"] = REAL_NODE_SELECTOR
        pod["tolerations"] = REAL_NODE_TOLERATIONS
    return doc


def test_a_tfjob_manifest_trains_with_tfjobs_tf_config(node, k8s_namespace, airflow_db, model_dir):
    import tfk8s_scenarios as s
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = s.from_conf.test(run_conf={"namespace": k8s_namespace, "shards": {},
                                        "spec": manifest(k8s_namespace, model_dir, 300, image=node.image)})
    elapsed = time.monotonic() - t0
    assert dr.state == "success", (states(dr), xcom(dr, "train.wait", "summary"))
    summary = xcom(dr, "train.wait", "summary")
    assert summary["replicas"]["worker-0"]["exit_code"] == 0 and summary["replicas"]["worker-1"]["exit_code"] == 0
    service = watch.pod("worker-0").spec.subdomain
    peers = f"{service}.{k8s_namespace}.svc:2222"
    cluster = {"ps": [f"ps-0.{peers}"], "worker": [f"worker-0.{peers}", f"worker-1.{peers}"]}
    results = {}
    for i in (0, 1):
        results[i] = read_json(model_dir / f"worker-{i}.json")
        seen = results[i]["tf_config"]  # the text the program read from its environment
        assert json.loads(seen) == {"cluster": cluster, "task": {"type": "worker", "index": i},
                                    "environment": "cloud"}
        assert seen == json.dumps(json.loads(seen), separators=(",", ":"))  # compact, as TFJob's Go encoder writes
    report("tfjob-manifest", elapsed, **{k: v for k, v in results[0].items() if k != "tf_config"})
    assert results[0]["chief"] is True and results[0]["step"] >= 290 and results[0]["accuracy"] >= GOOD
    assert watch.pod("worker-0").spec.restart_policy == "Never"  # ExitCode, as TFJob creates it
    watch.assert_nothing_left()


def _starts(model_dir, key: str) -> int:
    path = model_dir / f"starts-{key}.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_exit_code_permanent_fails_the_job_at_once_and_the_program_ran_once(node, k8s_namespace, airflow_db,
                                                                            model_dir):
    """restartPolicy ExitCode, as TFJob does it: worker 1 exits 1 (permanent). Its pod is Never, so the kubelet
    never runs it again; the job fails at once, and nothing recreates the pod."""
    import tfk8s_scenarios as s
    with JobWatch(node, k8s_namespace) as watch:
        dr = s.from_conf.test(run_conf={"namespace": k8s_namespace, "shards": {}, "spec": manifest(
            k8s_namespace, model_dir, 3000, "tfjob_exit_once.py", ("--exit-first", "1"), image=node.image)})
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "failed", (states(dr), summary)
    assert "worker-1" in summary["reason"] and "1-127 are permanent" in summary["reason"], summary["reason"]
    assert summary["attempts"] == [] and summary["replicas"]["worker-1"]["restarts"] == 0
    assert _starts(model_dir, "worker-1") == 1  # the program ran exactly once
    assert [life.attempt for life in watch.history("worker-1")] == [1]
    watch.assert_nothing_left()


def test_exit_code_retryable_recreates_the_pod_and_the_job_succeeds(node, k8s_namespace, airflow_db, model_dir):
    """Worker 1 is SIGKILLed at its first start (exit 137, retryable): its pod is recreated (same name and DNS),
    the program runs again, rejoins, and the job succeeds."""
    import tfk8s_scenarios as s
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = s.from_conf.test(run_conf={"namespace": k8s_namespace, "shards": {}, "spec": manifest(
            k8s_namespace, model_dir, 300, "tfjob_exit_once.py", ("--exit-first", "137"), image=node.image)})
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "success", (states(dr), summary)
    report("tfjob-exit-code-137", time.monotonic() - t0, attempts=summary["attempts"])
    [attempt] = summary["attempts"]
    assert attempt["action"] == "replace" and attempt["replicas"] == ["worker-1"], attempt
    assert "ExitCode recreates the pod for exit code 137" in attempt["reason"], attempt
    assert _starts(model_dir, "worker-1") == 2 and _starts(model_dir, "worker-0") == 1
    assert [life.attempt for life in watch.history("worker-1")] == [1, 2]
    assert read_json(model_dir / "worker-1.json")["step"] > 0
    watch.assert_nothing_left()
