"""Typed records between tasks: they round-trip through XCom's JSON and refuse what they cannot read."""
import json

import pytest

from tfk8s_airflow.exceptions import RecordError
from tfk8s_airflow.job.judge import JobPolicy
from tfk8s_airflow.job.objects import JobNames, plan_replicas
from tfk8s_airflow.job.records import RECORD_VERSION, JobRecord, ReplicaResult, TriggerOutcome
from tfk8s_airflow.job.resolve import job_record
from tfk8s_airflow.job.spec import TFJobSpec

SPEC = TFJobSpec.from_dict({"name": "rec", "image": "i:1", "chief": 1, "ps": 2, "worker": 3,
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
    assert rec.log_dir == "/mnt/v/logs" and rec.policy["active_deadline"] == 600.0
    assert JobRecord.from_xcom(data).templates_digest == "sha256:" + "ab" * 32
    assert "s3cret" not in json.dumps(data)  # the spec (and its env values) never travels in XCom
    with pytest.raises(RecordError, match="map index 6 is outside the job's 6 replicas"):
        rec.replica(6)


def test_the_clean_pod_policy_travels_to_teardown_and_older_records_read_as_all():
    spec = TFJobSpec.from_dict({**SPEC.to_dict(), "clean_pod_policy": "None", "finished_pod_ttl": "3s"})
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
    res = ReplicaResult(key="worker-1", pod="p", state="failed", reason="exit code 3", exit_code=3)
    out = TriggerOutcome("replica", "failed", "exit code 3", replica=res)
    assert TriggerOutcome.from_payload(out.to_payload()) == out
    job = TriggerOutcome("job", "succeeded", "ok", summary={"job": "j"})
    assert TriggerOutcome.from_payload(json.loads(json.dumps(job.to_payload()))) == job
    with pytest.raises(RecordError, match="unknown state"):
        TriggerOutcome.from_payload({**job.to_payload(), "state": "weird"})
