"""Real distributed TensorFlow jobs on loopback: the reference trainer and a TFJob-style program.

Each replica is a local process with the TF_CONFIG a pod would get (127.0.0.1 + free
ports). Every test kills all of its processes in ``finally`` (PS and TF2 workers never
exit by themselves). Run with the ``tf`` extra installed, e.g.
``PYTHONPATH=. /var/tmp/tfk8s-tf-venv/bin/python -m pytest -m tf tests/tf``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
import tensorflow as tf  # noqa: E402,F401  the tf extra (make test installs it); missing = a failure, never a skip

from tests.fixtures.waiting import wait_until  # noqa: E402
from tests.tf.localjob import LocalJob, free_port, trainer_command  # noqa: E402
from tfk8s_airflow.exceptions import MetricBelowThresholdError, ModelMissingError  # noqa: E402
from tfk8s_airflow.pod import runtime  # noqa: E402
from tfk8s_airflow.pod.trainer.dataset import generate  # noqa: E402
from tfk8s_airflow.pod.trainer.evaluate import evaluate  # noqa: E402
from tfk8s_airflow.pod.trainer.state import read_json  # noqa: E402

pytestmark = pytest.mark.tf

CHANCE = 0.5
GOOD = 0.8  # the data's Bayes accuracy is ~0.91; chance is 0.5
PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("data")
    return generate(str(out), files=4, rows=1000, seed=7, workers=2)


def _env(dataset: dict) -> dict[str, str]:
    return {"TFK8S_SHARDS_FILE": dataset["shards_file"]}


def _replica(model_dir: Path, key: str) -> dict:
    return read_json(str(model_dir / "replicas" / f"{key}.json"), {}) or {}


def _last_step(model_dir: Path, key: str) -> int:
    runs = _replica(model_dir, key).get("runs") or [{}]
    return int(runs[-1].get("last_step") or 0)


def scalars(summary_dir: Path, tag: str) -> list[tuple[int, float, str]]:
    """(step, value, event file name) of every ``tag`` scalar in the TensorBoard event files of a directory,
    read with TensorFlow's own event reader (TF1 writes simple values, TF2 tensors)."""
    out = []
    for path in sorted(summary_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == tag:
                    number = value.simple_value if value.HasField("simple_value") else float(
                        tf.make_ndarray(value.tensor))
                    out.append((event.step, number, path.name))
    return out


def assert_chief_curve(model_dir: Path, writer_pid: int, last_step: int) -> None:
    """The summaries a TensorBoard of the job shows: loss and examples/s at increasing global steps,
    written under <model dir>/train by the chief alone: one event file (TF2's file names also hold
    the writer's pid)."""
    loss = scalars(model_dir / "train", "loss")
    steps = [step for step, _value, _file in loss]
    assert len(steps) >= 2 and steps == sorted(set(steps)), steps
    assert 0 < steps[-1] <= last_step and all(v == v and v > 0 for _s, v, _f in loss), loss
    files = {f for _s, _v, f in loss}
    assert len(files) == 1 and sorted(p.name for p in (model_dir / "train").iterdir()) == sorted(files), files
    pid = re.search(r"\.(\d+)\.\d+\.v2$", next(iter(files)))
    assert pid is None or pid.group(1) == str(writer_pid), files
    rates = scalars(model_dir / "train", "examples_per_sec")
    assert [s for s, _v, _f in rates] == steps and all(v > 0 for _s, v, _f in rates)


def _report(name: str, seconds: float, **values) -> None:
    print(f"\n[{name}] {seconds:.1f}s " + json.dumps(values), file=sys.stderr)


def test_tf1_async_ps_training(tmp_path, dataset):
    model_dir = tmp_path / "model"
    job = LocalJob(tmp_path, {"ps": 1, "worker": 2}, trainer_command(
        "--mode", "tf1", "--model-dir", str(model_dir), "--steps", "400", "--step-delay", "0.01",
        "--heldout", dataset["heldout_file"], "--peer-timeout", "60"), env=_env(dataset))
    t0 = time.monotonic()
    try:
        job.start_all()
        assert job.wait("worker-0", 180) == 0, job.logs()
        assert job.wait("worker-1", 60) == 0, job.logs()
        assert job.procs["ps-0"].poll() is None, "a PS must keep serving until it is killed"
    finally:
        job.stop()
    assert_chief_curve(model_dir, job.procs["worker-0"].pid, 405)  # worker 0 is the chief (no chief role)
    elapsed = time.monotonic() - t0
    result = evaluate(str(model_dir), [dataset["heldout_file"]])
    _report("tf1", elapsed, **result)
    assert result["accuracy"] >= GOOD > CHANCE
    assert result["examples"] == 1000 and result["global_step"] >= 400
    assert result["source"] == "saved_model"
    from_ckpt = evaluate(str(model_dir), [dataset["heldout_file"]], source="checkpoint")
    assert from_ckpt["accuracy"] == pytest.approx(result["accuracy"], abs=0.01)
    metrics = read_json(str(model_dir / "metrics.json"))
    # From scratch: below the first checkpoint, not necessarily 0 (worker 1 may step before the chief does).
    assert metrics["mode"] == "tf1" and metrics["start_step"] < 50
    assert metrics["heldout"]["accuracy"] >= GOOD
    # Both workers trained (async: the global steps are shared between them).
    runs = [_replica(model_dir, key)["runs"][-1] for key in ("worker-0", "worker-1")]
    assert all(r["status"] == "finished" and r["local_steps"] > 0 for r in runs), runs
    assert sum(r["local_steps"] for r in runs) >= 400
    with pytest.raises(MetricBelowThresholdError, match="accuracy .* below the threshold 0.9990"):
        evaluate(str(model_dir), [dataset["heldout_file"]], threshold=0.999)


def test_tf2_parameter_server_strategy_with_evaluator(tmp_path, dataset):
    """Chief + PS + 2 workers + an evaluator that is in everyone's cluster spec: the chief
    leaves it out of its coordinator's cluster (else it would wait for it forever), and the
    evaluator follows the checkpoints and exits 0 after evaluating the final model."""
    model_dir = tmp_path / "model"
    job = LocalJob(tmp_path, {"chief": 1, "ps": 1, "worker": 2, "evaluator": 1}, trainer_command(
        "--mode", "tf2", "--model-dir", str(model_dir), "--steps", "400",
        "--checkpoint-every", "100", "--heldout", dataset["heldout_file"],
        "--peer-timeout", "60", "--eval-poll", "0.5", "--eval-timeout", "240",
        "--threshold", str(GOOD)), env=_env(dataset),
        hidden_roles=())  # every replica sees the evaluator, as TFJob writes it by default
    t0 = time.monotonic()
    try:
        job.start_all()
        assert job.wait("chief-0", 240) == 0, job.logs()
        chief_done = time.monotonic() - t0
        assert job.wait("evaluator-0", 120) == 0, job.logs()
        for key in ("ps-0", "worker-0", "worker-1"):
            assert job.procs[key].poll() is None, f"{key} (untracked server) exited by itself"
    finally:
        job.stop()
    assert_chief_curve(model_dir, job.procs["chief-0"].pid, 400)
    result = evaluate(str(model_dir), [dataset["heldout_file"]])
    _report("tf2", chief_done, **result)
    assert result["accuracy"] >= GOOD and result["global_step"] == 400
    metrics = read_json(str(model_dir / "metrics.json"))
    assert metrics["mode"] == "tf2" and metrics["final_step"] == 400
    evaluation = read_json(str(model_dir / "eval.json"))
    assert evaluation["final"]["accuracy"] == pytest.approx(result["accuracy"])
    assert evaluation["final"]["global_step"] == 400


def test_tf1_killed_workers_resume(tmp_path, dataset):
    """Kill the chief worker (resumes from its checkpoint) and worker 1 (resumes from the
    PS's global step) mid-training; both restart in place and the job finishes."""
    model_dir = tmp_path / "model"
    steps = 800
    job = LocalJob(tmp_path, {"ps": 1, "worker": 2}, trainer_command(
        "--mode", "tf1", "--model-dir", str(model_dir), "--steps", str(steps),
        "--checkpoint-every", "50", "--log-every", "10", "--step-delay", "0.02",
        "--heldout", dataset["heldout_file"], "--peer-timeout", "60"), env=_env(dataset))
    t0 = time.monotonic()
    try:
        job.start_all()
        wait_until(lambda: export_step(model_dir) >= 150, 180, "a checkpoint at step >= 150",
                   on_fail=job.logs)
        killed_at = _last_step(model_dir, "worker-0")
        job.kill("worker-0")
        job.kill("worker-1")
        ckpt_step = export_step(model_dir)
        job.start("worker-1")
        job.start("worker-0")
        assert job.wait("worker-0", 240) == 0, job.logs()
        assert job.wait("worker-1", 60) == 0, job.logs()
    finally:
        job.stop()
    elapsed = time.monotonic() - t0
    chief_runs = _replica(model_dir, "worker-0")["runs"]
    other_runs = _replica(model_dir, "worker-1")["runs"]
    result = evaluate(str(model_dir), [dataset["heldout_file"]])
    _report("tf1-restart", elapsed, killed_at=killed_at, checkpoint=ckpt_step,
            chief_starts=[r["start_step"] for r in chief_runs],
            worker1_starts=[r["start_step"] for r in other_runs], **result)
    assert len(chief_runs) == 2 and len(other_runs) == 2
    # The chief's first run began from scratch: the global step it first saw is below the first checkpoint
    # (step 50). Not necessarily 0: worker 1 may take a few asynchronous steps between the chief's
    # initialisation of the variables and its own first step.
    assert chief_runs[0]["start_step"] < 50
    assert chief_runs[1]["start_step"] >= ckpt_step >= 150  # restored, not restarted at 0
    assert other_runs[1]["start_step"] > 0
    assert chief_runs[1]["status"] == "finished" and chief_runs[1]["final_step"] >= steps
    assert result["accuracy"] >= GOOD and result["global_step"] >= steps


def export_step(model_dir: Path) -> int:
    """Step of the latest checkpoint in ``model_dir`` (0 if none)."""
    path = tf.train.latest_checkpoint(str(model_dir)) if model_dir.is_dir() else None
    return int(path.rsplit("-", 1)[1]) if path else 0


def test_tf2_killed_worker_and_chief_resume(tmp_path, dataset):
    """A TF2 worker killed and restarted is absorbed by the coordinator; a chief killed and
    restarted resumes from its latest checkpoint (global step continues)."""
    model_dir = tmp_path / "model"
    steps = 600
    job = LocalJob(tmp_path, {"chief": 1, "ps": 1, "worker": 2}, trainer_command(
        "--mode", "tf2", "--model-dir", str(model_dir), "--steps", str(steps),
        "--checkpoint-every", "50", "--step-delay", "0.02", "--peer-timeout", "60"),
        env=_env(dataset))
    t0 = time.monotonic()
    try:
        job.start_all()
        wait_until(lambda: _last_step(model_dir, "chief-0") >= 150, 180, "chief step >= 150",
                   on_fail=job.logs)
        job.kill("worker-1")
        job.start("worker-1")
        wait_until(lambda: _last_step(model_dir, "chief-0") >= 300, 180, "chief step >= 300",
                   on_fail=job.logs)
        job.kill("chief-0")
        ckpt_step = export_step(model_dir)
        job.start("chief-0")
        assert job.wait("chief-0", 240) == 0, job.logs()
    finally:
        job.stop()
    elapsed = time.monotonic() - t0
    runs = _replica(model_dir, "chief-0")["runs"]
    result = evaluate(str(model_dir), [dataset["heldout_file"]])
    _report("tf2-restart", elapsed, checkpoint=ckpt_step,
            chief_starts=[r["start_step"] for r in runs], **result)
    assert [r["start_step"] for r in runs][0] == 0 and len(runs) == 2
    assert runs[1]["start_step"] == ckpt_step >= 300
    assert runs[1]["final_step"] == steps
    assert result["accuracy"] >= GOOD and result["global_step"] == steps


def test_tf1_late_worker_after_chief_finished_does_not_hang(tmp_path, dataset):
    """Worker 1 starts only after worker 0 (the chief) has trained to the end and exited.
    Its session sees only the PS and itself (device filters), so it does not wait for the
    departed chief: it sees the final global step and exits 0 at once."""
    model_dir = tmp_path / "model"
    job = LocalJob(tmp_path, {"ps": 1, "worker": 2}, trainer_command(
        "--mode", "tf1", "--model-dir", str(model_dir), "--steps", "200",
        "--peer-timeout", "60"), env=_env(dataset))
    t0 = time.monotonic()
    try:
        job.start("ps-0")
        job.start("worker-0")
        assert job.wait("worker-0", 180) == 0, job.logs()
        late = time.monotonic()
        job.start("worker-1")
        assert job.wait("worker-1", 60) == 0, job.logs()
        late_s = time.monotonic() - late
    finally:
        job.stop()
    run = _replica(model_dir, "worker-1")["runs"][-1]
    _report("tf1-late-worker", time.monotonic() - t0, late_worker_s=round(late_s, 1), **run)
    assert run["start_step"] >= 200 and run["status"] == "finished"
    assert late_s < 45


def test_worker_fails_fast_naming_missing_peer(tmp_path, dataset):
    """No PS ever appears: the worker gives up within its bounded wait, names the peer and
    exits with the retryable code. Uses the legacy flags instead of TF_CONFIG."""
    ps_port, worker_port = free_port(), free_port()
    job = LocalJob(tmp_path, {"worker": 1}, trainer_command(
        "--mode", "tf1", "--model-dir", str(tmp_path / "model"), "--peer-timeout", "3",
        "--ps_hosts", f"127.0.0.1:{ps_port}", "--worker_hosts", f"127.0.0.1:{worker_port}",
        "--job_name", "worker", "--task_index", "0"), env=_env(dataset))
    job.env["TF_CONFIG"] = ""
    t0 = time.monotonic()
    try:
        job.start("worker-0")
        code = job.wait("worker-0", 90)
    finally:
        job.stop()
    elapsed = time.monotonic() - t0
    log = job.log("worker-0")
    _report("peer-timeout", elapsed, exit_code=code)
    assert code == runtime.EXIT_RETRYABLE, log
    assert f"ps-0 (127.0.0.1:{ps_port}): connect failed" in log
    assert "PeerTimeoutError" in log


def test_evaluate_missing_model(tmp_path, dataset):
    with pytest.raises(ModelMissingError, match="no trained model"):
        evaluate(str(tmp_path / "empty"), [dataset["heldout_file"]])


def test_tfjob_style_program_runs_unchanged(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    job = LocalJob(tmp_path, {"ps": 1, "worker": 2}, [
        sys.executable, str(PROGRAMS / "tfjob_style.py"), "--steps", "300", "--out", str(out)])
    t0 = time.monotonic()
    try:
        job.start_all()
        assert job.wait("worker-0", 180) == 0, job.logs()
        assert job.wait("worker-1", 60) == 0, job.logs()
    finally:
        job.stop()
    chief = json.loads((out / "worker-0.json").read_text())
    _report("tfjob-style", time.monotonic() - t0, **chief)
    # Asynchronous training: the chief's last read of the global step can trail the final
    # count by a few steps that other workers applied after it; it must be near the target.
    assert chief["chief"] is True and chief["step"] >= 280
    assert chief["accuracy"] >= GOOD
