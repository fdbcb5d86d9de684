"""TF_CONFIG and legacy flags exactly as TFJob and the tensorflow/ecosystem template wrote them."""
import json

from tfk8s_airflow.job.builders.wiring import cluster_spec, legacy_flags, tf_config_dict, tf_config_json
from tfk8s_airflow.job.spec import parse_spec

BASE = {"name": "mnist", "image": "tfk8s/trainer:0.1", "namespace": "ml"}


def spec(**kw):
    return parse_spec({**BASE, **kw})


def test_tfjob_compatible_tf_config():
    s = spec(ps=2, worker=2, chief=1)
    cfg = json.loads(tf_config_json(s, "svc", "worker", 1))
    assert cfg == {
        "cluster": {
            "chief": ["chief-0.svc.ml.svc:2222"],
            "ps": ["ps-0.svc.ml.svc:2222", "ps-1.svc.ml.svc:2222"],
            "worker": ["worker-0.svc.ml.svc:2222", "worker-1.svc.ml.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert list(cfg["cluster"]) == ["chief", "ps", "worker"]


def test_port_and_empty_roles():
    s = spec(worker=1, port=3000)
    assert cluster_spec(s, "j") == {"worker": ["worker-0.j.ml.svc:3000"]}


def test_evaluator_visible_by_default_hidden_on_request():
    s = spec(ps=1, worker=1, evaluator=1)
    assert "evaluator" in tf_config_dict(s, "j", "worker", 0)["cluster"]
    hidden = spec(ps=1, worker=1, evaluator=1, hide_evaluator=True)
    for role, idx in (("worker", 0), ("ps", 0), ("evaluator", 0)):
        cfg = tf_config_dict(hidden, "j", role, idx)
        assert "evaluator" not in cfg["cluster"]
        assert cfg["task"] == {"type": role, "index": idx}


def test_legacy_flags():
    s = spec(ps=2, worker=3)
    assert legacy_flags(s, "j", "worker", 2) == [
        "--ps_hosts=ps-0.j.ml.svc:2222,ps-1.j.ml.svc:2222",
        "--worker_hosts=worker-0.j.ml.svc:2222,worker-1.j.ml.svc:2222,worker-2.j.ml.svc:2222",
        "--job_name=worker", "--task_index=2",
    ]
    assert legacy_flags(spec(ps=1, worker=1, chief=1), "j", "chief", 0)[0] == "--chief_hosts=chief-0.j.ml.svc:2222"
