"""Recovery with real TensorFlow on the devstack's real node: real faults, real programs (docs/recovery.md).

A parameter server's process is killed (SIGKILL, as the OOM killer or a node's death does),
a program stops making progress, and a program of 2017 leaves a worker hung in session
creation after its chief finished. Each test states the expected outcome and asserts it, and
that nothing of the job is left (pods, processes, network namespaces).
"""
from __future__ import annotations

import time

import pytest

from tests.dagrun import states, xcom
from tests.fixtures.waiting import wait_until
from tests.realpods.support import REPO, JobWatch, checkpoint_step, conf, in_background, read_json, report, run_dag

pytestmark = [pytest.mark.k8s, pytest.mark.tf, pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.usefixtures("allowed_host_paths")]
PROGRAMS = REPO / "tests" / "tf" / "programs"


def _kill_ps(node, watch: JobWatch, namespace: str, attempt: int) -> int:
    """SIGKILL the process of ps-0's pod of ``attempt`` once it runs; its pid."""
    life = watch.wait_for(lambda p: p.key == "ps-0" and p.attempt == attempt and "Running" in p.phases,
                          timeout=300, what=f"ps-0 of attempt {attempt} running")
    wait_until(lambda: node.pid(namespace, life.name), 60, f"the process of ps-0 (attempt {attempt})")
    return node.kill(namespace, life.name)


def test_killed_ps_restarts_the_group_which_resumes_from_the_checkpoint(node, k8s_namespace, airflow_db,
                                                                       dataset, model_dir):
    import tfk8s_realpod_scenarios as s
    facts: dict = {}

    def killer():
        wait_until(lambda: checkpoint_step(model_dir) >= 150, 300, "a checkpoint at step >= 150", interval=0.2)
        facts["checkpoint"] = checkpoint_step(model_dir)
        facts["pid"] = _kill_ps(node, watch, k8s_namespace, 1)

    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        done = in_background(killer)
        dr = run_dag(s.tf1, k8s_namespace, **conf(dataset, model_dir, steps=600, step_delay=0.03,
                                                 checkpoint_every=50))
        done(60)
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "success", (states(dr), summary)
    runs = read_json(model_dir / "train_state.json")["runs"]
    report("ps-kill-restart", time.monotonic() - t0, checkpoint=facts["checkpoint"],
            starts=[r["start_step"] for r in runs], attempts=summary["attempts"])
    [attempt] = summary["attempts"]
    # A SIGKILLed process (exit 137) is the infrastructure's doing (OOM killer, node death), not the code's.
    assert attempt["failure_class"] == "infrastructure" and attempt["action"] == "restart_group"
    assert "ps-0" in attempt["reason"] and "137" in attempt["reason"], attempt
    for key in ("ps-0", "worker-0", "worker-1"):
        assert [life.attempt for life in watch.history(key)] == [1, 2], key  # the whole group, once
    # The first run began from scratch: below the first checkpoint (step 50), not necessarily 0 (TF1 is
    # asynchronous: a worker may step between the chief's initialisation and its first step).
    assert len(runs) == 2 and runs[0]["start_step"] < 50
    assert runs[1]["start_step"] >= facts["checkpoint"] >= 150  # resumed from the checkpoint, not from 0
    assert runs[1]["status"] == "finished" and runs[1]["final_step"] >= 600
    assert xcom(dr, "evaluate")["accuracy"] >= s.GOOD
    watch.assert_nothing_left()


def test_a_second_ps_death_beyond_infra_restarts_fails_naming_both_attempts(node, k8s_namespace, airflow_db,
                                                                            dataset, model_dir):
    import tfk8s_realpod_scenarios as s

    def killer():
        wait_until(lambda: checkpoint_step(model_dir) >= 100, 300, "a checkpoint at step >= 100", interval=0.2)
        _kill_ps(node, watch, k8s_namespace, 1)
        first = checkpoint_step(model_dir)
        wait_until(lambda: checkpoint_step(model_dir) > first, 300, "training resumed after the restart",
                 interval=0.2)
        _kill_ps(node, watch, k8s_namespace, 2)

    with JobWatch(node, k8s_namespace) as watch:
        done = in_background(killer)
        dr = run_dag(s.tf1, k8s_namespace, **conf(dataset, model_dir, steps=100000, step_delay=0.03,
                                                 checkpoint_every=50, infra_restarts=1))
        done(60)
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "failed" and states(dr)[("train.wait", -1)] == "failed"
    assert summary["failure_class"] == "infrastructure", summary
    reason = summary["reason"]
    assert "infra_restarts 1 spent" in reason and "earlier: attempt 1 ended by infrastructure" in reason, reason
    assert reason.count("ps-0") >= 2, reason  # this attempt's end and the first one's
    assert [life.attempt for life in watch.history("ps-0")] == [1, 2]
    watch.assert_nothing_left()


def test_a_program_that_stops_making_progress_fails_as_stalled_at_its_step(node, k8s_namespace, airflow_db,
                                                                           dataset, model_dir):
    import tfk8s_realpod_scenarios as s
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.tf1_stall, k8s_namespace, **conf(dataset, model_dir, steps=300, step_delay=0.02,
                                                       stall_after=50, progress_timeout="20s"))
    summary = xcom(dr, "train.wait", "summary")
    report("stall", time.monotonic() - t0, reason=summary["reason"])
    assert dr.state == "failed" and states(dr)[("train.wait", -1)] == "failed"
    assert summary["failure_class"] == "stalled" and summary["failed_replica"] == "worker-0"
    # The step the program stopped at, as it recorded it itself (its last progress line).
    stopped_at = read_json(model_dir / "replicas" / "worker-0.json")["runs"][-1]["last_step"]
    assert stopped_at >= 50
    assert f"stalled at step {stopped_at}: no progress for" in summary["reason"], summary["reason"]
    waited = int(summary["reason"].split("no progress for ")[1].split("s")[0])
    assert waited >= 20  # never before progress_timeout
    assert summary["progress"]["step"] == stopped_at
    watch.assert_nothing_left()


def test_a_late_worker_hung_in_session_creation_is_stopped_under_the_default_policy(node, k8s_namespace,
                                                                                    airflow_db, model_dir):
    import tfk8s_realpod_scenarios as s
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.flags_straggler, k8s_namespace, model_dir=str(model_dir), programs_dir=str(PROGRAMS),
                     steps=200)
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "success", (states(dr), summary)
    assert summary["stopped"] == ["worker-1"], summary  # stopped, not waited for
    assert (model_dir / "chief.done").exists()
    watch.assert_nothing_left()


def test_a_late_worker_under_all_workers_fails_after_straggler_timeout_naming_it(node, k8s_namespace,
                                                                                 airflow_db, model_dir, capfd):
    import tfk8s_realpod_scenarios as s
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.flags_straggler, k8s_namespace, model_dir=str(model_dir), programs_dir=str(PROGRAMS),
                     steps=200, success_policy="all_workers", straggler_timeout="20s")
    summary = xcom(dr, "train.wait", "summary")
    report("straggler", time.monotonic() - t0, reason=summary["reason"])
    assert dr.state == "failed" and states(dr)[("train.wait", -1)] == "failed"
    assert summary["failure_class"] == "straggler" and summary["failed_replica"] == "worker-1", summary
    assert "still running: worker-1" in summary["reason"]
    assert (model_dir / "chief.done").exists()
    out = capfd.readouterr()
    # the hung worker's own log (in the sensor's failure message): waiting for the finished chief
    assert "creating my session now" in out.out + out.err
    assert "CreateSession still waiting for response from worker: /job:worker/replica:0/task:0" in out.out + out.err
    watch.assert_nothing_left()
