"""One replica of a TF job as a KubernetesPodOperator task: that replica's live view.

Why a thin subclass that does not create its pod: setup creates the whole group in one
batch (held by scheduling gates until all exist), so each replica task only attaches to
its replica's pod, found by the provider's own task-instance labels (``find_pod``), and
waits for it deferrably. It ends with the replica's own outcome: a tracked replica (chief,
worker, evaluator) succeeds or fails with its exit code and reason; an untracked one (a PS,
a TF2 worker) succeeds when the job ended with it healthy and fails if it died first. Its
task log holds the replica's log (bounded, see :class:`~tfk8s_airflow.triggers.job.TFReplicaTrigger`);
when the job has a log directory, the whole log is streamed there and the task's **Replica log**
extra link opens it (:mod:`tfk8s_airflow.k8s.logstream`).

By default (``start_from_trigger``) the task starts in the triggerer and ends there: no
worker process is spent on a replica, however many there are, and a killed or restarted
Airflow worker cannot touch a replica (teardown alone deletes pods). With
``start_from_trigger=False`` (and under ``dag.test()``) it starts on a worker, finds its
pod through the provider's label lookup, defers, and resumes in :meth:`execute_complete`.

In the grid each replica task instance is labelled by its hostname when it started on a
worker; tasks that never touch a worker keep their map index (0, 1, ... in the plan's
order: chief, evaluator, ps-0.., worker-0..), because Airflow renders ``map_index_template``
only in a worker. The first line of every replica task's log names its replica.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from airflow.triggers.base import StartTriggerArgs

from tfk8s_airflow.contract import CONTAINER_NAME, LABEL_INDEX, LABEL_JOB, LABEL_ROLE
from tfk8s_airflow.features import reattach_kwargs, trigger_queue_note, worker_start_note
from tfk8s_airflow.job.run.records import JobRecord, TriggerOutcome
from tfk8s_airflow.job.states import EndState
from tfk8s_airflow.links import ReplicaLogLink, replica_log_url, store_link
from tfk8s_airflow.operators.base import check_trigger_queue, fail_permanently, on_trigger_queue
from tfk8s_airflow.triggers.job import TFReplicaTrigger

__all__ = ["TFReplicaPodOperator"]


def _later_attempt(pod: Any, record: JobRecord, ref: Any) -> bool:
    """A job with a Kueue queue recreates its pods under new names in each recovery attempt: the pod the
    task's labels find is then the replica's own when it is this job's, of this role and index."""
    labels = pod.metadata.labels or {}
    return bool(record.queue) and labels.get(LABEL_JOB) == record.job and labels.get(LABEL_ROLE) == ref.role \
        and labels.get(LABEL_INDEX) == str(ref.index)


class TFReplicaPodOperator(KubernetesPodOperator):
    """A replica task: attaches to the pod setup created for it and ends with its outcome.

    :param job: the job record of the setup task (its XCom ``job``).
    :param replica: this task's replica (``worker-0``); mapped tasks get it from setup's output.
    :param log_bytes: bytes of the replica's log written into the task log.
    :param trigger_queue: the triggerer queue of the task's trigger (``[triggerer] queues_enabled``; a
        triggerer started with ``--queues`` of that name runs it). The task then starts on a worker and
        defers from there (:func:`~tfk8s_airflow.features.trigger_queue_note`); a mapped one is given
        ``start_from_trigger=False`` beside it, as ``tf_job()`` does.
    :param start_from_trigger: start (and end) in the triggerer, the default; False starts on a worker.
    """

    ui_color = "#c9e4ff"
    operator_extra_links = (ReplicaLogLink(),)
    template_fields: Sequence[str] = ("job",)
    start_from_trigger = True
    start_trigger_args = StartTriggerArgs(
        trigger_cls=TFReplicaTrigger.classpath, next_method="execute_complete",
        trigger_kwargs={"end_in_trigger": True}, next_kwargs=None, timeout=None)

    def __init__(self, *, job: Any = None, replica: str | None = None, log_bytes: int | None = None,
                 trigger_queue: str | None = None, start_from_trigger: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("base_container_name", CONTAINER_NAME)
        kwargs.setdefault("on_kill_action", "keep_pod")
        kwargs.setdefault("on_finish_action", "keep_pod")
        if "durable" not in kwargs and "reattach_on_restart" not in kwargs:
            kwargs.update(reattach_kwargs())  # a restarted task reattaches to its pod (the provider's name for it)
        kwargs.setdefault("get_logs", False)
        super().__init__(**kwargs)
        self.job = job
        self.replica = replica
        self.log_bytes = log_bytes
        self.trigger_queue = check_trigger_queue(trigger_queue)
        # An argument (not only the class's attribute), so that a mapped replica task takes it from partial().
        self.start_from_trigger = bool(start_from_trigger) and not self.trigger_queue

    def execute(self, context: Any) -> Any:
        with fail_permanently():
            record = JobRecord.from_xcom(self.job)
            ti = context["ti"]
            ref = record.replica_by_key(self.replica) if self.replica else record.replica(ti.map_index)
        self.log.info("replica %s of TF job %s: pod %s/%s", ref.key, record.job, record.namespace, ref.pod)
        if self.start_from_trigger and (note := worker_start_note()):
            self.log.info("%s", note)
        if self.trigger_queue:
            self.log.info("%s", trigger_queue_note(self.trigger_queue))
        pod = self.find_pod(record.namespace, context)  # the provider's find-by-labels reattach
        if pod is None:
            self.log.warning("no pod of this task found by its labels; watching %s by name", ref.pod)
        elif pod.metadata.name != ref.pod and not _later_attempt(pod, record, ref):
            raise AirflowFailException(f"the task's labels find pod {pod.metadata.name}, not {ref.pod}: another "
                                       "job's pods carry this task's labels (fix: delete them)")
        kwargs: dict[str, Any] = {"job": record.to_xcom(), "replica": ref.key}
        if self.log_bytes:
            kwargs["log_bytes"] = self.log_bytes
        on_trigger_queue(self)
        self.defer(trigger=TFReplicaTrigger(**kwargs), method_name="execute_complete")

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        with fail_permanently():
            outcome = TriggerOutcome.from_payload(event)
        if outcome.replica is not None:
            context["ti"].xcom_push(key="replica", value=outcome.replica.to_xcom())
            self._store_log_link(context, outcome.replica.key)
        match outcome.state:
            case EndState.SUCCEEDED:
                return None
            case EndState.SKIPPED:
                raise AirflowSkipException(outcome.reason)
            case EndState.FAILED | EndState.TIMED_OUT:
                raise AirflowFailException(outcome.reason)
            case _:
                assert_never(outcome.state)

    def _store_log_link(self, context: Any, key: str) -> None:
        """The replica log link (deferred from a worker; from the triggerer, the trigger stores it)."""
        try:
            record = JobRecord.from_xcom(self.job)
        except Exception:  # noqa: BLE001 - no record here, no link: the outcome stands
            return
        if record.log_dir:
            store_link(context["ti"], ReplicaLogLink,
                       replica_log_url(context["dag"].dag_id, context["run_id"], record.job, key))


class TFReplicaWorkerStartPodOperator(TFReplicaPodOperator):
    """A replica task that starts on a worker and defers from there: what ``tf_job()`` maps when the
    replicas are not to start in the triggerer (``replicas_start_from_trigger=False``, or a
    ``trigger_queue``). The class's attribute, not only the argument: Airflow 3.2 takes a mapped
    task's ``start_from_trigger`` from its operator class and ignores ``partial()``'s."""

    start_from_trigger = False
