"""What the running Airflow offers of the features that need a newer release than the minimum.

Why: the package supports every Airflow from 3.2.0 (README, "Supported versions"); two
features of it need 3.3, and on 3.2 they degrade, saying so, instead of pinning every
deployment up:

- tasks that start in the triggerer (``start_from_trigger``): Airflow 3.1 and 3.2 ship the
  scheduler's part disabled, so a replica task and the job sensor start on a worker and defer
  from there (the path of ``replicas_start_from_trigger=False``): each holds a worker slot for
  seconds, until it defers, and its outcome is the same;
- XComs written from the triggerer while a task waits (``XCom.aset``, task SDK 1.3): the
  sensor's XCom ``progress`` and the links are then stored only when the task ends;
- partition keys on Asset events (``outlet_events[asset].add_partitions``, task SDK 1.3): a
  staging task's event then carries its partition in its extra only (``extra["partition"]``,
  which every release gets), and no partitioned DAG schedules on it (partitioned DAGs are
  Airflow 3.3's too).

Trigger queues (``[triggerer] queues_enabled``, ``airflow triggerer --queues``) are Airflow 3.2's, the
minimum: every supported release has them. One limit of them is Airflow's on every release: a trigger
that the scheduler creates for a task that starts in the triggerer gets no queue (only a task that
defers gets its queue on its trigger), so a task with a ``trigger_queue`` starts on a worker and
defers from there (:func:`trigger_queue_note`).

The cncf.kubernetes provider supported from 10.15 renamed one argument the replica tasks set:
``reattach_on_restart`` (a restarted task reattaches to its pod instead of creating another) is
deprecated in 10.25 for ``durable``, which takes effect from Airflow 3.3 on (below, the provider
reattaches by labels as before and warns that ``durable`` does nothing). :func:`reattach_kwargs`
names the one the installed pair takes without a warning.
"""

from __future__ import annotations

import re

__all__ = ["ASSET_PARTITIONS", "DURABLE", "MINIMUM", "PROVIDER_DURABLE", "START_FROM_TRIGGER",
           "XCOM_FROM_TRIGGERER", "airflow_version", "has", "provider_version", "reattach_kwargs",
           "trigger_queue_note", "worker_start_note", "xcom_from_triggerer_note"]

#: The oldest Airflow the package supports (setup.cfg's pin says the same).
MINIMUM = (3, 2, 0)
#: The first Airflow whose scheduler starts a task in the triggerer (``start_from_trigger``).
START_FROM_TRIGGER = (3, 3, 0)
#: The first Airflow whose task SDK writes an XCom from the triggerer (``XCom.aset``).
XCOM_FROM_TRIGGERER = (3, 3, 0)
#: The first cncf.kubernetes provider with ``KubernetesPodOperator(durable=)``, deprecating ``reattach_on_restart``.
PROVIDER_DURABLE = (10, 25, 0)
#: The first Airflow on which ``durable`` takes effect (the provider keeps the pod's identity in the task state store).
DURABLE = (3, 3, 0)
#: The first Airflow whose task SDK puts partition keys on an Asset event (``add_partitions``).
ASSET_PARTITIONS = (3, 3, 0)


def _parse(text: str) -> tuple[int, int, int]:
    numbers = [int(n) for n in re.findall(r"\d+", text.split("+")[0])[:3]]
    numbers += [0] * (3 - len(numbers))
    return numbers[0], numbers[1], numbers[2]


def airflow_version() -> tuple[int, int, int]:
    """The running Airflow's (major, minor, patch)."""
    from airflow import __version__

    return _parse(__version__)


def provider_version() -> tuple[int, int, int]:
    """The installed cncf.kubernetes provider's (major, minor, patch)."""
    from airflow.providers.cncf.kubernetes import __version__

    return _parse(__version__)


def has(since: tuple[int, int, int]) -> bool:
    """Whether the running Airflow is ``since`` or newer."""
    return airflow_version() >= since


def _dotted(version: tuple[int, int, int]) -> str:
    return ".".join(str(n) for n in version)


def reattach_kwargs() -> dict[str, bool]:
    """The KubernetesPodOperator argument that makes a restarted task reattach to its pod, as the
    installed provider and Airflow take it without a deprecation warning (always on, as before)."""
    if provider_version() < PROVIDER_DURABLE:
        return {"reattach_on_restart": True}
    if has(DURABLE):
        return {"durable": True}
    return {}  # provider 10.25+ below Airflow 3.3: reattaching is its default, and durable only warns


def worker_start_note() -> str | None:
    """Why a task meant to start in the triggerer runs on a worker here, or None when it would not."""
    if has(START_FROM_TRIGGER):
        return None
    return (f"Airflow {_dotted(airflow_version())} starts this task on a worker, which defers it to the "
            f"triggerer (starting in the triggerer, start_from_trigger, needs Airflow "
            f"{_dotted(START_FROM_TRIGGER)}); the outcome is the same")


def xcom_from_triggerer_note() -> str:
    """What the triggerer cannot do on this Airflow (an XCom written while the task waits)."""
    return (f"Airflow {_dotted(airflow_version())} cannot write an XCom from the triggerer (XCom.aset needs "
            f"Airflow {_dotted(XCOM_FROM_TRIGGERER)}): progress and links are stored when the task ends")


def trigger_queue_note(queue: str) -> str:
    """Why a task that would start in the triggerer starts on a worker when it has a ``trigger_queue``."""
    return (f"trigger_queue {queue!r}: this task starts on a worker and defers to the triggerer from there (a "
            f"trigger the scheduler starts, start_from_trigger, gets no queue in Airflow "
            f"{_dotted(airflow_version())}); the outcome is the same")
