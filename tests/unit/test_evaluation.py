"""The evaluation pod (built from a job's spec) and the validation of what an evaluator reports."""
import json
import math
from pathlib import Path

import kubernetes_validate
import pytest

from tfk8s_airflow.contract import EVAL_RESULT_MAX_BYTES
from tfk8s_airflow.exceptions import EvaluationResultError
from tfk8s_airflow.job.builders.evaluation import evaluation_names, evaluation_pod, printable, read_result
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"accuracy": 0.875, "examples": 400, "global_step": 300, "source": "checkpoint:model.ckpt-300",
        "positive_rate": 0.5}


def test_a_result_is_taken_only_as_the_evaluator_writes_it():
    assert read_result(json.dumps(GOOD)) == GOOD
    assert read_result(json.dumps({**GOOD, "accuracy": 1, "source": "saved_model"}))["accuracy"] == 1.0
    bad = [
        "", "not json", "[1, 2]",
        json.dumps({**GOOD, "password": "x"}),                       # an extra key
        json.dumps({k: v for k, v in GOOD.items() if k != "examples"}),  # a missing one
        json.dumps(GOOD).replace("0.875", "NaN"), json.dumps(GOOD).replace("0.875", "Infinity"),
        json.dumps({**GOOD, "accuracy": 1.5}), json.dumps({**GOOD, "accuracy": True}),
        json.dumps({**GOOD, "accuracy": "0.9"}), json.dumps({**GOOD, "examples": 0}),
        json.dumps({**GOOD, "examples": 4.5}), json.dumps({**GOOD, "global_step": -1}),
        json.dumps({**GOOD, "source": "saved_model; rm -rf /"}), json.dumps({**GOOD, "source": "x" * 300}),
        json.dumps({**GOOD, "source": "checkpoint:" + "a" * EVAL_RESULT_MAX_BYTES}),  # too large
        "[" * 2000 + "]" * 2000, '{"accuracy": ' + "[" * 1900 + "]" * 1900 + "}",  # nested: RecursionError
    ]
    for text in bad:
        with pytest.raises(EvaluationResultError) as err:
            read_result(text)
        assert "password" not in str(err.value) and "rm -rf" not in str(err.value)
    assert math.isfinite(read_result(json.dumps(GOOD).encode())["positive_rate"])


def test_the_evaluation_pod_is_a_read_only_pod_of_the_jobs_kind():
    spec = parse_spec({
        "name": "ctr", "image": "registry.example.com/ml/trainer:2.21", "namespace": "ml",
        "node_selector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "env": {"LOG_LEVEL": "info"}, "service_account": "trainer", "active_deadline": "6h",
        "code": {"uri": "https://example.com/algo.tar.gz"},
        "volumes": [{"name": "data", "mount_path": "/data", "host_path": "/mnt/gluster/cache", "read_only": True},
                    {"name": "model", "mount_path": "/model", "pvc": "models"}],
        "ps": 1, "worker": {"replicas": 4, "resources": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1}}})
    names = evaluation_names(spec, "tfk8s_retrain_daily", "scheduled__2026-01-01T00:00:00+00:00", "evaluate")
    pod = evaluation_pod(spec, names, model_dir="/model", heldout=["/data/heldout.csv"], threshold=0.6, timeout=900)
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    meta, podspec = pod["metadata"], pod["spec"]
    (container,) = podspec["containers"]
    assert meta["name"] == names.job and meta["namespace"] == "ml" and "tfk8s.io/job" not in meta["labels"]
    assert meta["labels"]["tfk8s.io/evaluation"] == names.job
    assert container["image"] == "tfk8s/trainer:0.1"  # the deployment's evaluation_image, never the spec's
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert podspec["nodeSelector"] == {"pool": "gpu"} and podspec["tolerations"][0]["key"] == "gpu"
    assert container["command"] == ["python", "-m", "tfk8s_airflow.pod.trainer.evaluate"]
    assert container["args"] == ["--model-dir", "/model", "--source", "auto", "--heldout", "/data/heldout.csv",
                                 "--threshold", "0.6", "--termination-log"]
    assert container["env"] == []  # nothing of the spec's environment (a PYTHONPATH would replace the evaluator)
    assert all(m["readOnly"] for m in container["volumeMounts"])
    assert {v["name"] for v in podspec["volumes"]} == {"data", "model"}  # no code, no shards
    assert next(v for v in podspec["volumes"] if v["name"] == "model")["persistentVolumeClaim"]["readOnly"]
    assert "initContainers" not in podspec and "schedulingGates" not in podspec and "subdomain" not in podspec
    assert podspec["restartPolicy"] == "Never" and podspec["activeDeadlineSeconds"] == 900
    assert podspec["automountServiceAccountToken"] is False and podspec["enableServiceLinks"] is False
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_the_evaluation_image_is_the_deployments_or_the_one_the_dag_author_names():
    spec = parse_spec({"name": "ctr", "image": "form/chosen:1", "worker": 1,
                                "env": {"PYTHONPATH": "/data/evil"},
                                "pod_template": {"spec": {"containers": [{"name": "spy", "image": "form/spy:1"}]}}})
    names = evaluation_names(spec, "d", "r", "evaluate")
    policy = DeploymentPolicy(evaluation_image="registry.example.com/tfk8s/evaluator:7")
    pod = evaluation_pod(spec, names, model_dir="/m", heldout=["/h"], policy=policy)
    (container,) = pod["spec"]["containers"]  # no sidecar of the template
    assert container["image"] == "registry.example.com/tfk8s/evaluator:7" and container["env"] == []
    own = evaluation_pod(spec, names, model_dir="/m", heldout=["/h"], policy=policy, image="form/chosen:1")
    assert own["spec"]["containers"][0]["image"] == "form/chosen:1"
    assert DeploymentPolicy.from_env({"TFK8S_EVALUATION_IMAGE": "x/y:1"}).evaluation_image == "x/y:1"


def test_text_from_a_pod_is_made_printable():
    assert printable("ok\x1b[2J\x07 done\n", 100) == "ok?[2J? done\n"
    assert printable("x" * 10 + "tail", 4) == "tail"
