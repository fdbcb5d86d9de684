"""``trigger_queue``: which tasks get it, what the scheduler then sees, and what Airflow's own deferral
takes from it (the task SDK's ``_defer_task``, run on the operator itself)."""
from __future__ import annotations

import inspect
from types import SimpleNamespace

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import TaskDeferred
from airflow.serialization.serialized_objects import DagSerialization

from tests.unit.test_records import record
from tfk8s_airflow import features
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.operators.base import on_trigger_queue
from tfk8s_airflow.operators.staging import GlusterFSStageOperator, HdfsStageOperator
from tfk8s_airflow.sensors.hdfs import HdfsPartitionSensor
from tfk8s_airflow.sensors.job import TFJobSensor
from tfk8s_airflow.taskgroup import tf_job
from tfk8s_airflow.triggers.job import TFJobTrigger

SPEC = {"name": "tq", "image": "i:1", "ps": 1, "worker": 2}
QUEUE = "tfk8s-training"


def _group(**kwargs) -> tuple[dict, dict]:
    """The job's tasks as the DAG file builds them (what a worker runs) and as the DAG processor stores
    them (what the scheduler reads)."""
    with DAG("tq", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        tf_job("train", spec=SPEC, **kwargs)
    stored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    return {t.task_id: t for t in dag.tasks}, {t.task_id: t for t in stored.tasks}


def test_every_task_of_the_job_that_defers_carries_the_queue_and_starts_on_a_worker():
    tasks, stored = _group(trigger_queue=QUEUE)
    assert tasks["train.replica"].partial_kwargs["trigger_queue"] == QUEUE
    assert stored["train.replica"].partial_kwargs["trigger_queue"] == QUEUE
    assert tasks["train.wait"].trigger_queue == QUEUE
    assert tasks["train.teardown"].trigger_queue == QUEUE
    assert not hasattr(tasks["train.setup"], "trigger_queue")  # setup never defers
    # A trigger the scheduler creates for a task that starts in the triggerer has no queue, so these start
    # on a worker (what the scheduler reads from the stored DAG).
    assert not stored["train.replica"].start_from_trigger
    assert not stored["train.wait"].start_from_trigger


def test_without_a_queue_the_job_starts_in_the_triggerer_as_before():
    tasks, stored = _group()
    assert stored["train.replica"].start_from_trigger and stored["train.wait"].start_from_trigger
    assert tasks["train.replica"].partial_kwargs.get("trigger_queue") is None
    assert tasks["train.wait"].trigger_queue is None


def test_replicas_start_from_trigger_false_builds_the_group():
    """``replicas_start_from_trigger=False`` reaches the mapped replica task (an argument of its operator)."""
    _, stored = _group(replicas_start_from_trigger=False)
    assert not stored["train.replica"].start_from_trigger
    assert stored["train.wait"].start_from_trigger


@pytest.mark.parametrize("bad", ["", "   ", 7, "q" * 257])
def test_a_bad_queue_fails_when_the_dag_is_parsed_naming_the_argument(bad):
    for build in (lambda: _group(trigger_queue=bad),
                  lambda: HdfsStageOperator(task_id="s", input_path="/d", trigger_queue=bad),
                  lambda: GlusterFSStageOperator(task_id="g", input_path="/d", trigger_queue=bad),
                  lambda: HdfsPartitionSensor(task_id="w", path="/d", trigger_queue=bad)):
        with pytest.raises(SpecError, match="trigger_queue: must be a queue name"):
            build()


def test_the_staging_tasks_keep_their_queue():
    assert HdfsStageOperator(task_id="s", input_path="/d", trigger_queue=QUEUE).trigger_queue == QUEUE
    assert GlusterFSStageOperator(task_id="g", input_path="/d", trigger_queue=QUEUE).trigger_queue == QUEUE
    assert HdfsPartitionSensor(task_id="w", path="/d", trigger_queue=QUEUE).trigger_queue == QUEUE


def _deferral(sensor: TFJobSensor) -> TaskDeferred:
    with pytest.raises(TaskDeferred) as info:
        sensor.execute({})
    return info.value


def _airflow_defer_message(sensor: TFJobSensor, deferral: TaskDeferred):
    """Airflow's own deferral step (the task SDK's ``_defer_task``), given the running task as its task
    instance's ``task``: the DeferTask message whose ``queue`` becomes the trigger row's."""
    import structlog
    from airflow.sdk.execution_time.task_runner import _defer_task

    ti = SimpleNamespace(task=sensor, dag_id="tq", task_id=sensor.task_id, run_id="r")
    msg, _ = _defer_task(deferral, ti, structlog.get_logger("test"))  # type: ignore[arg-type]
    return msg


def test_airflow_puts_the_trigger_on_the_queue_when_queues_are_enabled(monkeypatch):
    monkeypatch.setenv("AIRFLOW__TRIGGERER__QUEUES_ENABLED", "True")
    sensor = TFJobSensor(task_id="wait", job=record().to_xcom(), trigger_queue=QUEUE)
    deferral = _deferral(sensor)
    assert isinstance(deferral.trigger, TFJobTrigger)
    assert _airflow_defer_message(sensor, deferral).queue == QUEUE
    # The control: the same sensor without a trigger_queue gets the task's own queue.
    plain = TFJobSensor(task_id="wait", job=record().to_xcom())
    assert _airflow_defer_message(plain, _deferral(plain)).queue == plain.queue != QUEUE


def test_without_queues_enabled_the_queue_is_not_applied_and_the_log_says_how_to(monkeypatch, capsys):
    monkeypatch.setenv("AIRFLOW__TRIGGERER__QUEUES_ENABLED", "False")
    sensor = TFJobSensor(task_id="wait", job=record().to_xcom(), trigger_queue=QUEUE)
    before = sensor.queue
    on_trigger_queue(sensor)
    assert sensor.queue == before
    out = capsys.readouterr().out  # the task logger writes through structlog
    assert "queues_enabled is off" in out and "queues_enabled = True" in out
    assert _airflow_defer_message(sensor, _deferral(sensor)).queue is None


def test_the_scheduler_gives_a_trigger_it_starts_no_queue():
    """Why a task with a trigger_queue starts on a worker: the scheduler creates the trigger of a task that
    starts in the triggerer without a queue (TaskInstance.defer_task). If a release passes one, this fails
    and features.trigger_queue_note and tf_job's rule can go."""
    from airflow.models.taskinstance import TaskInstance

    source = inspect.getsource(TaskInstance.defer_task) if hasattr(TaskInstance, "defer_task") else ""
    if not features.has(features.START_FROM_TRIGGER):
        # Airflow 3.2: the scheduler starts no task in the triggerer, so it creates no trigger at all.
        assert "Trigger(" not in source
        return
    trigger_call = source[source.index("Trigger("):source.index(")", source.index("Trigger("))]
    assert "queue" not in trigger_call, trigger_call
    assert "start_from_trigger" in features.trigger_queue_note(QUEUE)
