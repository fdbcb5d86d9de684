"""Real distributed TensorFlow through Airflow, the Kubernetes API and the devstack's real node.

Every replica is a pod the operators create, bound by the real scheduler to the real node
(``tfk8s-node-0``: containerd, runc, the kubelet), run in the training image with its exact
TF_CONFIG (peers ``<role>-<i>.<job>.<ns>.svc:2222``, resolved by CoreDNS through the job's
headless Service). The sensor sees the kubelet's exit codes; teardown deletes the pods and
the kubelet stops their containers, which every test checks (nothing runs on the node after).
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.dagrun import states, xcom, xcom_at
from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.fixtures.waiting import wait_until
from tests.realpods.support import (
    GOOD,
    REPO,
    JobWatch,
    checkpoint_step,
    conf,
    in_background,
    read_json,
    report,
    run_dag,
)

pytestmark = [pytest.mark.k8s, pytest.mark.tf, pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.usefixtures("allowed_host_paths")]


def subnet(node) -> str:
    """The prefix of the node's pod addresses (its bridge's /24)."""
    return node.host_addr.rsplit(".", 1)[0] + "."


# -------------------------------------------------------------------------------- tests
def test_tf1_async_ps_workers_train_and_evaluate(node, k8s_namespace, airflow_db, dataset, model_dir):
    import tfk8s_realpod_scenarios as s
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.tf1, k8s_namespace, **conf(dataset, model_dir, steps=400))
    elapsed = time.monotonic() - t0
    st = states(dr)
    assert dr.state == "success", (st, xcom(dr, "train.wait", "summary"))
    result = xcom(dr, "evaluate")
    summary = xcom(dr, "train.wait", "summary")
    report("tf1", elapsed, accuracy=result["accuracy"], global_step=result["global_step"])
    assert result["accuracy"] >= GOOD and result["global_step"] >= 400
    assert summary["replicas"]["worker-0"]["exit_code"] == 0
    assert summary["replicas"]["ps-0"]["phase"] == "Running"  # a PS never exits; teardown stopped it
    # Pods really ran on the real node, in containerd, with their own addresses on its bridge.
    ps = watch.pod("ps-0")
    assert ps.spec.node_name == node.node
    assert ps.status.container_statuses[0].container_id.startswith("containerd://")
    assert all((p.status.pod_ip or "").startswith(subnet(node)) for p in watch.pods.values() if p.status.pod_ip)
    assert read_json(model_dir / "metrics.json")["mode"] == "tf1"
    watch.assert_nothing_left()


def test_tf2_parameter_server_strategy_trains_and_evaluates(node, k8s_namespace, airflow_db, dataset, model_dir):
    import tfk8s_realpod_scenarios as s
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.tf2, k8s_namespace, **conf(dataset, model_dir, steps=300))
    elapsed = time.monotonic() - t0
    assert dr.state == "success", (states(dr), xcom(dr, "train.wait", "summary"))
    result = xcom(dr, "evaluate")
    summary = xcom(dr, "train.wait", "summary")
    report("tf2", elapsed, accuracy=result["accuracy"], global_step=result["global_step"])
    assert result["accuracy"] >= GOOD and result["global_step"] == 300
    assert summary["replicas"]["chief-0"]["phase"] == "Succeeded"
    for key in ("ps-0", "worker-0", "worker-1"):  # untracked servers kept serving
        assert summary["replicas"][key]["phase"] == "Running", summary
    assert xcom(dr, "train.teardown")["deleted"]["pods"] == 4
    watch.assert_nothing_left()


def test_killed_worker_restarts_in_place_and_resumes(node, k8s_namespace, airflow_db, dataset, model_dir):
    """SIGKILL the chief worker's program mid-training: the kubelet restarts it in place
    (OnFailure, restartCount 1, lastState exit 137), it restores the latest checkpoint
    (its second run starts at that step, not 0) and the job succeeds."""
    import tfk8s_realpod_scenarios as s
    core = node.cluster.core_v1
    facts: dict = {}

    def killer():
        wait_until(lambda: checkpoint_step(model_dir) >= 150, 300, "a checkpoint at step >= 150", interval=0.2)
        pod = watch.pod("worker-0")
        facts["checkpoint"] = checkpoint_step(model_dir)
        facts["killed_pid"] = node.kill(k8s_namespace, pod.metadata.name)

        def restarted():
            p = core.read_namespaced_pod(pod.metadata.name, k8s_namespace)
            cs = (p.status.container_statuses or [None])[0]
            return p if cs and cs.restart_count >= 1 and cs.state.running else None
        p = wait_until(restarted, 60, "worker-0 restarted in place")
        cs = p.status.container_statuses[0]
        facts["last_exit"] = cs.last_state.terminated.exit_code
        facts["previous_log"] = core.read_namespaced_pod_log(
            pod.metadata.name, k8s_namespace, container="tensorflow", previous=True,
            _preload_content=False).data.decode()
        facts["new_pid"] = node.pid(k8s_namespace, pod.metadata.name)

    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        done = in_background(killer)
        dr = run_dag(s.tf1, k8s_namespace, **conf(dataset, model_dir, steps=600, step_delay=0.03,
                                                 checkpoint_every=50))
        done(60)
    elapsed = time.monotonic() - t0
    assert dr.state == "success", (states(dr), xcom(dr, "train.wait", "summary"))
    runs = read_json(model_dir / "train_state.json")["runs"]
    summary = xcom(dr, "train.wait", "summary")
    result = xcom(dr, "evaluate")
    report("worker-kill", elapsed, checkpoint=facts["checkpoint"], starts=[r["start_step"] for r in runs],
            accuracy=result["accuracy"], restarts=summary["replicas"]["worker-0"]["restarts"])
    assert facts["last_exit"] == 137  # 128 + SIGKILL, as a container runtime reports it
    assert facts["new_pid"] and facts["new_pid"] != facts["killed_pid"]
    assert "task worker-0" in facts["previous_log"]  # kubectl logs --previous through the API
    assert summary["replicas"]["worker-0"]["restarts"] == 1
    # The first run began from scratch: below the first checkpoint (step 50), not necessarily 0 (TF1 is
    # asynchronous: worker 1 may step between the chief's initialisation and its first step).
    assert len(runs) == 2 and runs[0]["start_step"] < 50
    assert runs[1]["start_step"] >= facts["checkpoint"] >= 150  # resumed, not restarted at 0
    assert runs[1]["status"] == "finished" and runs[1]["final_step"] >= 600
    assert result["accuracy"] >= GOOD
    watch.assert_nothing_left()


@pytest.mark.serial  # it bounds its own wall time
def test_worker_without_peers_fails_in_bounded_time_naming_the_peer(node, k8s_namespace, dataset):
    """A worker pod whose TF_CONFIG names a PS that never appears: the trainer gives up
    after its --peer-timeout, exits 138 (retryable), and its log and termination message
    (FallbackToLogsOnError) name the missing peer and its DNS name."""
    core = node.cluster.core_v1
    ns = k8s_namespace
    missing = f"ps-0.ghost.{ns}.svc:2222"
    tf_config = {"cluster": {"ps": [missing], "worker": [f"worker-0.ghost.{ns}.svc:2222"]},
                 "task": {"type": "worker", "index": 0}, "environment": "cloud"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely-worker-0", "labels": {"app": "lonely"}},
           "spec": {"restartPolicy": "Never", "hostname": "worker-0", "subdomain": "ghost",
                    "nodeSelector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS,
                    "containers": [{
                        "name": "tensorflow", "image": node.image,
                        "command": ["python", "-m", "tfk8s_airflow.pod.trainer"],
                        "args": ["--mode", "tf1", "--model-dir", "/mnt/tfk8s-realpod/model", "--peer-timeout", "5"],
                        "env": [{"name": "TF_CONFIG", "value": json.dumps(tf_config)},
                                {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"},
                                {"name": "TFK8S_SHARD_FILES",
                                 "value": json.dumps(["/mnt/tfk8s-realpod/data/" + Path(dataset["heldout"]).name])}],
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "volumeMounts": [{"name": "model", "mountPath": "/mnt/tfk8s-realpod/model"},
                                         {"name": "data", "mountPath": "/mnt/tfk8s-realpod/data", "readOnly": True}]}],
                    "volumes": [{"name": "model", "emptyDir": {}},
                                {"name": "data", "hostPath": {"path": dataset["dir"], "type": "Directory"}}]}}
    t0 = time.monotonic()
    with JobWatch(node, ns) as watch:
        core.create_namespaced_pod(ns, pod)

        def failed():
            p = core.read_namespaced_pod("lonely-worker-0", ns)
            return p if p.status.phase in ("Failed", "Succeeded") else None
        p = wait_until(failed, 120, "the lonely worker to end")
        elapsed = time.monotonic() - t0
        log = core.read_namespaced_pod_log("lonely-worker-0", ns, container="tensorflow",
                                           _preload_content=False).data.decode()
        term = p.status.container_statuses[0].state.terminated
        report("peer-timeout", elapsed, exit_code=term.exit_code)
        assert p.status.phase == "Failed" and term.exit_code == 138, log
        assert f"ps-0 ({missing}): dns failed" in log, log
        assert f"ps-0 ({missing})" in (term.message or ""), term.message
        assert elapsed < 60  # 5 s peer timeout + interpreter and TensorFlow start-up
        core.delete_namespaced_pod("lonely-worker-0", ns)
        wait_until(lambda: not core.list_namespaced_pod(ns).items, 30, "the pod deleted")
    watch.assert_nothing_left()


def test_tfjob_style_program_runs_unchanged(node, k8s_namespace, airflow_db, model_dir):
    """A program written for Kubeflow's TFJob (reads only TF_CONFIG, environment: cloud),
    mounted from a hostPath volume, trains under our pods without a change."""
    import tfk8s_realpod_scenarios as s
    programs = REPO / "tests" / "tf" / "programs"
    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.tfjob_program, k8s_namespace, model_dir=str(model_dir), programs_dir=str(programs),
                     steps=300)
    elapsed = time.monotonic() - t0
    assert dr.state == "success", (states(dr), xcom(dr, "train.wait", "summary"))
    chief = read_json(model_dir / "worker-0.json")
    report("tfjob-style", elapsed, **chief)
    # Async training: the chief stops when the shared global step reaches 300; the last step
    # it saw itself may be a few lower when the other worker made the final increments.
    assert chief["chief"] is True and chief["step"] >= 290 and chief["accuracy"] >= GOOD
    watch.assert_nothing_left()


def test_a_real_tensorboard_serves_the_jobs_scalars(node, k8s_namespace, airflow_db, dataset, model_dir,
                                                    monkeypatch):
    """``tensorboard: {enabled: true}``: the TensorBoard pod runs a real ``tensorboard`` on the real
    node's bridge, the chief's summaries (loss at increasing global steps) are what it serves,
    the sensor links it at the pod's IP, and teardown stops it with the job."""
    import tfk8s_realpod_scenarios as s
    monkeypatch.setenv("AIRFLOW__TFK8S__TENSORBOARD_URL", "http://{pod_ip}:{port}/")
    core = node.cluster.core_v1

    def release_once_tensorboard_is_ready():
        # The replicas wait for this file: the job runs while TensorBoard is Ready, however slowly it started.
        def ready():
            pods = core.list_namespaced_pod(k8s_namespace,
                                            label_selector="app.kubernetes.io/component=tensorboard").items
            return any(c.type == "Ready" and c.status == "True"
                       for p in pods for c in (p.status.conditions or []))
        wait_until(ready, 300, "the TensorBoard pod Ready")
        (model_dir / "tensorboard.ready").touch()

    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        released = in_background(release_once_tensorboard_is_ready)
        dr = run_dag(s.tf1_tensorboard, k8s_namespace, **conf(dataset, model_dir, steps=300))
        released()
    elapsed = time.monotonic() - t0
    st = states(dr)
    assert dr.state == "success", (st, xcom(dr, "train.wait", "summary"))
    served = xcom(dr, "tensorboard")
    summary = xcom(dr, "train.wait", "summary")
    tb = watch.pod("tensorboard")
    report("tensorboard", elapsed, url=served["url"], tags=served["tags"], points=len(served["loss"]))
    # A real container on the real node, at an address of its bridge, linked by that address.
    assert tb.spec.node_name == node.node and tb.status.pod_ip.startswith(subnet(node))
    assert served["url"] == summary["tensorboard_url"] == f"http://{tb.status.pod_ip}:6006/"
    assert xcom(dr, "train.wait", "_link_TensorBoardLink") == served["url"]
    assert any(key.startswith(f"{tb.metadata.name}/") for key in watch.pids_by_container), watch.pids_by_container
    # TensorBoard's own API: the page, the scalar tags of run "train", the loss at increasing global steps.
    assert served["page"] == 200
    assert {"loss", "examples_per_sec"} <= set(served["tags"]["train"]), served["tags"]
    steps = [step for _wall, step, _value in served["loss"]]
    assert len(steps) >= 2 and steps == sorted(set(steps)) and steps[-1] == served["last_step"], served
    assert all(value > 0 for _wall, _step, value in served["loss"]), served["loss"]
    # It never was a replica, and it is gone with the job: no pod left, nothing running on the node.
    assert set(summary["replicas"]) == {"ps-0", "worker-0", "worker-1"}
    assert xcom(dr, "train.teardown")["deleted"]["pods"] == 4
    watch.assert_nothing_left()


def test_every_replica_log_is_streamed_whole_and_survives_teardown(node, k8s_namespace, airflow_db, dataset,
                                                                   model_dir, tmp_path):
    """With a log directory (a ``logs`` volume), each replica task streams its replica's whole log
    into ``<dir>/<job>/<pod>.log``: every line from the container's first to its last, far more than
    teardown's 100-line tail, and teardown keeps the file as it is.

    ``dag.test()`` runs the replica tasks one after another, so a later replica's follower starts after
    the job ended: no replica is killed here (a restart in place streamed live is
    tests/e2e/test_replica_tasks_end.py's, with the real scheduler)."""
    import tfk8s_realpod_scenarios as s
    core = node.cluster.core_v1
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    facts: dict = {}

    def live_log(name: str) -> str:
        return core.read_namespaced_pod_log(name, k8s_namespace, container="tensorflow",
                                            _preload_content=False).data.decode()

    def first_line():
        pod = wait_until(lambda: (p := watch.pod("worker-1")) and p.status.phase == "Running" and p, 300,
                       "worker-1 running")
        text = wait_until(lambda: (t := live_log(pod.metadata.name)).count(" global step ") >= 120 and t, 300,
                        "worker-1 to log 120 steps", interval=0.2)
        facts["first"] = text.splitlines()[0]

    t0 = time.monotonic()
    with JobWatch(node, k8s_namespace) as watch:
        done = in_background(first_line)
        dr = run_dag(s.tf1_logs, k8s_namespace, **conf(dataset, model_dir, steps=1500, step_delay=0.03,
                                                      checkpoint_every=50, logs_dir=str(logs_dir)))
        done(60)
    elapsed = time.monotonic() - t0
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "success", (states(dr), summary)
    job = summary["job"]
    teardown = xcom(dr, "train.teardown")
    files = {key: logs_dir / job / f"{job}-{key}.log" for key in ("ps-0", "worker-0", "worker-1")}
    assert sorted(teardown["archived"]) == sorted(str(f) for f in files.values()), teardown
    text = files["worker-1"].read_text()
    lines = text.splitlines()
    steps = [line for line in lines if "worker-1 global step" in line]
    report("log-stream", elapsed, bytes={k: f.stat().st_size for k, f in files.items()}, worker1_lines=len(lines),
           worker1_step_lines=len(steps))
    # The first line the container ever printed, and the program's own last line.
    assert lines[0] == facts["first"], (lines[:3], facts["first"])
    assert re.fullmatch(r".*worker-1 done at global step \d+ \(ran \d+ steps.*", lines[-1]), lines[-3:]
    # One container, whole and once; far more than teardown's tail.
    assert not [line for line in lines if line.startswith("--- ")], [x for x in lines if x.startswith("--- ")]
    starts = [i for i, line in enumerate(lines) if "worker-1 starts at global step" in line]
    assert len(starts) == 1, starts
    assert lines.count(facts["first"]) == 1
    assert len(steps) > 200, len(steps)
    # The replica task reported the file (what the Replica log link opens), with the size it had.
    replica = xcom_at(dr, "train.replica", 2, "replica")  # map index 2: ps-0, worker-0, worker-1
    assert replica["key"] == "worker-1" and replica["log"] == str(files["worker-1"])
    assert replica["log_bytes"] == files["worker-1"].stat().st_size
    assert xcom_at(dr, "train.replica", 2, "_link_ReplicaLogLink") == (
        f"/tfk8s/api/runs/{dr.dag_id}/{quote(dr.run_id, safe='')}/jobs/{job}/logs/worker-1")
    assert "worker-0 done at global step" in files["worker-0"].read_text()
    assert "ps 0 serving at" in files["ps-0"].read_text()
    watch.assert_nothing_left()
