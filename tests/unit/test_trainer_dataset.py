"""Unit tests of the trainer's TensorFlow-free parts: dataset, state files, its command line, package import."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from tfk8s_airflow.pod import runtime
from tfk8s_airflow.pod.trainer import cli, dataset, state


def _digest(paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def test_generate_is_deterministic_and_seeded(tmp_path):
    a = dataset.generate(str(tmp_path / "a"), files=3, rows=50, seed=5, workers=2)
    b = dataset.generate(str(tmp_path / "b"), files=3, rows=50, seed=5)
    c = dataset.generate(str(tmp_path / "c"), files=3, rows=50, seed=6)
    files = lambda d: [*d["train_files"], d["heldout_file"]]  # noqa: E731
    assert _digest(files(a)) == _digest(files(b)) != _digest(files(c))
    assert len(set(_digest([f]) for f in a["train_files"])) == 3  # shards differ


def test_files_are_readable_and_carry_the_signal(tmp_path):
    desc = dataset.generate(str(tmp_path), files=2, rows=400, seed=1, heldout_rows=300)
    xs, ys = dataset.read_csv(desc["train_files"])
    assert len(xs) == len(ys) == 800 and len(xs[0]) == dataset.DEFAULT_FEATURES
    assert 0.4 < sum(ys) / len(ys) < 0.6  # balanced: chance is 0.5
    # The hidden rule itself scores near the Bayes accuracy.
    w = desc["weights"]
    hits = sum((sum(a * b for a, b in zip(x, w, strict=True)) > 0) == (y == 1.0) for x, y in zip(xs, ys, strict=True))
    assert hits / len(ys) > 0.85
    assert 0.9 < desc["bayes_accuracy"] < 0.92
    assert dataset.count_features(desc["heldout_file"]) == dataset.DEFAULT_FEATURES
    assert len(dataset.read_csv([desc["heldout_file"]])[1]) == 300


def test_shards_json_matches_runtime_layout(tmp_path):
    from tfk8s_airflow.pod import runtime

    desc = dataset.generate(str(tmp_path), files=5, rows=2, seed=0, workers=2)
    shards = runtime.all_shards({"TFK8S_SHARDS_FILE": desc["shards_file"]})
    assert sorted(shards) == ["worker-0", "worker-1"]
    assert sorted(shards["worker-0"] + shards["worker-1"]) == sorted(desc["train_files"])
    assert len(shards["worker-0"]) == 3


def test_read_csv_refuses_foreign_files(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a dataset CSV"):
        dataset.read_csv([str(bad)])


def test_cli(tmp_path, capsys):
    assert dataset.main(["--out", str(tmp_path), "--files", "2", "--rows", "10", "--seed", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["train_files"]) == 2
    assert (tmp_path / "dataset.json").exists() and (tmp_path / "heldout.csv").exists()


def test_run_recorder_keeps_restart_history(tmp_path):
    rec = state.RunRecorder(str(tmp_path), "worker-0", True, "tf1")
    rec.started(0)
    rec.progress(50, 0.5)
    rec2 = state.RunRecorder(str(tmp_path), "worker-0", True, "tf1")  # after a restart
    rec2.started(40)
    rec2.finished(100, 0.3)
    doc = state.read_json(str(tmp_path / "replicas" / "worker-0.json"))
    assert [r["start_step"] for r in doc["runs"]] == [0, 40]
    assert doc["runs"][0]["status"] == "running" and doc["runs"][1]["status"] == "finished"
    top = state.read_json(str(tmp_path / "train_state.json"))
    assert top["finished"] is True and top["start_step"] == 40 and top["final_step"] == 100
    rec2.finished(100, float("nan"))  # a replica that ran no step has no loss
    assert state.read_json(str(tmp_path / "train_state.json"))["loss"] is None


def test_trainer_package_imports_without_tensorflow_or_airflow():
    code = ("import sys; import tfk8s_airflow.pod.trainer, tfk8s_airflow.pod.trainer.dataset, "
            "tfk8s_airflow.pod.trainer.state, tfk8s_airflow.pod.trainer.cli; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'tensorflow')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_step_delay_and_log_cadence_come_from_the_flag_else_the_environment_else_the_default(monkeypatch):
    monkeypatch.delenv(cli.STEP_DELAY_ENV, raising=False)
    monkeypatch.delenv(cli.LOG_EVERY_ENV, raising=False)
    assert (cli._env_default("step_delay", None), cli._env_default("log_every", None)) == (0.0, 50)
    monkeypatch.setenv(cli.STEP_DELAY_ENV, "0.05")
    monkeypatch.setenv(cli.LOG_EVERY_ENV, "10")
    assert (cli._env_default("step_delay", None), cli._env_default("log_every", None)) == (0.05, 10)
    # The job's own flag wins over the deployment's environment.
    assert (cli._env_default("step_delay", 0.0), cli._env_default("log_every", 200)) == (0.0, 200)
    monkeypatch.setenv(cli.STEP_DELAY_ENV, "")
    assert cli._env_default("step_delay", None) == 0.0


@pytest.mark.parametrize(("flag", "env", "named"), [
    (["--step-delay", "-0.5"], {}, "--step-delay must be a number of seconds >= 0"),
    (["--step-delay", "nan"], {}, "--step-delay must be a number of seconds >= 0"),
    ([], {"TRAINER_STEP_DELAY": "fast"}, "$TRAINER_STEP_DELAY must be a number of seconds >= 0"),
    ([], {"TRAINER_STEP_DELAY": "-1"}, "$TRAINER_STEP_DELAY must be a number of seconds >= 0"),
    ([], {"TRAINER_STEP_DELAY": "inf"}, "$TRAINER_STEP_DELAY must be a number of seconds >= 0"),
    (["--log-every", "0"], {}, "--log-every must be a whole number of steps >= 1"),
    ([], {"TRAINER_LOG_EVERY": "2.5"}, "$TRAINER_LOG_EVERY must be a whole number of steps >= 1"),
    ([], {"TRAINER_LOG_EVERY": "-3"}, "$TRAINER_LOG_EVERY must be a whole number of steps >= 1")])
def test_a_bad_step_delay_or_log_cadence_fails_before_training_naming_where_it_came_from(tmp_path, monkeypatch,
                                                                                        capsys, flag, env, named):
    for name in (cli.STEP_DELAY_ENV, cli.LOG_EVERY_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["--mode", "tf1", "--model-dir", str(tmp_path / "model"), *flag]) == runtime.EXIT_PERMANENT
    said = capsys.readouterr()
    assert named in said.out + said.err
    assert not (tmp_path / "model").exists()  # refused before anything was written
