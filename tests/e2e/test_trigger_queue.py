"""``tf_job(trigger_queue=...)`` on the real scheduler stack with two triggerers: the job's triggers run on
the triggerer that consumes the queue, and only there.

A stack of its own (PostgreSQL, LocalExecutor, scheduler, DAG processor, API server) with
``[triggerer] queues_enabled``: the stack's triggerer (no ``--queues``: it runs triggers without a queue)
and a second one started with ``airflow triggerer --queues tfk8s-training``. Two runs at once on the KWOK
nodes: ``tfk8s_t_trigger_queue`` (the job with ``trigger_queue="tfk8s-training"``) and the control
``tfk8s_t_trigger_default`` (the same job without). Which triggerer ran a trigger is read from the metadata
database, as Airflow records it: the ``trigger`` table's ``triggerer_id`` (polled while the runs go, since
a trigger's row is deleted once its task has resumed), matched to the triggerers' rows of the ``job`` table
(the second triggerer's row is the one that appears when it starts). Not from log lines: Airflow writes a
trigger's log lines to its task's log, whichever triggerer ran it.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from tests.e2e._support import leftovers, task_states, wait_gone
from tests.fixtures.airflow_services import running_stack
from tests.fixtures.waiting import wait_until
from tests.ports import free_port

pytestmark = [pytest.mark.k8s, pytest.mark.gluster, pytest.mark.airflow, pytest.mark.timeout(1200)]

QUEUE = "tfk8s-training"
QUEUED_DAG, CONTROL_DAG = "tfk8s_t_trigger_queue", "tfk8s_t_trigger_default"
#: The tasks of a tf_job group that defer (teardown defers only under clean_pod_policy Running/None).
DEFERRING = {"train.replica[0]", "train.replica[1]", "train.replica[2]", "train.wait"}


def _db(stack):
    """The stack's metadata database, as its services reach it."""
    from urllib.parse import urlsplit

    import psycopg2

    url = urlsplit(stack.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    conn = psycopg2.connect(host=url.hostname, port=url.port, user=url.username, password=url.password,
                            dbname=stack.database, connect_timeout=10)
    conn.autocommit = True
    return conn


def running_triggerers(conn) -> set[int]:
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM job WHERE job_type = 'TriggererJob' AND state = 'running'")
        return {row[0] for row in cur.fetchall()}


@dataclass
class Seen:
    task: str
    queue: str | None
    triggerers: set[int] = field(default_factory=set)


@dataclass
class TriggerTable:
    """Polls the ``trigger`` table joined to the task instances waiting on each trigger."""

    conn: object
    interval: float = 0.3
    seen: dict[tuple[str, str, int], Seen] = field(default_factory=dict)  # (dag, run, trigger id)
    polls: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="trigger-table")

    def _run(self) -> None:
        while not self._stop.is_set():
            with self.conn.cursor() as cur:  # type: ignore[attr-defined]
                cur.execute("SELECT t.id, t.queue, t.triggerer_id, ti.dag_id, ti.run_id, ti.task_id, ti.map_index "
                            "FROM trigger t JOIN task_instance ti ON ti.trigger_id = t.id")
                for trigger_id, queue, triggerer, dag, run, task, index in cur.fetchall():
                    name = f"{task}[{index}]" if index >= 0 else task
                    entry = self.seen.setdefault((dag, run, trigger_id), Seen(name, queue))
                    if triggerer is not None:
                        entry.triggerers.add(triggerer)
            self.polls += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> TriggerTable:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def of(self, dag: str, run: str) -> list[Seen]:
        return [s for (d, r, _), s in self.seen.items() if (d, r) == (dag, run)]


@pytest.fixture(scope="module")
def queue_stack(request, gluster_volume, k8s_cluster):
    with running_stack(request, gluster_volume, extra_env={"AIRFLOW__TRIGGERER__QUEUES_ENABLED": "True"},
                       dag_ids=(QUEUED_DAG, CONTROL_DAG)) as stack:
        yield stack


def _trigger(stack, dag_id: str, conf: dict) -> str:
    resp = stack.api.post(stack.url(f"api/v2/dags/{dag_id}/dagRuns"), json={"logical_date": None, "conf": conf},
                          timeout=60)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["dag_run_id"]


def test_the_jobs_triggers_run_on_the_queues_triggerer_only(queue_stack, k8s_cluster, k8s_namespace):
    stack, core = queue_stack, k8s_cluster.core_v1
    conn = _db(stack)
    (default_triggerer,) = running_triggerers(conn)
    stack.start_service("triggerer-training", ["triggerer", "--queues", QUEUE],
                        env={"AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())})
    queue_triggerer = wait_until(lambda: next(iter(running_triggerers(conn) - {default_triggerer}), None), 120,
                               "the second triggerer's job row", interval=1)
    print(f"triggerer job ids: default {default_triggerer}, --queues {QUEUE} {queue_triggerer}")

    t0 = time.monotonic()
    with TriggerTable(conn) as table:
        queued = _trigger(stack, QUEUED_DAG, {"namespace": k8s_namespace})
        control = _trigger(stack, CONTROL_DAG, {"namespace": k8s_namespace})
        runs = {r["dag_run_id"]: r for dag in (QUEUED_DAG, CONTROL_DAG)
                for r in stack.wait_for_runs(dag, [queued if dag == QUEUED_DAG else control], timeout=600,
                                             interval=2)}
    stack.check_alive()  # both triggerers ran to the end
    print(f"both runs in {time.monotonic() - t0:.0f}s; {table.polls} polls of the trigger table; "
          f"triggers seen: {len(table.seen)}")
    assert runs[queued]["state"] == "success", task_states(stack, QUEUED_DAG, queued)
    assert runs[control]["state"] == "success", task_states(stack, CONTROL_DAG, control)

    on_queue = table.of(QUEUED_DAG, queued)
    # Every deferring task of the job had a trigger on the queue, run by the queue's triggerer alone.
    assert {s.task for s in on_queue if s.triggerers} == DEFERRING, on_queue
    assert all(s.queue == QUEUE for s in on_queue), on_queue
    assert set().union(*(s.triggerers for s in on_queue)) == {queue_triggerer}, on_queue
    # The control (no trigger_queue): its triggers have no queue and the other triggerer ran them all.
    others = table.of(CONTROL_DAG, control)
    assert {s.task for s in others if s.triggerers} == DEFERRING, others
    assert all(s.queue is None for s in others), others
    assert set().union(*(s.triggerers for s in others)) == {default_triggerer}, others
    conn.close()
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)
