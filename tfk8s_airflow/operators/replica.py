"""One replica of a TF job as a KubernetesPodOperator task.

Why a thin subclass and not a rewrite: the provider already builds the pod from a
template dict, labels it with the task instance, finds a previous try's pod by
those labels and reuses it if it still runs (durable reattach), and retries
transient API errors. We keep all of that and change three things:

* ``detach`` (default): the task ends once the API has the pod (or its previous
  try's pod was found). Training replicas, parameter servers above all, never end
  on their own; the job sensor judges the whole group with one LIST per poll.
* The replica's own ``restartPolicy`` (OnFailure for workers) survives: the
  provider forces ``Never`` on the pods it builds.
* The pod keeps our name ``<job>-<role>-<i>`` (no random suffix), so ``kubectl``
  users and teardown archives see stable names; retries find the pod by labels.

``on_kill_action="keep_pod"``: a killed or restarted Airflow worker never kills
a training replica (teardown, which always runs, deletes the job), and
``durable=True`` makes a restarted task reattach to its pod instead of creating
a second one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

from tfk8s_airflow.contract import CONTAINER_NAME


class TFReplicaPodOperator(KubernetesPodOperator):
    """Launches one TF replica pod from a pod manifest built by :mod:`tfk8s_airflow.job.objects`."""

    ui_color = "#c9e4ff"
    # The pod manifest comes from the setup task fully rendered. Rendering it again would
    # render user text twice and, under render_template_as_native_obj=True, turn JSON
    # strings such as TF_CONFIG into Python dicts (the pod would get their repr).
    template_fields: Sequence[str] = tuple(
        f for f in KubernetesPodOperator.template_fields if f != "pod_template_dict")

    def __init__(self, *, detach: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("base_container_name", CONTAINER_NAME)
        kwargs.setdefault("random_name_suffix", False)
        kwargs.setdefault("on_kill_action", "keep_pod")
        kwargs.setdefault("on_finish_action", "keep_pod")
        kwargs.setdefault("durable", True)
        kwargs.setdefault("get_logs", not detach)
        kwargs.setdefault("startup_check_interval_seconds", 1)
        kwargs.setdefault("log_events_on_failure", True)
        super().__init__(**kwargs)
        self.detach = detach

    def build_pod_request_obj(self, context: Any = None, *, dry_run: bool = False):
        pod = super().build_pod_request_obj(context, dry_run=dry_run)
        wanted = ((self.pod_template_dict or {}).get("spec") or {}).get("restartPolicy")
        if wanted:
            pod.spec.restart_policy = wanted
        return pod

    def execute(self, context: Any) -> Any:
        if not self.detach:
            return super().execute(context)
        self.name = self._set_name(self.name)
        self.pod_request_obj = self.build_pod_request_obj(context)
        self.pod = self.get_or_create_pod(pod_request_obj=self.pod_request_obj, context=context)
        ti = context["ti"]
        ti.xcom_push(key="pod_name", value=self.pod.metadata.name)
        ti.xcom_push(key="pod_namespace", value=self.pod.metadata.namespace)
        self.log.info("replica pod %s/%s launched; the job sensor tracks it from here",
                      self.pod.metadata.namespace, self.pod.metadata.name)
        return None
