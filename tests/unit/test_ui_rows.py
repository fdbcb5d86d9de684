"""The TF jobs view's rows: assembled from a run's records, each replica field from the latest word."""
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import Attempt, JobProgress, ReplicaResult
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.ui.rows import (
    JobSources,
    Links,
    ReplicaTask,
    archive_roots,
    group_prefix,
    http_url,
    job_row,
    log_roots,
    sort_rows,
    wants_pod_list,
)
from tfk8s_airflow.volume.logs import archive_path

SPEC = parse_spec({"name": "ctr", "image": "i:1", "ps": 1, "worker": 2})
LINKS = Links(ui="/", app="/tfk8s")


def record():
    names = JobNames.for_run(SPEC, "manual__2026-02-01T00:00:00+00:00", "train", "tfk8s_train_manual")
    return job_record(SPEC, names, plan_replicas(SPEC, names), policy=JobPolicy.from_spec(SPEC, 600),
                      has_shards=False, kubernetes_conn_id="kubernetes_default", poll_interval=2.0, created_at=1.0)


def sources(**kw):
    base = {"dag_id": "tfk8s_train_manual", "run_id": "manual__2026-02-01T00:00:00+00:00", "run_state": "running",
            "prefix": "train.", "record": record()}
    return JobSources(**{**base, **kw})


def test_a_job_that_just_started_shows_its_plan_in_map_index_order_with_links_to_each_replica_task_log():
    row = job_row(sources(tasks={i: ReplicaTask(i, "deferred", 1) for i in range(3)}), LINKS)
    assert row["state"] == "running" and row["progress"] is None and row["replica_source"] == "plan"
    assert [r["key"] for r in row["replicas"]] == ["ps-0", "worker-0", "worker-1"]
    assert all(r["phase"] is None for r in row["replicas"])
    assert row["run_url"] == "/dags/tfk8s_train_manual/runs/manual__2026-02-01T00%3A00%3A00%2B00%3A00"
    assert row["replicas"][2]["log_url"] == row["run_url"] + "/tasks/train.replica/mapped/2?try_number=1"
    assert row["replicas"][0]["task_state"] == "deferred" and not row["replicas"][0]["tracked"]
    assert row["archive"].startswith("not archived") and row["tensorboard_url"] is None


def test_live_pods_fill_in_the_phases_until_progress_is_pushed():
    live = {"ps-0": {"phase": "Running", "restarts": 0, "node": "agent"},
            "worker-0": {"phase": "Running", "restarts": 1, "node": "agent"}}
    row = job_row(sources(live=live), LINKS)
    by = {r["key"]: r for r in row["replicas"]}
    assert row["replica_source"] == "pods"
    assert (by["worker-0"]["phase"], by["worker-0"]["restarts"], by["worker-0"]["node"]) == ("Running", 1, "agent")
    assert by["worker-1"]["phase"] is None  # no pod yet


def test_progress_gives_the_step_loss_rate_eta_attempts_and_a_tensorboard_link():
    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=10.0, step=120, target_step=300,
                           loss=0.41, examples_per_sec=850.0, eta_s=21.0,
                           attempts=(Attempt(2, "infrastructure", "node lost", 5.0, "replace", ("worker-1",)),),
                           replicas={"worker-1": {"pod": "p", "phase": "Pending", "restarts": 0}},
                           tensorboard_url="http://127.0.0.1:6006/")
    row = job_row(sources(progress=progress, live={"worker-1": {"phase": "Running"}}), LINKS)
    assert row["progress"] == {"step": 120, "target_step": 300, "percent": 40.0, "loss": 0.41,
                               "examples_per_sec": 850.0, "eta_s": 21.0, "updated_at": 10.0,
                               "charts": {"loss": None, "examples_per_sec": None}}  # no history: no chart
    assert row["tensorboard_url"] == "http://127.0.0.1:6006/" and row["attempt"] == 2
    by = {r["key"]: r for r in row["replicas"]}
    assert by["worker-1"]["phase"] == "Pending"  # progress is newer than a LIST the view made
    assert by["worker-1"]["attempt"] == 2 and by["worker-0"]["attempt"] == 1  # only worker-1 was replaced


def test_a_tensorboard_url_that_is_not_http_is_never_a_link():
    for url in ("javascript:alert(1)", "data:text/html,x", "//evil", "", None, 3):
        assert http_url(url) is None
    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=1.0, tensorboard_url="javascript:x")
    assert job_row(sources(progress=progress), LINKS)["tensorboard_url"] is None


def test_the_summary_and_the_replicas_results_are_the_last_word_once_the_job_ended():
    summary = {"state": "succeeded", "reason": "worker-0 succeeded",
               "replicas": {"ps-0": {"pod": "p", "phase": "Running", "restarts": 0, "node": "agent"},
                            "worker-0": {"pod": "w0", "phase": "Succeeded", "restarts": 0, "exit_code": 0,
                                         "node": "agent"}}}
    results = {2: ReplicaResult("worker-1", "w1", "succeeded", "exited 0", phase="Succeeded", exit_code=0,
                                restarts=2, node="agent-2")}
    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=1.0, step=290, target_step=300,
                           replicas={"worker-0": {"phase": "Running", "exit_code": None}})
    row = job_row(sources(run_state="success", summary=summary, results=results, progress=progress), LINKS)
    assert (row["state"], row["reason"], row["replica_source"]) == ("succeeded", "worker-0 succeeded", "summary")
    by = {r["key"]: r for r in row["replicas"]}
    assert by["worker-0"]["phase"] == "Succeeded" and by["worker-0"]["exit_code"] == 0
    assert by["worker-1"] == {**by["worker-1"], "phase": "Succeeded", "restarts": 2, "node": "agent-2",
                              "result": "succeeded"}


def test_archived_logs_are_linked_only_for_the_files_teardown_wrote_for_the_jobs_own_pods():
    rec = record()
    ps, w0 = rec.replicas[0], rec.replicas[1]
    archived = [str(archive_path("/vol/logs", rec.job, ps.pod)), str(archive_path("/vol/logs", rec.job, w0.pod)),
                "/etc/passwd", f"/vol/logs/other-job/{rec.replicas[2].pod}.log", "relative/x/y.log"]
    src = sources(run_state="success", archived=archived)
    assert archive_roots(src) == {"ps-0": "/vol/logs", "worker-0": "/vol/logs"}
    row = job_row(src, LINKS)
    by = {r["key"]: r for r in row["replicas"]}
    assert row["archive"] == "archived"
    assert by["ps-0"]["archive_url"] == (f"/tfk8s/api/runs/tfk8s_train_manual/manual__2026-02-01T00%3A00%3A00%2B00%3A00"
                                         f"/jobs/{rec.job}/logs/ps-0")
    assert by["worker-1"]["archive_url"] is None
    assert job_row(sources(run_state="success", archived=[]), LINKS)["archive"] == "not archived"


def test_the_view_lists_pods_only_for_a_running_job_that_nothing_newer_describes():
    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=1.0)
    assert wants_pod_list("running", None, None)
    assert not wants_pod_list("running", None, progress)
    assert not wants_pod_list("running", {"state": "failed"}, None)
    assert not wants_pod_list("success", None, None)


def test_group_prefixes_and_ordering():
    assert group_prefix("train.setup") == "train." and group_prefix("setup") == ""
    assert group_prefix("a.b.setup") == "a.b." and group_prefix("evaluate") is None
    assert group_prefix("train.setup_x") is None
    rows = [{"state": "succeeded", "started_at": "2026-02-02"}, {"state": "running", "started_at": "2026-02-01"},
            {"state": "failed", "started_at": "2026-02-03"}, {"state": "running", "started_at": "2026-02-04"}]
    assert [r["started_at"] for r in sort_rows(rows)] == ["2026-02-04", "2026-02-01", "2026-02-03", "2026-02-02"]


def test_a_run_that_ended_without_a_summary_says_so():
    row = job_row(sources(run_state="failed"), LINKS)
    assert row["state"] == "failed" and "no summary" in row["reason"]


def test_the_tensorboard_link_lives_as_long_as_the_tensorboard_and_the_page_says_why_there_is_none():
    model = {"name": "model", "mount_path": "/m", "host_path": "/mnt/tfk8s-gluster/m"}
    spec = parse_spec({**SPEC.to_dict(), "tensorboard": True, "volumes": [model]})
    names = JobNames.for_run(spec, "manual__2026-02-01T00:00:00+00:00", "train", "tfk8s_train_manual")

    def with_tb(template, **kw):
        rec = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec, 600),
                         has_shards=False, kubernetes_conn_id="k", poll_interval=2.0, tensorboard_url=template)
        row = job_row(sources(record=rec, **kw), LINKS)
        return row["tensorboard_url"], row["tensorboard_note"]

    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=1.0,
                           tensorboard_url="http://10.213.0.7:6006/")
    assert with_tb("http://{pod_ip}:{port}/", progress=progress) == ("http://10.213.0.7:6006/", "")
    assert with_tb("http://{pod_ip}:{port}/") == (None, "TensorBoard not ready yet")
    assert with_tb(None) == (None, "TensorBoard runs without a link ([tfk8s] tensorboard_url is not set)")
    # Teardown deleted it with the job: a link would lead nowhere.
    assert with_tb("http://{pod_ip}:{port}/", progress=progress, run_state="success", archived=[]) == (
        None, "TensorBoard ended with the job")
    assert job_row(sources(), LINKS)["tensorboard_note"] == "no TensorBoard"


def test_a_streamed_log_is_linked_while_the_job_runs_and_after_its_replica_task_reported_it():
    """Replica logs streamed into the record's log directory: readable while the run runs, and
    afterwards for each replica whose task reported its file; never a directory from elsewhere."""
    import dataclasses

    rec = dataclasses.replace(record(), log_dir="/vol/logs")
    running = sources(record=rec, run_state="running")
    assert log_roots(running) == {r.key: "/vol/logs" for r in rec.replicas}
    row = job_row(running, LINKS)
    assert row["archive"] == "streamed to /vol/logs while the replicas run"
    assert all(r["archive_url"] for r in row["replicas"])
    w1 = rec.replicas[2]
    results = {2: ReplicaResult(key=w1.key, pod=w1.pod, state="succeeded", reason="", log=f"/vol/logs/x/{w1.pod}.log")}
    ended = sources(record=rec, run_state="failed", archived=None, results=results)
    assert log_roots(ended) == {"worker-1": "/vol/logs"}
    # No log directory in the record: nothing is readable before teardown reports files.
    assert log_roots(sources(run_state="running")) == {}


def test_an_ended_jobs_progress_is_the_one_in_the_sensors_summary():
    from tfk8s_airflow.ui.sources import final_progress

    last = JobProgress(job="j", namespace="ns", state="succeeded", updated_at=50.0, step=300, target_step=300,
                       tensorboard_url="http://127.0.0.1:6006/")
    assert final_progress({"state": "succeeded", "progress": last.to_xcom()}) == last
    for summary in (None, {}, {"progress": None}, {"progress": {"version": 99}}, {"progress": "x"}, "x"):
        assert final_progress(summary) is None, summary
    row = job_row(sources(progress=final_progress({"progress": last.to_xcom()})), LINKS)
    assert row["progress"]["step"] == 300 and row["tensorboard_url"] == "http://127.0.0.1:6006/"


def test_a_queued_or_held_job_shows_where_it_waits_and_sorts_with_the_running():
    queued = JobProgress(job="j", namespace="ns", state="queued", updated_at=10.0,
                         waiting="queued in team-a, position 2, since 10:00:00Z: insufficient unused quota")
    row = job_row(sources(progress=queued), LINKS)
    assert (row["state"], row["reason"]) == ("queued", queued.waiting)
    held = JobProgress(job="j", namespace="ns", state="held", updated_at=10.0, waiting="held by example.com/hold")
    assert job_row(sources(progress=held), LINKS)["reason"] == "held by example.com/hold"
    rows = [{"state": "succeeded", "started_at": "2026-02-03"}, {"state": "queued", "started_at": "2026-02-01"},
            {"state": "held", "started_at": "2026-02-02"}]
    assert [r["state"] for r in sort_rows(rows)] == ["held", "queued", "succeeded"]
    # The progress XCom carries it.
    assert JobProgress.from_xcom(queued.to_xcom()).waiting == queued.waiting
