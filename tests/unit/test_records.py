"""Typed records between tasks: they round-trip through XCom's JSON and refuse what they cannot read."""
import json

import pytest

from tfk8s_airflow.exceptions import RecordError
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy, evaluate
from tfk8s_airflow.job.run.records import (
    RECORD_VERSION,
    JobProgress,
    JobRecord,
    JobSummary,
    ReplicaResult,
    TriggerOutcome,
)
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.states import EndState, JobState

SPEC = parse_spec({"name": "rec", "image": "i:1", "chief": 1, "ps": 2, "worker": 3,
                            "env": {"API_TOKEN": "s3cret"},
                            "volumes": [{"name": "logs", "mount_path": "/logs", "host_path": "/mnt/v/logs"}]})


def record() -> JobRecord:
    names = JobNames.for_run(SPEC, "manual__1", "train", "dag")
    return job_record(SPEC, names, plan_replicas(SPEC, names), policy=JobPolicy.from_spec(SPEC, 600),
                      has_shards=False, kubernetes_conn_id="k8s", poll_interval=2.0, created_at=1.5,
                      templates_digest="sha256:" + "ab" * 32)


def test_job_record_round_trips_and_holds_the_plan_in_map_index_order():
    rec = record()
    data = rec.to_xcom()
    assert data["version"] == RECORD_VERSION
    assert JobRecord.from_xcom(data) == rec == JobRecord.from_xcom(json.dumps(data))
    assert [r.key for r in rec.replicas] == ["chief-0", "ps-0", "ps-1", "worker-0", "worker-1", "worker-2"]
    assert rec.replica(1).pod.endswith("-ps-0") and not rec.replica(1).tracked
    assert rec.log_dir == "/mnt/v/logs" and rec.policy.active_deadline == 600.0
    assert JobRecord.from_xcom(data).templates_digest == "sha256:" + "ab" * 32
    assert "s3cret" not in json.dumps(data)  # the spec (and its env values) never travels in XCom
    with pytest.raises(RecordError, match="map index 6 is outside the job's 6 replicas"):
        rec.replica(6)


def test_the_clean_pod_policy_travels_to_teardown_and_older_records_read_as_all():
    spec = parse_spec({**SPEC.to_dict(), "clean_pod_policy": "None", "finished_pod_ttl": "3s"})
    names = JobNames.for_run(spec, "manual__1", "train", "dag")
    rec = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec, 600),
                     has_shards=False, kubernetes_conn_id="k8s", poll_interval=2.0, created_at=1.5)
    data = json.loads(json.dumps(rec.to_xcom()))
    back = JobRecord.from_xcom(data)
    assert back == rec and (back.clean_pod_policy, back.finished_pod_ttl) == ("None", 3) and back.keeps_finished_pods
    older = {k: v for k, v in data.items() if k not in ("clean_pod_policy", "finished_pod_ttl")}
    old = JobRecord.from_xcom(older)  # written before the fields existed: teardown deletes everything, as then
    assert (old.clean_pod_policy, old.finished_pod_ttl, old.keeps_finished_pods) == ("All", 0, False)
    assert not JobRecord.from_xcom({**data, "finished_pod_ttl": 0}).keeps_finished_pods
    assert not record().keeps_finished_pods  # the default, All
    with pytest.raises(RecordError, match="clean_pod_policy 'Some'.*clear the task group"):
        JobRecord.from_xcom({**data, "clean_pod_policy": "Some"})


def test_records_refuse_another_version_or_shape_naming_the_fix():
    data = record().to_xcom()
    with pytest.raises(RecordError, match="record version 99.*clear the task group"):
        JobRecord.from_xcom({**data, "version": 99})
    with pytest.raises(RecordError, match="expected a mapping"):
        JobRecord.from_xcom([1, 2])
    del data["selector"]
    with pytest.raises(RecordError, match="selector"):
        JobRecord.from_xcom(data)


def test_trigger_outcome_is_one_vocabulary_for_jobs_and_replicas():
    res = ReplicaResult(key="worker-1", pod="p", state=EndState.FAILED, reason="exit code 3", exit_code=3)
    out = TriggerOutcome("replica", EndState.FAILED, "exit code 3", replica=res)
    assert TriggerOutcome.from_payload(out.to_payload()) == out
    summary = JobSummary(job="j", namespace="ns", state=JobState.SUCCEEDED, reason="ok")
    job = TriggerOutcome("job", EndState.SUCCEEDED, "ok", summary=summary)
    assert TriggerOutcome.from_payload(json.loads(json.dumps(job.to_payload()))) == job
    assert job.to_payload()["state"] == "succeeded" and type(job.to_payload()["state"]) is str
    with pytest.raises(RecordError, match="unknown state"):
        TriggerOutcome.from_payload({**job.to_payload(), "state": "weird"})


#: The keys of the job sensor's XCom ``summary`` (docs/operators.md): a consumer reads them by name.
SUMMARY_KEYS = {"job", "namespace", "state", "reason", "failed_pod", "failed_container", "failure_class",
                "failed_replica", "stopped", "counts", "replicas", "tensorboard_url"}


def test_the_summary_is_one_typed_record_whose_json_keeps_its_keys_and_strings():
    rec = record()
    pods = [{"metadata": {"name": f"{ref.pod}", "labels": {"tfk8s.io/role": ref.role, "tfk8s.io/index": str(ref.index)},
                          "creationTimestamp": 1.5},
             "status": {"phase": "Failed" if ref.key == "worker-1" else "Running",
                        "containerStatuses": [{"name": "tensorflow", "restartCount": 0,
                                               "state": {"terminated": {"exitCode": 3}} if ref.key == "worker-1"
                                               else {"running": {}}}]}} for ref in rec.replicas]
    status = evaluate(pods, rec.policy, 10.0, rec.created_at)
    assert status.state is JobState.FAILED
    progress = JobProgress(job=rec.job, namespace=rec.namespace, state=JobState.FAILED, updated_at=2.0, step=5)
    summary = JobSummary.of(rec, status, tensorboard_url=None, progress=progress,
                            overrides={"worker-1": {"memory": 2.0}})
    data = json.loads(json.dumps(summary.to_xcom()))
    assert set(data) == SUMMARY_KEYS | {"progress", "attempts", "overrides"}
    assert data["state"] == "failed" and data["failed_replica"] == "worker-1" and data["failure_class"] == "code"
    assert data["replicas"]["worker-1"] == {"pod": rec.replica_by_key("worker-1").pod, "phase": "Failed",
                                            "restarts": 0, "exit_code": 3}
    assert data["progress"]["state"] == "failed" and data["attempts"] == []
    assert JobSummary.from_xcom(data) == summary == JobSummary.from_xcom(json.dumps(data))
    # The poke path's summary (no progress, no recovery): the same keys without the watch's extras.
    assert set(JobSummary.of(rec, status).to_xcom()) == SUMMARY_KEYS
    with pytest.raises(RecordError, match="job summary"):
        JobSummary.from_xcom({**data, "state": "weird"})
