"""The job judge: every success and failure rule, from pod JSON as the API returns it."""
from datetime import UTC

from tfk8s_airflow.job.run.judge import JobPolicy, evaluate
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.states import JobState

T0 = 1_800_000_000.0


def iso(t):
    from datetime import datetime
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(role, index, phase="Running", *, restarts=0, exit_code=None, last_exit=None, waiting=None,
        unschedulable=None, created=T0, deleting=False):
    cs = {"name": "tensorflow", "restartCount": restarts, "state": {}}
    if phase == "Running":
        cs["state"] = {"running": {"startedAt": iso(created + 1)}}
    if exit_code is not None:
        cs["state"] = {"terminated": {"exitCode": exit_code, "startedAt": iso(created + 1),
                                      "finishedAt": iso(created + 11)}}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting, "message": "pull failed"}}
    if last_exit is not None:
        cs["lastState"] = {"terminated": {"exitCode": last_exit}}
    status = {"phase": phase, "containerStatuses": [cs]}
    if unschedulable:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable", "message": unschedulable}]}
    meta = {"name": f"job-{role}-{index}", "creationTimestamp": iso(created),
            "labels": {"tfk8s.io/role": role, "tfk8s.io/index": str(index)}}
    if deleting:
        meta["deletionTimestamp"] = iso(created + 5)
    return {"metadata": meta, "status": status}


def policy(straggler_timeout=None, **kw):
    import dataclasses
    base = {"name": "j", "image": "i:1", "ps": 1, "worker": 2, "schedule_timeout": 60,
            "startup_timeout": 120, "max_restarts": 2}
    base.update(kw)
    return dataclasses.replace(JobPolicy.from_spec(parse_spec(base)), straggler_timeout=straggler_timeout)


def test_default_policy_worker0_success_while_ps_runs():
    pods = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1, "Succeeded", exit_code=0)]
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == JobState.SUCCEEDED and "worker-0" in st.reason
    assert st.replicas["worker-0"].summary()["duration_s"] == 10.0


def test_running_until_policy_met_and_all_workers_policy():
    pods = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1)]
    assert evaluate(pods, policy(success_policy="all_workers"), T0 + 30, T0).state == JobState.RUNNING
    assert evaluate(pods, policy(), T0 + 30, T0).state == JobState.SUCCEEDED


def test_tf2_layout_chief_decides():
    p = policy(chief=1, worker={"replicas": 2, "tracked": False})
    pods = [pod("chief", 0, "Succeeded", exit_code=0), pod("ps", 0), pod("worker", 0), pod("worker", 1)]
    assert evaluate(pods, p, T0 + 30, T0).state == JobState.SUCCEEDED
    assert evaluate(pods[1:] + [pod("chief", 0)], p, T0 + 30, T0).state == JobState.RUNNING


def test_worker_failure_names_exit_code():
    pods = [pod("ps", 0), pod("worker", 0), pod("worker", 1, "Failed", exit_code=1)]
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == JobState.FAILED and "worker-1" in st.reason and "exit code 1" in st.reason
    assert st.failed_pod == "job-worker-1"


def test_dead_parameter_server_fails_the_job():
    for ps in (pod("ps", 0, "Failed", exit_code=137), pod("ps", 0, "Succeeded", exit_code=0)):
        st = evaluate([ps, pod("worker", 0), pod("worker", 1)], policy(), T0 + 30, T0)
        assert st.state == JobState.FAILED and "untracked replica ps-0" in st.reason


def test_restart_budget():
    pods = [pod("ps", 0), pod("worker", 0, restarts=2, last_exit=1), pod("worker", 1)]
    assert evaluate(pods, policy(), T0 + 30, T0).state == JobState.RUNNING
    pods[1] = pod("worker", 0, restarts=3, last_exit=1)
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == JobState.FAILED and "restarted 3 times" in st.reason and "max_restarts 2" in st.reason


def test_exit_code_policy_permanent_vs_retryable():
    p = policy(restart_policy="ExitCode")
    retryable = [pod("ps", 0), pod("worker", 0, restarts=1, last_exit=137), pod("worker", 1)]
    assert evaluate(retryable, p, T0 + 30, T0).state == JobState.RUNNING
    permanent = [pod("ps", 0), pod("worker", 0, restarts=1, last_exit=2), pod("worker", 1)]
    st = evaluate(permanent, p, T0 + 30, T0)
    assert st.state == JobState.FAILED and "permanent exit code 2" in st.reason


def test_unschedulable_only_after_schedule_timeout():
    pods = [pod("ps", 0), pod("worker", 0, unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
            pod("worker", 1)]
    assert evaluate(pods, policy(), T0 + 30, T0).state == JobState.RUNNING
    st = evaluate(pods, policy(), T0 + 61, T0)
    assert st.state == JobState.FAILED and "Unschedulable" in st.reason and "Insufficient nvidia.com/gpu" in st.reason


def test_the_sensor_says_how_long_a_replica_has_been_pending_and_which_timeout_ends_it():
    msg = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    pods = [pod("ps", 0), pod("worker", 0, unschedulable=msg, created=T0 + 5),
            pod("worker", 1, "Pending", waiting="ContainerCreating", created=T0 + 8)]
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == JobState.RUNNING
    assert st.pending_note(policy(), T0 + 47, T0) == (
        f"worker-0 Pending for 42s (2 replicas Pending), Unschedulable: {msg}; the job fails at schedule_timeout 60s")
    pulling = evaluate([pod("ps", 0), pod("worker", 0), pods[2]], policy(), T0 + 30, T0)
    assert pulling.pending_note(policy(), T0 + 30, T0) == (
        "worker-1 Pending for 22s, ContainerCreating; the job fails at startup_timeout 120s")
    gated = pod("worker", 0, "Pending")
    gated["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    assert "scheduling gates; the job fails at startup_timeout" in \
        evaluate([gated, pod("ps", 0), pod("worker", 1)], policy(), T0 + 3, T0).pending_note(policy(), T0 + 3, T0)
    assert evaluate([pod("ps", 0), pod("worker", 0), pod("worker", 1)], policy(), T0 + 3, T0) \
        .pending_note(policy(), T0 + 3, T0) == ""


def test_image_pull_fails_fast():
    pods = [pod("ps", 0, "Pending", waiting="ImagePullBackOff"), pod("worker", 0), pod("worker", 1)]
    st = evaluate(pods, policy(), T0 + 2, T0)
    assert st.state == JobState.FAILED and "ImagePullBackOff" in st.reason


def test_startup_timeout_and_missing_replicas():
    pending = [pod("ps", 0, "Pending"), pod("worker", 0), pod("worker", 1)]
    assert evaluate(pending, policy(), T0 + 100, T0).state == JobState.RUNNING
    assert "has not started" in evaluate(pending, policy(), T0 + 121, T0).reason
    # Setup creates every pod before the job is watched: a missing one was deleted (infrastructure).
    missing = [pod("ps", 0), pod("worker", 0)]
    st = evaluate(missing, policy(), T0 + 1, T0)
    assert st.state == JobState.FAILED and "worker-1 has no pod" in st.reason and st.failure_class == "infrastructure"


def test_active_deadline_enforced_on_every_poll():
    pods = [pod("ps", 0), pod("worker", 0), pod("worker", 1)]
    assert evaluate(pods, policy(active_deadline=300), T0 + 299, T0).state == JobState.RUNNING
    st = evaluate(pods, policy(active_deadline=300), T0 + 301, T0)
    assert st.state == JobState.FAILED and "active_deadline" in st.reason


def test_a_pod_deleted_by_someone_else_is_an_infrastructure_failure_and_policy_round_trips():
    p = policy()
    assert JobPolicy.from_dict(p.to_dict()) == p
    pods = [pod("ps", 0), pod("worker", 0, deleting=True), pod("worker", 1)]
    st = evaluate(pods, p, T0 + 30, T0)
    assert st.state == JobState.FAILED and "being deleted" in st.reason and st.failure_class == "infrastructure"


# ----------------------------------------------------------------------------- init containers, gates
def with_init(p, *, exit_code, message=None, restarts=0, current=True, name="fetch-code"):
    term = {"exitCode": exit_code, **({"message": message} if message else {})}
    cs = {"name": name, "restartCount": restarts, "state": {}, "lastState": {}}
    if current:
        cs["state"] = {"terminated": term}
    else:
        cs["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
        cs["lastState"] = {"terminated": term}
    p["status"]["initContainerStatuses"] = [cs]
    p["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    return p


def test_permanent_fetch_failure_fails_at_once_with_the_fetchers_message():
    msg = "HTTP 404 Not Found fetching http://10.213.0.1:8000/algo.tgz"
    for phase, current in (("Failed", True), ("Pending", False)):  # restartPolicy Never / OnFailure
        ps = with_init(pod("ps", 0, phase), exit_code=1, message=msg, current=current)
        st = evaluate([ps, pod("worker", 0), pod("worker", 1)], policy(), T0 + 2, T0)
        assert st.state == JobState.FAILED, st
        assert "init container fetch-code failed with exit code 1" in st.reason and msg in st.reason
        assert "permanent: the fetcher" in st.reason and st.failed_container == "fetch-code"
        assert st.failed_pod == "job-ps-0"


def test_retryable_fetch_failures_count_against_max_restarts():
    ok = with_init(pod("worker", 0, "Pending"), exit_code=138, message="connection refused", restarts=2,
                   current=False)
    assert evaluate([pod("ps", 0), ok, pod("worker", 1)], policy(), T0 + 2, T0).state == JobState.RUNNING
    over = with_init(pod("worker", 0, "Pending"), exit_code=138, message="connection refused", restarts=3,
                     current=False)
    st = evaluate([pod("ps", 0), over, pod("worker", 1)], policy(), T0 + 2, T0)
    assert st.state == JobState.FAILED and "restarted 3 times, more than max_restarts 2" in st.reason
    assert "connection refused" in st.reason


def test_gated_pods_are_not_unschedulable_and_startup_timeout_names_the_gates():
    gated = pod("worker", 0, "Pending")
    gated["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                      "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    pods = [pod("ps", 0), gated, pod("worker", 1)]
    assert evaluate(pods, policy(), T0 + 100, T0).state == JobState.RUNNING  # past schedule_timeout (60)
    st = evaluate(pods, policy(), T0 + 121, T0)
    assert st.state == JobState.FAILED and "waiting: scheduling gates" in st.reason


def test_deadline_names_what_the_success_policy_waited_for_and_nodes_are_reported():
    hung = pod("worker", 1)
    hung["spec"] = {"nodeName": "kwok-node-0"}
    pods = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), hung]
    st = evaluate(pods, policy(success_policy="all_workers", active_deadline=300), T0 + 301, T0)
    assert st.state == JobState.FAILED
    assert "the success policy still waited for: worker-1 Running on kwok-node-0" in st.reason
    assert st.replicas["worker-1"].summary()["node"] == "kwok-node-0"


# ----------------------------------------------------------------------------- replica outcomes
def outcome(pods, key, tracked, **kw):
    from tfk8s_airflow.job.run.judge import replica_outcome
    return replica_outcome(evaluate(pods, policy(**kw), T0 + 30, T0), key, tracked)


def test_tracked_replica_outcomes():
    running = [pod("ps", 0), pod("worker", 0), pod("worker", 1)]
    assert outcome(running, "worker-1", True) is None
    done = [pod("ps", 0), pod("worker", 0), pod("worker", 1, "Succeeded", exit_code=0)]
    assert outcome(done, "worker-1", True).state == "succeeded"  # its own success, job still running
    failed = [pod("ps", 0), pod("worker", 0), pod("worker", 1, "Failed", exit_code=3)]
    out = outcome(failed, "worker-1", True)
    assert out.state == "failed" and "exit code 3" in out.reason
    # a healthy peer of the failed worker did not finish: skipped, not failed
    peer = outcome(failed, "worker-0", True)
    assert peer.state == "skipped" and "worker-1" in peer.reason
    # still running when the success policy (worker 0) was met: succeeds, teardown stops it
    met = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1)]
    assert outcome(met, "worker-1", True).state == "succeeded"


def test_untracked_replica_outcomes():
    met = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1)]
    assert outcome(met, "ps-0", False).state == "succeeded"
    assert outcome([pod("ps", 0), pod("worker", 0), pod("worker", 1)], "ps-0", False) is None
    dead = [pod("ps", 0, "Failed", exit_code=137), pod("worker", 0), pod("worker", 1)]
    out = outcome(dead, "ps-0", False)
    assert out.state == "failed" and "exit code 137" in out.reason
    other = [pod("ps", 0), pod("worker", 0), pod("worker", 1, "Failed", exit_code=1)]
    assert outcome(other, "ps-0", False).state == "succeeded"  # healthy when the job failed
    # still in its init containers (fetching code) when the job failed: it never served, so it is skipped
    waiting = [pod("ps", 0, "Pending"), pod("worker", 0), pod("worker", 1, "Failed", exit_code=1)]
    out = outcome(waiting, "ps-0", False)
    assert out.state == "skipped" and "had not started when the job failed" in out.reason
    missing = [pod("ps", 0), pod("worker", 0)]
    from tfk8s_airflow.job.run.judge import replica_outcome
    st = evaluate(missing, policy(), T0 + 1, T0)
    assert replica_outcome(st, "worker-1", True).state == "failed"
    assert replica_outcome(st, "worker-0", True).state == "skipped"


# ----------------------------------------------------------------------------- failure classes, stragglers
def classed(p, **kw):
    return evaluate([pod("ps", 0), pod("worker", 0), p], policy(**kw), T0 + 30, T0)


def test_failure_classes_from_what_kubernetes_reports():
    evicted = pod("worker", 1, "Failed", exit_code=137)
    evicted["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}]
    st = classed(evicted)
    assert st.failure_class == "infrastructure" and "EvictionByEvictionAPI" in st.reason
    oom = pod("worker", 1, "Failed", exit_code=137)
    oom["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "OOMKilled"
    st = classed(oom)
    assert st.failure_class == "oom" and "OOMKilled" in st.reason
    assert classed(pod("worker", 1, "Failed", exit_code=3)).failure_class == "code"
    assert classed(pod("worker", 1, "Failed", exit_code=143)).failure_class == "infrastructure"  # a signal
    assert classed(pod("worker", 1, "Failed", exit_code=137)).failure_class == "infrastructure"  # SIGKILL
    assert classed(pod("worker", 1, "Failed", exit_code=139)).failure_class == "code"  # its own SIGSEGV
    assert classed(pod("worker", 1, "Failed", exit_code=134)).failure_class == "code"  # its own abort()
    assert classed(pod("worker", 1, "Pending", waiting="ImagePullBackOff")).failure_class == "config"
    node_gone = pod("worker", 1, "Failed")
    node_gone["status"]["reason"] = "NodeLost"
    assert classed(node_gone).failure_class == "infrastructure"
    ps_exit = evaluate([pod("ps", 0, "Succeeded", exit_code=0), pod("worker", 0), pod("worker", 1)],
                       policy(), T0 + 30, T0)
    assert ps_exit.failure_class == "code" and ps_exit.failed_key == "ps-0"


def finished_at(p, t):
    p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = iso(t)
    return p


def test_straggler_timeout_under_all_workers_names_the_hung_worker():
    lead = finished_at(pod("worker", 0, "Succeeded", exit_code=0), T0 + 20)
    pods = [pod("ps", 0), lead, pod("worker", 1)]
    p = policy(success_policy="all_workers", straggler_timeout=30)
    assert evaluate(pods, p, T0 + 49, T0).state == JobState.RUNNING  # 29 s after worker-0 finished
    st = evaluate(pods, p, T0 + 51, T0)
    assert st.state == JobState.FAILED and st.failure_class == "straggler"
    assert "still running: worker-1 Running" in st.reason and st.failed_key == "worker-1"
    # without it, all_workers waits (for the deadline) as before
    assert evaluate(pods, policy(success_policy="all_workers"), T0 + 500, T0).state == JobState.RUNNING


def test_default_policy_gives_stragglers_their_timeout_then_succeeds_and_stops_them():
    lead = finished_at(pod("worker", 0, "Succeeded", exit_code=0), T0 + 20)
    pods = [pod("ps", 0), lead, pod("worker", 1)]
    now_ok = evaluate(pods, policy(), T0 + 21, T0)  # no straggler_timeout: success at once
    assert now_ok.state == JobState.SUCCEEDED and now_ok.stopped == ("worker-1",)
    waiting = evaluate(pods, policy(straggler_timeout=30), T0 + 40, T0)
    assert waiting.state == JobState.RUNNING
    st = evaluate(pods, policy(straggler_timeout=30), T0 + 51, T0)
    assert st.state == JobState.SUCCEEDED and "stopping worker-1" in st.reason and st.stopped == ("worker-1",)


def test_a_fetch_failure_never_repeats_the_code_uris_credentials():
    msg = "HTTP 403 Forbidden fetching https://deploy:s3cr3t@code.example.com/algo.tgz?X-Amz-Signature=abc"
    ps = with_init(pod("ps", 0, "Failed"), exit_code=1, message=msg)
    st = evaluate([ps, pod("worker", 0), pod("worker", 1)], policy(), T0 + 2, T0)
    assert st.state == JobState.FAILED and "s3cr3t" not in st.reason and "abc" not in st.reason
    assert "https://***@code.example.com/algo.tgz?X-Amz-Signature=***" in st.reason


def held(role, index, *gates):
    p = pod(role, index, "Pending")
    p["spec"] = {"schedulingGates": [{"name": g} for g in gates]}
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                  "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    return p


def test_a_pod_held_by_another_controllers_gate_waits_for_admission_not_for_startup_timeout():
    queue = "kueue.x-k8s.io/admission"
    pods = [pod("ps", 0), held("worker", 0, queue), pod("worker", 1)]
    st = evaluate(pods, policy(), T0 + 10_000, T0)  # far past startup_timeout (120): still waiting
    assert st.state == JobState.RUNNING
    assert st.replicas["worker-0"].held_by == (queue,)
    assert st.replicas["worker-0"].describe() == f"worker-0 Pending (held by {queue})"
    assert f"held by {queue}; the job fails at no timeout" in st.pending_note(policy(), T0 + 30, T0)
    timed = policy(admission_timeout="5m")
    assert "the job fails at admission_timeout 300s" in evaluate(pods, timed, T0 + 30, T0).pending_note(
        timed, T0 + 30, T0)
    st = evaluate(pods, timed, T0 + 301, T0)
    assert st.state == JobState.FAILED and st.failure_class == "config"
    assert st.reason == f"worker-0 (job-worker-0) is held by {queue} 301s after creation (admission_timeout 300s)"
    # The job's own gate alone is no other controller's: startup_timeout as before.
    own = [pod("ps", 0), held("worker", 0, "tfk8s.io/gang"), pod("worker", 1)]
    assert evaluate(own, policy(), T0 + 10_000, T0).replicas["worker-0"].held_by == ()
    assert evaluate(own, policy(), T0 + 121, T0).state == JobState.FAILED
    # The policy travels in the job record.
    assert JobPolicy.from_dict(timed.to_dict()) == timed


def test_every_replica_whose_fetch_failed_says_the_fetchers_message_in_its_own_outcome():
    """A bad code URI fails every fetcher; the job fails by one of them, and each other replica's
    task (its own log) still says its own fetch error and the job's reason, not just 'failed'."""
    from tfk8s_airflow.job.run.judge import replica_outcome
    from tfk8s_airflow.job.states import EndState

    msg = "HTTP 404 Not Found fetching http://10.213.0.1:8000/algo.tgz"
    for phase, current in (("Failed", True), ("Pending", False)):  # restartPolicy Never / OnFailure
        pods = [with_init(pod("ps", 0, phase), exit_code=1, message=msg, current=current),
                with_init(pod("worker", 0, phase), exit_code=1, message=msg, current=current),
                with_init(pod("worker", 1, phase), exit_code=1, message=msg, current=current)]
        status = evaluate(pods, policy(), T0 + 2, T0)
        assert status.state == JobState.FAILED and status.failed_pod == "job-ps-0"
        for key, tracked in (("ps-0", False), ("worker-0", True), ("worker-1", True)):
            out = replica_outcome(status, key, tracked)
            assert out is not None and out.state == EndState.FAILED, (phase, key, out)
            assert msg in out.reason and "init container fetch-code failed with exit code 1" in out.reason, out.reason
        assert "the job failed: " in replica_outcome(status, "worker-1", True).reason


def test_a_failed_replica_names_the_jobs_reason():
    from tfk8s_airflow.job.run.judge import replica_outcome

    pods = [pod("ps", 0), pod("worker", 0, "Failed", exit_code=3), pod("worker", 1, "Failed", exit_code=3)]
    status = evaluate(pods, policy(), T0 + 30, T0)
    assert status.state == JobState.FAILED
    other = "worker-1" if status.failed_pod == "job-worker-0" else "worker-0"
    out = replica_outcome(status, other, True)
    assert out.reason == f"{other} failed with exit code 3; the job failed: {status.reason}"


def test_a_job_none_of_whose_pods_started_is_queued_under_kueue_and_held_under_another_gate():
    kueue_gate, other = "kueue.x-k8s.io/admission", "example.com/hold"
    queued = [held("ps", 0, kueue_gate, "kueue.x-k8s.io/topology"), held("worker", 0, kueue_gate),
              held("worker", 1, kueue_gate)]
    assert evaluate(queued, policy(), T0 + 30, T0).state == JobState.QUEUED
    assert evaluate([held("ps", 0, other), held("worker", 0, other), held("worker", 1, other)], policy(),
                    T0 + 30, T0).state == JobState.HELD
    # Once one replica runs, the job is running (the judge's rules for the rest are unchanged).
    assert evaluate([pod("ps", 0), held("worker", 0, kueue_gate), held("worker", 1, kueue_gate)], policy(),
                    T0 + 30, T0).state == JobState.RUNNING
    # Pending for any other reason (the job's own gate, the scheduler) is running, as before.
    assert evaluate([held("ps", 0, "tfk8s.io/gang"), pod("worker", 0, "Pending"), pod("worker", 1, "Pending")],
                    policy(), T0 + 30, T0).state == JobState.RUNNING


GANG_WAIT = ("pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 1 remaining, pod group "
             "preemption: No preemption victims found for incoming preemptor")


def test_a_pod_group_that_cannot_be_placed_whole_queues_the_job_judged_by_admission_timeout_not_schedule_timeout():
    def in_group(p):
        p["spec"] = {"schedulingGroup": {"podGroupName": "job"}}
        return p
    pods = [in_group(pod(r, i, unschedulable=GANG_WAIT)) for r, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    st = evaluate(pods, policy(), T0 + 600, T0)  # ten times schedule_timeout: waiting for room is the group's point
    assert st.state == JobState.QUEUED, st
    assert st.replicas["worker-0"].held_by == ("PodGroup job (minCount (3) cannot be satisfied)",)
    assert st.replicas["worker-0"].unschedulable is None
    assert "held by PodGroup job (minCount (3) cannot be satisfied)" in st.replicas["worker-0"].describe()
    timed = evaluate(pods, policy(admission_timeout=300), T0 + 301, T0)
    assert timed.state == JobState.FAILED and "is held by PodGroup job" in timed.reason
    assert "(admission_timeout 300s)" in timed.reason, timed.reason
    # The same message on a pod that names no group (no gang scheduling) is an Unschedulable pod as ever;
    # a pod of a group with another scheduler message (its node selector) is one too.
    loose = [pod("ps", 0), pod("worker", 0, unschedulable=GANG_WAIT), pod("worker", 1)]
    assert evaluate(loose, policy(), T0 + 61, T0).state == JobState.FAILED
    other = [pod("ps", 0), in_group(pod("worker", 0, unschedulable="0/2 nodes are available: 2 node(s) didn't "
                                                                   "match Pod's node affinity/selector.")),
             pod("worker", 1)]
    assert evaluate(other, policy(), T0 + 61, T0).state == JobState.FAILED
