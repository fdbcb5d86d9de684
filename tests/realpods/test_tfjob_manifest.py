"""A Kubeflow TFJob manifest through tf_job(), its replicas real TensorFlow processes on the node agent.

The manifest is ``examples/tfjob-dist-mnist.yaml`` (TF1 between-graph, one PS, two workers
with ``restartPolicy: ExitCode``, ``successPolicy: AllWorkers``) with the program a TFJob
user would have in their image: ``tests/tf/programs/tfjob_style.py``, which knows nothing of
tfk8s-airflow and reads only TF_CONFIG. Its pods select the agent's node, and the program
and the model directory come from hostPath volumes (the agent runs the command with the
host's Python, not the image). Each worker writes the TF_CONFIG it saw: exactly TFJob's.
"""
from __future__ import annotations

import json
import time

import pytest
import yaml

from tests.dagrun import states, xcom
from tests.fixtures.nodeagent import LOCAL_NODE_SELECTOR, LOCAL_TOLERATIONS
from tests.realpods.support import GOOD, REPO, JobWatch, read_json, report

pytestmark = [pytest.mark.k8s, pytest.mark.tf, pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.usefixtures("allowed_host_paths")]
PROGRAMS, MODEL = "/opt/tfk8s-programs", "/mnt/tfk8s-realpod/model"


def manifest(namespace: str, model_dir, steps: int) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "tfjob-dist-mnist.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    for rspec in doc["spec"]["tfReplicaSpecs"].values():
        pod = rspec["template"]["spec"]
        main = pod["containers"][0]
        main.pop("resources")  # the agent's node is this machine: no room for the example's 4Gi workers
        main["command"] = ["python3", f"{PROGRAMS}/tfjob_style.py"]
        main["args"] = [f"--steps={steps}", "--out", MODEL]
        main["env"] = [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}]
        main["volumeMounts"] = [{"name": "programs", "mountPath": PROGRAMS, "readOnly": True},
                                {"name": "model", "mountPath": MODEL}]
        pod["volumes"] = [{"name": "programs", "hostPath": {"path": str(REPO / "tests" / "tf" / "programs")}},
                          {"name": "model", "hostPath": {"path": str(model_dir)}}]
        pod["nodeSelector"] = LOCAL_NODE_SELECTOR
        pod["tolerations"] = LOCAL_TOLERATIONS
    return doc


def test_a_tfjob_manifest_trains_with_tfjobs_tf_config(agent, k8s_namespace, airflow_db, model_dir):
    import tfk8s_scenarios as s
    t0 = time.monotonic()
    with JobWatch(agent, k8s_namespace) as watch:
        dr = s.from_conf.test(run_conf={"namespace": k8s_namespace, "shards": {},
                                        "spec": manifest(k8s_namespace, model_dir, 300)})
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
