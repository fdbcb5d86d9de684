"""The progress history the sensor keeps (its summary's ``progress.history``) is bounded.

A job of a million steps polled every few seconds must not grow the summary XCom without
end: the watch keeps the newest ``HISTORY`` points, one per step increase, in step order.
The only stand-in here is the lead replica's log endpoint (``read_log``): a real apiserver
would need ``HISTORY`` + 1 polls of a real program to get there. The progress lines
themselves are the reference trainer's (``runtime.report``).
"""
import asyncio
import concurrent.futures
import io
import json

from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy, JobStatus, ReplicaState
from tfk8s_airflow.job.run.records import JobProgress
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.k8s.logreads import BoundedLog
from tfk8s_airflow.k8s.watch import HISTORY, JobWatch, WatchKey
from tfk8s_airflow.pod import runtime

SPEC = parse_spec({"name": "hist", "image": "i:1", "ps": 1, "worker": 2})
TARGET = 1_000_000


class LeadLog(JobWatch):
    """The watch's progress bookkeeping, with the lead replica's log written by the test."""

    def __init__(self):
        names = JobNames.for_run(SPEC, "manual__1", "train", "dag")
        rec = job_record(SPEC, names, plan_replicas(SPEC, names), policy=JobPolicy.from_spec(SPEC, 600),
                         has_shards=False, kubernetes_conn_id="k8s", poll_interval=1.0, created_at=1.0)
        super().__init__(rec, WatchKey(None, None, rec.namespace, rec.selector), 1.0, hook_factory=lambda: None)
        self.log_text = ""

    async def read_log(self, pod, container, *, max_bytes, tail_lines=5000, previous=False, tail_only=False):
        assert pod == self.record.lead.pod
        return BoundedLog(self.log_text)

    def report(self, step: int) -> None:
        out = io.StringIO()
        runtime.report(step, loss=1.0 / step, examples_per_sec=100.0, target_step=TARGET, stream=out)
        self.log_text += out.getvalue()


def running(watch: JobWatch) -> JobStatus:
    lead = watch.record.lead
    return JobStatus(JobState.RUNNING, replicas={lead.key: ReplicaState("worker", 0, lead.pod, "Running", started=1.0)})


def test_the_history_keeps_the_newest_points_in_step_order_and_no_more():
    async def polls():
        watch = LeadLog()
        status = running(watch)
        polled = HISTORY + 75
        for step in range(10, 10 * (polled + 1), 10):
            watch.report(step)
            await watch._read_progress(status)
            await watch._read_progress(status)  # a poll that sees no new step adds no point
        return watch, polled

    # In a thread of its own: an earlier test of the session may have left this thread's event loop running.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        watch, polled = pool.submit(asyncio.run, polls()).result()
    history = watch._snapshot(1, running(watch)).history
    assert len(history) == HISTORY < polled
    steps = [p.step for p in history]
    assert steps == list(range(10 * (polled - HISTORY + 1), 10 * (polled + 1), 10))  # the newest ones
    assert all(p.loss == round(1.0 / p.step, 6) for p in history)  # each point has its own line's loss
    # What the summary carries survives XCom's JSON with the same bound.
    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=0.0, step=steps[-1],
                           target_step=TARGET, history=history)
    back = JobProgress.from_xcom(json.loads(json.dumps(progress.to_xcom())))
    assert back.history == history and len(back.to_xcom()["history"]) == HISTORY
