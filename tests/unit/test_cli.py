"""The tfk8s command, run as a user runs it (a subprocess of the installed console script)."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MNIST = str(ROOT / "examples" / "mnist.yaml")


def tfk8s(*args, check=False):
    exe = Path(sys.executable).with_name("tfk8s")
    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-m", "tfk8s_airflow.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)


def test_validate_ok_and_errors(tmp_path):
    ok = tfk8s("validate", MNIST)
    assert ok.returncode == 0 and "3 replicas" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: mnist\nimage: tfk8s/trainer:0.1\nworkers: {replicas: 2}\nport: 0\n")
    res = tfk8s("validate", str(bad))
    assert res.returncode == 1
    assert "workers: unknown key (fix: did you mean 'worker'?)" in res.stderr
    assert "port: must be between 1 and 65535" in res.stderr
    assert "worker: is required" in res.stderr


def test_render_multi_document_yaml_with_overrides():
    res = tfk8s("render", MNIST, "--set", "worker.replicas=3", "--run-id", "r1", check=True)
    docs = list(yaml.safe_load_all(res.stdout))
    assert [d["kind"] for d in docs] == ["Service", "Pod", "Pod", "Pod", "Pod"]
    assert docs[-1]["spec"]["hostname"] == "worker-2"
    other = list(yaml.safe_load_all(tfk8s("render", MNIST, "--run-id", "r2", check=True).stdout))
    assert other[0]["metadata"]["name"] != docs[0]["metadata"]["name"]


def test_render_with_shards_and_custom_template(tmp_path):
    shards = tmp_path / "shards.json"
    shards.write_text(json.dumps({"worker-0": ["a"], "worker-1": ["b"]}))
    res = tfk8s("render", MNIST, "--shards", str(shards), check=True)
    assert "ConfigMap" in [d["kind"] for d in yaml.safe_load_all(res.stdout)]
    tpl = tmp_path / "mine.yaml.jinja"
    tpl.write_text("{% for r in replicas %}---\nkind: Pod\nmetadata: {name: {{ r.pod_name }}}\n{% endfor %}")
    res = tfk8s("render", MNIST, "--template", str(tpl), check=True)
    assert len(list(yaml.safe_load_all(res.stdout))) == 3
    typo = tmp_path / "typo.yaml.jinja"
    typo.write_text("name: {{ replica.pod_nme }}\n")
    res = tfk8s("render", MNIST, "--template", str(typo))
    assert res.returncode == 1 and "typo.yaml.jinja" in res.stderr and "undefined" in res.stderr
    broken = tmp_path / "broken.yaml.jinja"
    broken.write_text("a: [unclosed\n")
    res = tfk8s("render", MNIST, "--template", str(broken))
    assert res.returncode == 1 and "invalid YAML" in res.stderr


def test_tf_config_command():
    res = tfk8s("tf-config", MNIST, "--role", "worker", "--index", "1", check=True)
    cfg = json.loads(res.stdout)
    assert cfg["task"] == {"type": "worker", "index": 1} and cfg["environment"] == "cloud"
    out_of_range = tfk8s("tf-config", MNIST, "--role", "worker", "--index", "5")
    assert out_of_range.returncode == 1 and "--index 5 is out of range" in out_of_range.stderr
    assert tfk8s("tf-config", MNIST, "--role", "master").returncode == 2


def test_max_replicas_flag_and_env(tmp_path):
    res = tfk8s("validate", MNIST, "--set", "worker.replicas=600")
    assert res.returncode == 1 and "maximum 512" in res.stderr
    assert tfk8s("validate", MNIST, "--set", "worker.replicas=600", "--max-replicas", "1000").returncode == 0
