"""The staging lease's objects and arithmetic (tfk8s_airflow.staging.lease); what Kubernetes does with
them (the Job controller ends it, the TTL controller deletes it, the garbage collector takes the pods) is
tested on the devstack in tests/e2e/test_stage_cancel.py and tests/staging/test_stage_lease.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.staging.lease import (
    has_expired,
    is_lease,
    lease_job,
    lease_name,
    owner_reference,
    renewed_deadline,
)


def test_the_lease_job_runs_no_pod_ends_at_its_deadline_and_is_deleted_when_it_ends():
    labels = {"tfk8s.io/staging": "0123456789ab"}
    job = lease_job("0123456789ab", "staging", labels, 300, "reg/stage:1",
                    ({"runAsNonRoot": True}, {"allowPrivilegeEscalation": False}))
    assert job["metadata"] == {"name": "tfk8s-stage-0123456789ab-lease", "namespace": "staging", "labels": labels}
    spec = job["spec"]
    assert spec["parallelism"] == 0 and spec["activeDeadlineSeconds"] == 300 and spec["ttlSecondsAfterFinished"] == 0
    assert spec["backoffLimit"] == 0
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["securityContext"] == {"runAsNonRoot": True}
    assert pod["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False}
    assert len(lease_name("0123456789ab")) <= 63


def test_an_owner_reference_owns_without_controlling():
    ref = owner_reference("tfk8s-stage-k-lease", "uid-1")
    assert ref == {"apiVersion": "batch/v1", "kind": "Job", "name": "tfk8s-stage-k-lease", "uid": "uid-1"}
    assert "controller" not in ref and "blockOwnerDeletion" not in ref


@given(age=st.floats(0, 10**7), lease=st.integers(1, 10**6))
def test_a_renewal_ends_the_lease_one_lease_from_now(age, lease):
    started, now = 1_700_000_000.0, 1_700_000_000.0 + age
    deadline = renewed_deadline(started, now, lease)
    assert started + deadline >= now + lease and started + deadline < now + lease + 1


def test_a_renewal_of_a_job_whose_clock_runs_ahead_still_gives_a_whole_lease():
    assert renewed_deadline(started=1000.0, now=990.0, lease_s=60) == 60


def test_an_ended_job_cannot_be_renewed():
    assert has_expired([SimpleNamespace(type="Failed", status="True")])
    assert has_expired([{"type": "FailureTarget", "status": "True"}])
    assert not has_expired([{"type": "Failed", "status": "False"}]) and not has_expired(None)
    assert not has_expired([SimpleNamespace(type="Suspended", status="True")])


def test_the_lease_is_the_deployments_setting():
    assert fanout.CopySettings().lease == 300
    assert fanout.CopySettings.from_settings({"staging_lease": "45"}.get).lease == 45
    with pytest.raises(SpecError, match=r"\[tfk8s\] staging_lease"):
        fanout.CopySettings.from_settings({"staging_lease": "0"}.get)


def test_the_trigger_carries_the_lease_it_renews():
    from tfk8s_airflow.triggers.staging import CopyPodsTrigger

    trigger = CopyPodsTrigger(namespace="ns", key="k", pods={"0": "p"}, part_bytes={"0": 1}, part_items={"0": 1},
                              kubernetes_conn_id=None, started=0.0, lease=45)
    _, kwargs = trigger.serialize()
    assert kwargs["lease"] == 45 and CopyPodsTrigger(**kwargs).lease == 45


def test_no_spec_may_read_a_staging_tasks_secret_whatever_allowed_secrets_says():
    from tfk8s_airflow.job.policy import DeploymentPolicy

    policy = DeploymentPolicy(allowed_secrets=("*", "staging/*"))
    for namespace in ("default", "staging"):
        problem = policy.secret_problem("env.T.value_from", namespace, "tfk8s-stage-0123456789ab-hdfs-1a2b3c4d")
        assert problem is not None and "staging tasks' own Secrets" in problem.message
    assert policy.secret_problem("env.T.value_from", "default", "db") is None


def test_a_kerberos_copys_token_never_lives_in_the_jobs_default_namespace():
    with pytest.raises(SpecError, match=r"\[tfk8s\] staging_namespace"):
        fanout.check_token_namespace("default", "default")
    fanout.check_token_namespace("staging", "default")


def test_a_token_secrets_name_cannot_be_predicted():
    from tfk8s_airflow.k8s.tokensecret import env_entry, new_secret_name

    names = {new_secret_name("0123456789ab") for _ in range(50)}
    assert len(names) == 50 and all(n.startswith("tfk8s-stage-0123456789ab-hdfs-") and len(n) <= 63 for n in names)
    name = next(iter(names))
    assert env_entry(name)["valueFrom"]["secretKeyRef"] == {"name": name, "key": "token"}


def test_only_a_job_that_ends_is_a_lease():
    spec = lease_job("0123456789ab", "staging", {}, 300, "img")["spec"]
    assert is_lease(spec)
    assert is_lease(SimpleNamespace(parallelism=0, suspend=None, ttl_seconds_after_finished=0,
                                    active_deadline_seconds=300))
    for change in ({"suspend": True}, {"parallelism": 1}, {"ttlSecondsAfterFinished": None},
                   {"ttlSecondsAfterFinished": 3600}, {"activeDeadlineSeconds": None}):
        assert not is_lease({**spec, **change}), change
    assert not is_lease(None)


def test_a_tokens_handle_keeps_its_identifier_and_drops_its_password():
    import base64

    from tfk8s_airflow.exceptions import StagingError
    from tfk8s_airflow.staging.delegation import handle

    def encode(identifier: bytes, password: bytes, rest: bytes) -> str:
        def vint(n: int) -> bytes:  # Hadoop WritableUtils, non-negative
            if n <= 127:
                return bytes([n])
            body = n.to_bytes((n.bit_length() + 7) // 8, "big")
            return bytes([256 - 112 - len(body)]) + body
        raw = vint(len(identifier)) + identifier + vint(len(password)) + password + rest
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    rest = b"\x12WEBHDFS delegation\x0e127.0.0.1:8020"
    for size in (30, 200):  # a one-byte and a two-byte length
        identifier = bytes(range(size % 256))[:size] + b"x" * max(0, size - 256)
        got = handle(encode(identifier, b"p" * 20, rest))
        assert got == encode(identifier, b"", rest)
        assert b"p" * 20 not in base64.urlsafe_b64decode(got + "=" * (-len(got) % 4))
    with pytest.raises(StagingError, match="does not read as one"):
        handle(encode(b"i" * 30, b"", b"")[:10])
