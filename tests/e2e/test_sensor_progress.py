"""How far a real TensorFlow job is, in the sensor's task log (scheduler + triggerer on PostgreSQL).

``tfk8s_rp_tf1`` (tests/dags: 1 PS, 2 workers, the reference trainer on the real node, a progress
line every 10 local steps) runs through the REST API; its sensor runs in the triggerer beside the
replica tasks, as in a deployment, and its task log is read through the REST API as the UI shows
it. ``step_delay`` keeps the job running for about 100 s at little CPU: a fresh triggerer's first
triggers have been seen to start up to a minute late, and the sensor can only say what it sees
while the job runs.

Not under ``dag.test()``: there the tasks run one at a time, so the sensor's trigger starts only
after the replica tasks' triggers ended with the job, and its log has no progress lines.
"""
from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e._support import E2E_MARKS, env_root, leftovers, task_states, wait_gone

pytestmark = [*E2E_MARKS, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "tfk8s_rp_tf1"
#: Each worker reports every 50 of its steps (the trainer's --log-every): at STEP_DELAY a step, about every
#: 10 s, so the sensor's 2 s polls see four or five progress lines in a job of some 40 s.
STEPS = 400
STEP_DELAY = 0.2
#: The sensor's progress line (tfk8s_airflow.triggers.job): "TF job <job>: <counts>; step 120/400, loss 0.41, ...".
PROGRESS_LINE = re.compile(r"TF job (?P<job>[a-z0-9-]+): [^;\n]*; step (?P<step>\d+)(?:/(?P<target>\d+))?"
                           r"(?:, loss (?P<loss>[^,;\n]+))?")


def dataset(out: Path) -> dict[str, list[str]]:
    """Synthetic training files for 2 workers; their shard lists as the pods see them."""
    sys.path.insert(0, str(REPO / "tests" / "dags"))
    from tfk8s_realpod_scenarios import DATA  # noqa: PLC0415 - the scenarios' mount point

    subprocess.run([sys.executable, "-m", "tfk8s_airflow.pod.trainer.dataset", "--out", str(out), "--files", "4",
                    "--rows", "1000", "--seed", "7", "--workers", "2"], check=True, timeout=120)
    host = json.loads((out / "shards.json").read_text())
    return {key: [f"{DATA}/{Path(p).name}" for p in files] for key, files in host.items()}


def assert_the_sensor_showed_progress(log: str, summary: dict, target: int) -> dict:
    """The sensor's task log tells how far training is: global steps that only grow, with the
    chief's loss; its XCom summary keeps that history, bounded, up to the end. Returns the numbers."""
    from tfk8s_airflow.k8s.watch import HISTORY

    lines = [m for m in PROGRESS_LINE.finditer(log) if m["job"] == summary["job"]]
    steps = [int(m["step"]) for m in lines]
    assert len(lines) >= 3, ("fewer than 3 progress lines in the sensor's log", log[-5000:])
    # Strictly increasing, but for a line that repeats the step because the replica counts on it changed
    # (a worker that ended in the poll before the chief's success was judged): never a copy of the line before.
    assert all(b > a or (b == a and y[0] != x[0])
               for (a, x), (b, y) in itertools.pairwise(zip(steps, lines, strict=True))), [m[0] for m in lines]
    # A step read from the chief's checkpoint file, when it is newer than its last progress line,
    # comes without the line's target, loss and rate; the lines that have them have the job's.
    assert lines[-1]["target"] == str(target) and all(m["target"] in (None, str(target)) for m in lines), \
        [m[0] for m in lines]
    losses = [float(m["loss"]) for m in lines if m["loss"]]
    assert len(losses) >= 1 and all(math.isfinite(x) and x > 0 for x in losses), [m[0] for m in lines]
    progress = summary["progress"]
    history = [point["step"] for point in progress["history"]]
    assert len(set(steps)) <= len(history) <= HISTORY, history
    assert all(b > a for a, b in zip(history, history[1:], strict=False)), history
    assert set(steps) <= set(history), (steps, history)  # every logged step is in the history
    assert history[-1] >= 0.9 * target and progress["step"] == history[-1], (history, progress["step"])
    assert any(point["loss"] is not None for point in progress["history"]), progress["history"]
    return {"progress_lines": len(lines), "with_loss": len(losses), "steps": steps, "history_points": len(history),
            "history_last": history[-1]}


def test_the_sensors_log_shows_the_steps_grow_with_a_loss(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core = airflow_stack, k8s_cluster.core_v1
    root = env_root(stack) / "sensor-progress"  # on the volume: the deployment's policy allows it
    (root / "model").mkdir(parents=True)
    conf = {"namespace": k8s_namespace, "data_dir": str(root / "data"), "model_dir": str(root / "model"),
            "shards": dataset(root / "data"), "steps": STEPS, "step_delay": STEP_DELAY}
    t0 = time.monotonic()
    resp = stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns"), json={"logical_date": None, "conf": conf},
                          timeout=60)
    assert resp.status_code in (200, 201), resp.text
    run_id = resp.json()["dag_run_id"]
    (done,) = stack.wait_for_runs(DAG_ID, [run_id], timeout=600)
    elapsed = time.monotonic() - t0
    assert done["state"] == "success", task_states(stack, DAG_ID, run_id)
    summary = stack.xcom(DAG_ID, run_id, "train.wait", "summary")
    shown = assert_the_sensor_showed_progress(stack.task_log(DAG_ID, run_id, "train.wait"), summary, STEPS)
    print(f"sensor progress ({elapsed:.0f}s): {json.dumps(shown)}")
    assert stack.xcom(DAG_ID, run_id, "evaluate")["accuracy"] >= 0.8
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)
