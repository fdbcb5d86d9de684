"""The pure parts of the job's shared watch take anything a pod, its log or its Service can hold.

A label or annotation of a pod or of the job's Service may be written by anyone who may patch
them in the namespace, and a progress line by the training program: every field the watch reads
is driven here with hostile values (wrong types, huge and non-finite numbers, digit-like text,
nesting), and the judge, the progress reader, the TensorBoard reader, the verdict and the
recovery state reader must answer (or, for the recovery state, refuse with a ValueError) and
never raise anything else. The real API server side is tests/security/test_watch_hostile.py.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfk8s_airflow.job.builders.tensorboard import tensorboard_state
from tfk8s_airflow.job.run.judge import JobPolicy, JobStatus, evaluate, read_replica
from tfk8s_airflow.job.run.progress import STEP_MAX, parse_progress, read_progress
from tfk8s_airflow.job.run.records import JobRecord, ReplicaRef
from tfk8s_airflow.job.run.recovery_policy import RecoveryPolicy
from tfk8s_airflow.job.run.recoverystate import read_attempts as read_for
from tfk8s_airflow.job.run.verdict import VERDICT_ANNOTATION, read_verdict
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.k8s.watch import checkpoint_step

FUZZ = settings(max_examples=400, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))

NASTY = ["", "x", "NaN", "Infinity", "-1", "1e3", "١", "²", " 1", "1 ", "0x10", "9" * 40, "\x00", "\u2028",
         "Running", "Succeeded", "Failed", "Pending", "2026-13-45T99:99:99Z", "tensorflow", "ps", "worker"]
scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from([2**63, -(2**63) - 1, 10**400]),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(NASTY))
hostile = st.recursive(scalar, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c,
                                                                                            max_size=3)), max_leaves=8)


def maybe(good):
    """The field as Kubernetes writes it, or a hostile value of any type, or absent."""
    return st.one_of(good, good, hostile)


timestamps = maybe(st.sampled_from(["2026-12-03T10:00:00Z", "2026-12-03T10:00:05+00:00"]))
terminated = st.fixed_dictionaries({}, optional={
    "exitCode": maybe(st.integers(-5, 300)), "reason": maybe(st.sampled_from(["OOMKilled", "Error", "Completed"])),
    "message": maybe(st.text(max_size=30)), "startedAt": timestamps, "finishedAt": timestamps})
container_status = st.fixed_dictionaries({"name": maybe(st.just("tensorflow"))}, optional={
    "restartCount": maybe(st.integers(0, 5)), "containerID": maybe(st.just("agent://x")),
    "state": maybe(st.fixed_dictionaries({}, optional={
        "terminated": maybe(terminated), "running": maybe(st.fixed_dictionaries({"startedAt": timestamps})),
        "waiting": maybe(st.fixed_dictionaries({"reason": maybe(st.text(max_size=10))}))})),
    "lastState": maybe(st.fixed_dictionaries({}, optional={"terminated": maybe(terminated)}))})
condition = st.fixed_dictionaries({"type": maybe(st.sampled_from(["PodScheduled", "DisruptionTarget", "Ready"])),
                                   "status": maybe(st.sampled_from(["True", "False"]))},
                                  optional={"reason": maybe(st.text(max_size=10)),
                                            "message": maybe(st.text(max_size=10))})
labels = st.fixed_dictionaries({
    "tfk8s.io/role": maybe(st.sampled_from(["ps", "worker"])), "tfk8s.io/index": maybe(st.sampled_from(["0", "1"]))},
    optional={"tfk8s.io/attempt": maybe(st.sampled_from(["1", "2"])), "tfk8s.io/job": maybe(st.just("j"))})
pods = st.fixed_dictionaries({
    "metadata": maybe(st.fixed_dictionaries(
        {"name": maybe(st.sampled_from(["j-ps-0", "j-worker-0", "j-worker-1", "j-tb"])), "labels": maybe(labels)},
        optional={"annotations": maybe(st.dictionaries(st.text(max_size=20), hostile, max_size=3)),
                  "creationTimestamp": timestamps, "deletionTimestamp": maybe(timestamps)})),
    "spec": maybe(st.fixed_dictionaries({}, optional={
        "nodeName": maybe(st.just("n1")), "schedulingGates": maybe(st.lists(st.fixed_dictionaries(
            {"name": maybe(st.just("tfk8s.io/gang"))}), max_size=2)),
        "containers": maybe(st.lists(st.fixed_dictionaries({"name": maybe(st.just("tensorflow")),
                                                            "command": maybe(st.just(["python"]))}), max_size=2))})),
    "status": maybe(st.fixed_dictionaries({}, optional={
        "phase": maybe(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])), "reason": maybe(st.text()),
        "startTime": timestamps, "podIP": maybe(st.just("10.0.0.1")), "conditions": maybe(st.lists(condition,
                                                                                                     max_size=3)),
        "containerStatuses": maybe(st.lists(container_status, max_size=2)),
        "initContainerStatuses": maybe(st.lists(container_status, max_size=2))}))})
POLICY = JobPolicy(replicas={"ps": 1, "worker": 2}, tracked={"ps": False, "worker": True},
                   restart_policy={"ps": "Never", "worker": "OnFailure"}, success=(("worker", 0),), max_restarts=3,
                   schedule_timeout=60.0, startup_timeout=60.0, active_deadline=3600.0, straggler_timeout=30.0,
                   lead=("worker", 0))


#: The job whose Service carries the recovery state (an OOM factor, so memory overrides are allowed).
RECORD = JobRecord(job="j", namespace="ns", service="j", configmap="j-shards", selector="tfk8s.io/job=j",
                   policy={}, replicas=(ReplicaRef("worker-0", "worker", 0, "j-worker-0", True),), created_at=0.0,
                   recovery=RecoveryPolicy.from_dict({"oom_memory_factor": 2.0}))


def read_attempts(raw):
    return read_for(raw, RECORD)


@FUZZ
@given(items=st.lists(pods, max_size=4))
def test_the_judge_answers_whatever_the_pods_hold(items):
    status = evaluate(items, POLICY, 1.8e9, 1.8e9 - 10)
    assert isinstance(status, JobStatus)
    # what the sensor's summary is made of (JobSummary.of): plain data, built without raising
    json.dumps({"state": str(status.state), "reason": status.reason,
                "replicas": {k: r.summary() for k, r in status.replicas.items()}})
    for st_ in status.replicas.values():
        assert isinstance(st_.index, int) and st_.index >= 0 and isinstance(st_.attempt, int) and st_.attempt >= 1
        assert st_.exit_code is None or isinstance(st_.exit_code, int)
        assert all(v is None or math.isfinite(v) for v in (st_.created, st_.started, st_.finished))
    for pod, what in status.ignored:
        assert isinstance(pod, str) and isinstance(what, str) and len(what) < 400
    assert tensorboard_state(items, "j-tb") is None or tensorboard_state(items, "j-tb").phase


@pytest.mark.parametrize(("label", "value"), [("tfk8s.io/index", "x"), ("tfk8s.io/index", "1e3"),
                                              ("tfk8s.io/index", "١"), ("tfk8s.io/attempt", "NaN"),
                                              ("tfk8s.io/attempt", "9" * 40)])
def test_a_hostile_label_is_ignored_and_named(label, value):
    pod = {"metadata": {"name": "j-worker-0", "labels": {"tfk8s.io/role": "worker", "tfk8s.io/index": "0",
                                                         label: value}},
           "status": {"phase": "Running"}}
    st_, problems = read_replica(pod)
    assert problems and value[:20] in problems[0], problems
    if label == "tfk8s.io/attempt":
        assert st_ is not None and st_.attempt == 1 and st_.key == "worker-0"
    else:
        assert st_ is None  # no replica: the job's own worker-0 is judged missing, never aliased
    status = evaluate([pod], POLICY, 1.8e9, 1.8e9 - 10)
    assert status.ignored and status.ignored[0][0] == "j-worker-0"


def test_an_infinity_step_is_skipped_for_the_line_before_it():
    text = 'tfk8s.progress {"step": 10, "loss": 0.5}\ntfk8s.progress {"step": Infinity, "loss": NaN}\n'
    found, problem = read_progress(text)
    assert found == {"step": 10, "loss": 0.5}
    assert problem is not None and "Infinity" in problem
    assert parse_progress('tfk8s.progress {"step": Infinity}') is None
    assert parse_progress('tfk8s.progress {"step": 1e400}') is None
    assert parse_progress(f'tfk8s.progress {{"step": {STEP_MAX + 1}}}') is None
    assert parse_progress('tfk8s.progress {"step": 5, "target_step": 1e999, "loss": Infinity}') == {"step": 5}


progress_values = st.one_of(hostile, st.integers(-10, 2**60), st.sampled_from(["Infinity", "-Infinity", "NaN",
                                                                              "1e400", "12", "true"]))


@FUZZ
@given(doc=st.one_of(hostile, st.fixed_dictionaries({}, optional={
    "step": progress_values, "loss": progress_values, "examples_per_sec": progress_values,
    "target_step": progress_values})), raw=st.sampled_from(["", "Infinity", "NaN", "-Infinity", "1e400",
                                                           "[" * 5000, '{"step": ' + "9" * 5000 + "}"]),
       junk=st.text(max_size=40))
def test_progress_lines_never_raise(doc, raw, junk):
    lines = [f"tfk8s.progress {json.dumps(doc, allow_nan=True, default=str)}",
             f'tfk8s.progress {{"step": {raw}}}', f"tfk8s.progress {raw}", f"tfk8s.progress {junk}", junk]
    for text in ("\n".join(lines), "\n".join(reversed(lines))):
        found, _ = read_progress(text)
        if found is not None:
            assert isinstance(found["step"], int) and 0 <= found["step"] <= STEP_MAX
            assert all(math.isfinite(found[k]) for k in ("loss", "examples_per_sec") if k in found)
            assert isinstance(found.get("target_step", 0), int) and found.get("target_step", 0) <= STEP_MAX


@FUZZ
@given(doc=st.one_of(hostile, st.fixed_dictionaries({}, optional={
    "attempts": st.one_of(hostile, st.lists(st.one_of(hostile, st.fixed_dictionaries({}, optional={
        "number": progress_values, "failure_class": st.one_of(hostile, st.just("code")), "reason": hostile,
        "at": progress_values, "action": st.one_of(hostile, st.just("replace")),
        "replicas": st.one_of(hostile, st.just(["worker-0"]))})), max_size=3)),
    "overrides": st.one_of(hostile, st.dictionaries(st.one_of(st.just("worker-0"), st.text(max_size=8)), st.one_of(
        hostile, st.fixed_dictionaries({}, optional={"memory": progress_values, "avoid_nodes": hostile})),
        max_size=2))})))
def test_the_recovery_state_is_read_whole_or_refused(doc):
    raw = json.dumps(doc, allow_nan=True, default=str)
    try:
        attempts, overrides = read_attempts(raw)
    except ValueError as exc:
        assert str(exc)
        return
    for a in attempts:
        assert isinstance(a.number, int) and math.isfinite(a.at) and all(isinstance(r, str) for r in a.replicas)
    for key, o in overrides.items():
        assert "-" in key and (o.get("memory") is None or 0 < o["memory"] < 2**63)
    verdict = read_verdict({VERDICT_ANNOTATION: raw})
    assert verdict is None or verdict["state"] in ("succeeded", "failed", "ended")


def test_a_memory_override_of_1e15_is_bounded_by_type_and_a_string_is_refused():
    with pytest.raises(ValueError, match="memory"):
        read_attempts('{"attempts": [], "overrides": {"worker-0": {"memory": "1e15"}}}')
    with pytest.raises(ValueError, match="must be an object"):
        read_attempts('["attempts"]')
    with pytest.raises(ValueError, match="number"):
        read_attempts('{"attempts": [{"number": "x", "failure_class": "code", "reason": "", "at": 1}]}')
    assert read_attempts(None) == ([], {})


def test_a_checkpoint_step_of_five_thousand_digits_is_no_step(tmp_path):
    (tmp_path / "checkpoint").write_text(f'model_checkpoint_path: "model.ckpt-{"9" * 5000}"\n')
    assert checkpoint_step(str(tmp_path)) is None
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-١٢"\n')
    assert checkpoint_step(str(tmp_path)) is None
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1200"\n')
    assert checkpoint_step(str(tmp_path)) == 1200


def test_a_running_status_is_not_disturbed_by_what_was_ignored():
    pod = {"metadata": {"name": "j-worker-0", "labels": {"tfk8s.io/role": "worker", "tfk8s.io/index": "0",
                                                         "tfk8s.io/attempt": "x"}, "creationTimestamp": "never"},
           "status": {"phase": "Running"}}
    others = [{"metadata": {"name": f"j-{k}", "labels": {"tfk8s.io/role": k[:-2], "tfk8s.io/index": k[-1]}},
               "status": {"phase": "Running"}} for k in ("ps-0", "worker-1")]
    status = evaluate([pod, *others], POLICY, 1.8e9, 1.8e9 - 10)
    assert status.state == JobState.RUNNING and len(status.ignored) == 2


def test_an_integer_too_large_for_a_float_is_no_number_not_an_overflow():
    """JSON holds integers of any size; float() of one past 1.8e308 raises OverflowError (found by fuzzing)."""
    huge = 10 ** 400
    progress, _ = read_progress(f'tfk8s.progress {{"step": 3, "loss": {huge}, "examples_per_sec": {huge}}}\n')
    assert progress == {"step": 3}
    with pytest.raises(ValueError, match="at"):
        read_attempts(json.dumps({"attempts": [{"number": 2, "failure_class": "code", "reason": "", "at": huge}]}))
    with pytest.raises(ValueError, match="memory"):
        read_attempts(json.dumps({"overrides": {"worker-0": {"memory": huge}}}))
