"""The triggers of one job pull its record once per triggerer process.

The task instance here stands in for the Task SDK's RuntimeTaskInstance in the triggerer (whose
``axcom_pull`` goes through the supervisor to the API server); it is a fake at that boundary,
holding what setup pushed, and counts the pulls. The 512-replica launch benchmark runs the real one.
"""
from __future__ import annotations

import asyncio

import pytest

from tfk8s_airflow.exceptions import RecordError
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JOB_ID_KEY, JobRecord, ReplicaRef
from tfk8s_airflow.triggers import record_pull

NO_POLICY = JobPolicy(replicas={}, tracked={}, restart_policy={}, success=(), max_restarts=0, schedule_timeout=60.0,
                     startup_timeout=60.0, active_deadline=None)


def record(job: str, created_at: float, replicas: int = 3) -> JobRecord:
    return JobRecord(job=job, namespace="ns", service=job, configmap=f"{job}-shards", selector=f"tfk8s.io/job={job}",
                     policy=NO_POLICY, replicas=tuple(ReplicaRef(f"worker-{i}", "worker", i, f"{job}-worker-{i}", True)
                                               for i in range(replicas)), created_at=created_at)


class SetupXComs:
    """What the setup task pushed, pulled as a trigger pulls it (with a round trip's pause)."""

    def __init__(self, rec: JobRecord | None, with_id: bool = True) -> None:
        self.values: dict[str, object] = {}
        if rec is not None:
            self.push(rec, with_id)
        self.pulls: list[str] = []

    def push(self, rec: JobRecord, with_id: bool = True) -> None:
        self.values = {"job": rec.to_xcom(), **({JOB_ID_KEY: rec.job_id} if with_id else {})}

    async def axcom_pull(self, *, task_ids: str, key: str, map_indexes: int) -> object:
        assert (task_ids, map_indexes) == ("train.setup", -1)
        self.pulls.append(key)
        await asyncio.sleep(0.01)
        return self.values.get(key)


@pytest.fixture(autouse=True)
def empty_cache():
    record_pull._records.clear()
    yield
    record_pull._records.clear()


async def start(ti: SetupXComs, n: int) -> list[JobRecord]:
    return await asyncio.gather(*(record_pull.pull_record(ti, "train.setup") for _ in range(n)))


def test_513_triggers_starting_together_pull_the_record_once():
    rec = record("j1", 1000.5, replicas=512)
    ti = SetupXComs(rec)
    got = asyncio.run(start(ti, 513))
    assert all(r == rec for r in got)
    assert ti.pulls.count("job") == 1 and ti.pulls.count(JOB_ID_KEY) == 513
    asyncio.run(start(ti, 5))  # triggers started later (another loop, as dag.test runs them): from the cache
    assert ti.pulls.count("job") == 1


def test_a_setup_that_ran_again_is_pulled_again():
    ti = SetupXComs(record("j1", 1000.5))
    first = asyncio.run(start(ti, 4))[0]
    ti.push(record("j1", 2000.25))  # the run was cleared: setup created the job anew
    again = asyncio.run(start(ti, 4))[0]
    assert (first.created_at, again.created_at) == (1000.5, 2000.25)
    assert ti.pulls.count("job") == 2


def test_a_setup_without_job_id_fails_every_trigger_naming_the_setup_task():
    ti = SetupXComs(record("j1", 1000.5), with_id=False)  # not a setup of this package
    results = asyncio.run(asyncio.wait_for(_gather_errors(ti, 3), 5))
    assert all(isinstance(r, RecordError) and "train.setup pushed no XCom 'job_id'" in str(r) for r in results)
    assert "job" not in ti.pulls


def test_a_missing_record_fails_every_trigger_naming_the_setup_task():
    ti = SetupXComs(None)
    ti.values = {JOB_ID_KEY: "j1@1.0"}  # job_id without job: not a setup of this package
    results = asyncio.run(asyncio.wait_for(_gather_errors(ti, 3), 5))
    assert all(isinstance(r, RecordError) and "train.setup pushed no XCom 'job'" in str(r) for r in results)


async def _gather_errors(ti: SetupXComs, n: int) -> list[BaseException]:
    return await asyncio.gather(*(record_pull.pull_record(ti, "train.setup") for _ in range(n)),
                                return_exceptions=True)
