"""The tfk8s command, run as a user runs it (a subprocess of the installed console script)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MNIST = str(ROOT / "examples" / "mnist.yaml")


def tfk8s(*args, check=False, env=None):
    exe = Path(sys.executable).with_name("tfk8s")
    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-m", "tfk8s_airflow.cli", *args]
    # None of the machine's deployment settings: no TFK8S_*, no AIRFLOW__TFK8S__*, no airflow.cfg.
    mine = {k: val for k, val in os.environ.items()
            if not k.startswith(("TFK8S_", "AIRFLOW__TFK8S__")) and k not in ("AIRFLOW_CONFIG", "AIRFLOW_HOME")}
    full_env = mine | {"AIRFLOW_HOME": os.devnull + ".absent"} | (env or {})
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60, env=full_env)


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
    assert [d["kind"] for d in docs] == ["Service", "ConfigMap", "NetworkPolicy", "Pod", "Pod", "Pod", "Pod"]
    assert docs[-1]["spec"]["hostname"] == "worker-2"
    assert docs[-1]["spec"]["schedulingGates"] == [{"name": "tfk8s.io/gang"}]
    assert {k: docs[-1]["metadata"]["labels"][k] for k in ("task_id", "run_id", "map_index")} == {
        "task_id": "replica", "run_id": "r1", "map_index": "3"}
    grouped = list(yaml.safe_load_all(tfk8s("render", MNIST, "--group", "train", "--dag-id", "d", check=True).stdout))
    assert {d["metadata"]["labels"]["task_id"] for d in grouped if d["kind"] == "Pod"} == {"train.replica"}
    assert {d["metadata"]["labels"]["dag_id"] for d in grouped if d["kind"] == "Pod"} == {"d"}
    other = list(yaml.safe_load_all(tfk8s("render", MNIST, "--run-id", "r2", check=True).stdout))
    assert other[0]["metadata"]["name"] != docs[0]["metadata"]["name"]


def test_render_with_shards_and_custom_template(tmp_path):
    shards = tmp_path / "shards.json"
    shards.write_text(json.dumps({"worker-0": ["a"], "worker-1": ["b"]}))
    res = tfk8s("render", MNIST, "--shards", str(shards), check=True)
    assert [d["kind"] for d in yaml.safe_load_all(res.stdout)].count("ConfigMap") == 2  # the shards', the pods'
    tpl = tmp_path / "mine.yaml.jinja"
    tpl.write_text("{% for o in objects if o.kind == 'Pod' %}---\nkind: Pod\nmetadata: {name: {{ o.metadata.name }}}\n"
                   "{% endfor %}---\nkind: Note\njob: {{ names.job | json }}\nreplicas: {{ plan.replicas | length }}\n"
                   "spec: {{ spec.name | json }}\n")
    res = tfk8s("render", MNIST, "--template", str(tpl), check=True)
    docs = list(yaml.safe_load_all(res.stdout))
    assert [d["kind"] for d in docs] == ["Pod", "Pod", "Pod", "Note"]
    assert docs[-1]["replicas"] == 3 and docs[-1]["spec"] == "mnist" and docs[0]["metadata"]["name"].startswith(
        docs[-1]["job"])
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


def test_validate_and_render_apply_the_deployment_policy_from_the_environment():
    full = str(ROOT / "examples" / "full.yaml")
    refused = tfk8s("validate", full)
    assert refused.returncode == 1
    assert "service_account: tf-trainer is not among the allowed ServiceAccounts" in refused.stderr
    assert "[tfk8s] allowed_service_accounts" in refused.stderr
    policy = {"TFK8S_ALLOWED_SERVICE_ACCOUNTS": "tf-trainer", "TFK8S_RUN_AS_NON_ROOT": "true",
              "TFK8S_DEFAULT_ACTIVE_DEADLINE": "3h"}
    assert tfk8s("validate", full, env=policy).returncode == 0
    pods = [d for d in yaml.safe_load_all(tfk8s("render", MNIST, env=policy, check=True).stdout) if d["kind"] == "Pod"]
    assert all(p["spec"]["securityContext"]["runAsNonRoot"] is True for p in pods)
    assert all(p["spec"]["activeDeadlineSeconds"] == 10800 for p in pods)
    outside = tfk8s("render", MNIST, "--set", "volumes=[{name: host, mount_path: /host, host_path: /}]")
    assert outside.returncode == 1 and "volumes[0].host_path: / is the node's whole file system" in outside.stderr
    bad_setting = tfk8s("validate", MNIST, env={"TFK8S_ALLOWED_HOST_PATHS": "relative/path"})
    assert bad_setting.returncode == 1 and "[tfk8s] allowed_host_paths: must be an absolute path" in bad_setting.stderr


def test_templates_are_sandboxed(tmp_path):
    for expr in ("spec.to_dict.__globals__", "cycler.__init__.__globals__.os", "names.__class__.__mro__",
                 "plan.owned.__globals__"):
        tpl = tmp_path / "escape.yaml.jinja"
        tpl.write_text("x: {{ " + expr + " }}\n")
        res = tfk8s("render", MNIST, "--template", str(tpl))
        assert res.returncode == 1 and "unsafe" in res.stderr, (expr, res.stdout[:300], res.stderr[-500:])
        assert res.stdout == ""


def test_render_output_always_parses_whatever_the_spec_holds(tmp_path):
    odd = "a\x85b\u2028c\u2029d\x7fe\x9bf\ufeffg\U0001F600 \"quoted\" back\\slash"
    spec = tmp_path / "odd.json"
    spec.write_text(json.dumps({"name": "odd", "image": "tfk8s/trainer:0.1", "worker": 1, "args": [odd],
                                "env": {"ODD": odd}, "annotations": {"example.com/odd": odd}}))
    res = tfk8s("render", str(spec), check=True)
    pod = [d for d in yaml.safe_load_all(res.stdout) if d["kind"] == "Pod"][0]
    container = pod["spec"]["containers"][0]
    assert container["args"] == [odd] and pod["metadata"]["annotations"]["example.com/odd"] == odd
    assert {e["name"]: e.get("value") for e in container["env"]}["ODD"] == odd
    raw = tmp_path / "raw.yaml.jinja"  # a custom template that does not quote: refused, never printed
    raw.write_text("{% for p in plan.pods %}---\nkind: Pod\nnote: {{ p.metadata.annotations['example.com/odd'] }}\n"
                   "{% endfor %}")
    res = tfk8s("render", str(spec), "--template", str(raw))
    assert res.returncode == 1 and "invalid YAML" in res.stderr and res.stdout == ""


def test_bad_shards_files_are_clear_errors(tmp_path):
    cases = {"not json": "is not valid JSON", "[1, 2]": "must be a mapping",
             '{"worker-0": "/data/part-0"}': "worker-0: must be a list of paths, got str",
             '{"worker-0": [1]}': "worker-0[0]: every path must be a non-empty string"}
    for text, message in cases.items():
        path = tmp_path / "shards.json"
        path.write_text(text)
        res = tfk8s("render", MNIST, "--shards", str(path))
        assert res.returncode == 1 and message in res.stderr and "Traceback" not in res.stderr, res.stderr
    missing = tfk8s("render", MNIST, "--shards", str(tmp_path / "none.json"))
    assert missing.returncode == 1 and "cannot read it" in missing.stderr
    big = tmp_path / "big.json"  # 20,000 files: more than a ConfigMap holds
    big.write_text(json.dumps({f"worker-{w}": [f"/mnt/tfk8s-gluster/tfk8s/cache/clicks/dt=2026-01-01/part-{i:06d}.csv"
                                              for i in range(w, 20_000, 2)] for w in range(2)}))
    res = tfk8s("render", MNIST, "--shards", str(big))
    assert res.returncode == 1 and "more than a ConfigMap holds (1048576 bytes)" in res.stderr


SECRETS = str(ROOT / "examples" / "secrets.yaml")
REFUSED = "Secret db is not among the allowed secrets (none)"


def test_validate_reads_the_deployments_airflow_cfg(tmp_path):
    """`[tfk8s] allowed_secrets` in the airflow.cfg Airflow reads ($AIRFLOW_HOME, or $AIRFLOW_CONFIG)."""
    refused = tfk8s("validate", SECRETS)
    assert refused.returncode == 1 and REFUSED in refused.stderr
    home = tmp_path / "home"
    home.mkdir()
    (home / "airflow.cfg").write_text("[core]\ndags_folder = {AIRFLOW_HOME}/dags\nfernet_key = a%%b\n\n"
                                      "[tfk8s]\nallowed_secrets = db, registry-creds\n")
    by_home = tfk8s("validate", SECRETS, env={"AIRFLOW_HOME": str(home)})
    assert by_home.returncode == 0, by_home.stderr
    assert "ok (3 replicas" in by_home.stdout
    elsewhere = tmp_path / "deploy.cfg"
    elsewhere.write_text("[tfk8s]\nallowed_secrets = registry-creds\n")
    only_one = tfk8s("validate", SECRETS, env={"AIRFLOW_HOME": str(home), "AIRFLOW_CONFIG": str(elsewhere)})
    assert only_one.returncode == 1 and REFUSED.replace("(none)", "(registry-creds)") in only_one.stderr


def test_validate_reads_airflow_variables_over_the_file_and_tfk8s_variables(tmp_path):
    allowed = tfk8s("validate", SECRETS, env={"AIRFLOW__TFK8S__ALLOWED_SECRETS": "db,registry-creds"})
    assert allowed.returncode == 0, allowed.stderr
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text("[tfk8s]\nallowed_secrets = db,registry-creds\n")
    # Airflow's order: its variable over its file, both over this package's own TFK8S_* variable.
    over_file = tfk8s("validate", SECRETS, env={"AIRFLOW_CONFIG": str(cfg),
                                                "AIRFLOW__TFK8S__ALLOWED_SECRETS": "registry-creds"})
    assert over_file.returncode == 1 and "Secret db is not among the allowed secrets" in over_file.stderr
    over_tfk8s = tfk8s("validate", SECRETS, env={"AIRFLOW_CONFIG": str(cfg), "TFK8S_ALLOWED_SECRETS": "none-such"})
    assert over_tfk8s.returncode == 0, over_tfk8s.stderr
    fallback = tfk8s("validate", SECRETS, env={"TFK8S_ALLOWED_SECRETS": "*"})
    assert fallback.returncode == 0, fallback.stderr


def test_the_defaults_airflow_writes_into_its_generated_cfg_do_not_hide_tfk8s_variables(tmp_path):
    """Airflow writes every provider setting with its default into the airflow.cfg it generates
    (`default_namespace = default`, ...): such a value counts as unset, as on the Airflow side, so
    TFK8S_<NAME> still decides; a value that is not the default still wins over it."""
    from tfk8s_airflow.configspec import declared
    from tfk8s_airflow.job.policy import DeploymentPolicy

    cfg = tmp_path / "airflow.cfg"
    cfg.write_text("[tfk8s]\n" + "".join(f"{s.name} = {s.value}\n" for s in declared(DeploymentPolicy)
                                         if s.value is not None))
    assert "default_namespace = default" in cfg.read_text()
    # Plain Secret names are allowed in the deployment's default namespace, which the variable names.
    env = {"AIRFLOW_CONFIG": str(cfg), "TFK8S_ALLOWED_SECRETS": "db,registry-creds", "TFK8S_DEFAULT_NAMESPACE": "ml"}
    res = tfk8s("validate", SECRETS, "--set", "namespace=ml", env=env)
    assert res.returncode == 0, res.stderr
    cfg.write_text(cfg.read_text().replace("default_namespace = default", "default_namespace = other"))
    res = tfk8s("validate", SECRETS, "--set", "namespace=ml", env=env)
    assert res.returncode == 1 and "Secret db" in res.stderr


def test_an_unreadable_airflow_cfg_is_named(tmp_path):
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text("[tfk8s\nallowed_secrets = db\n")
    res = tfk8s("validate", SECRETS, env={"AIRFLOW_CONFIG": str(cfg)})
    assert res.returncode == 1
    assert f"{cfg}: Airflow's configuration cannot be read" in res.stderr and "AIRFLOW_CONFIG" in res.stderr
