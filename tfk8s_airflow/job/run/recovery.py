"""Recovery beyond TFJob: what to do about a failure, decided purely from what the judge saw.

Why a planner separate from the judge: the judge says what failed and how it is classified
(:data:`~tfk8s_airflow.job.run.judge.FAILURE_CLASSES`); whether that ends the job depends on
budgets, on history (earlier attempts), on the nodes and on progress, and one place decides
it so the sensor, the replica tasks and the tests agree. The job's watch carries the
decision out (:mod:`tfk8s_airflow.k8s.relaunch`).

The rules (docs/recovery.md has the table):

* ``config`` (image pull, unschedulable, a bad code URI, a container that cannot start) and
  ``straggler`` never restart: the same spec would fail the same way.
* ``infrastructure`` (a disruption: preemption, eviction, node shutdown or loss, a pod deleted
  by someone else; a process killed by a signal) spends ``infra_restarts``, never the code
  budget. A lost parameter server restarts the whole group (its variables are gone); any other
  replica is replaced on its own, with the same name and DNS (a TF1 worker rejoins, a TF2
  coordinator tolerates a worker coming back, a chief resumes from its checkpoint).
* ``oom`` with ``oom_memory_factor``: the replica is recreated with that much more memory, up to
  ``max_memory`` (a parameter server again through a group restart); without it, or beyond the
  cap, the job fails as ``oom``. Each relaunch also spends ``infra_restarts``. The memory a
  recreated replica gets is never less than its spec asked (:func:`relaunch_memory`).
* ``restart_policy: ExitCode`` (TFJob's): the pod is ``Never``; an exit code >= 128 (a signal,
  an OOM kill, the runtime's retryable 138) recreates the replica's pod, with the same name and
  DNS (a parameter server: the whole group), up to ``max_restarts`` times for that replica, then
  fails the job; 1-127 are permanent and go on as ``code`` below (the program ran once). With
  ``oom_memory_factor``, an OOM kill is relaunched bigger as ``oom`` says instead.
* ``code`` (a program's own failure) and ``stalled`` (no progress for ``progress_timeout``)
  restart the whole group while ``group_restarts`` lasts, then fail.

A group restart or replacement waits ``restart_backoff`` first, and every attempt is recorded
(:class:`~tfk8s_airflow.job.run.records.Attempt`); a failure after restarts names every attempt.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from tfk8s_airflow.contract import is_retryable_exit
from tfk8s_airflow.job.run.judge import CODE, CONFIG, INFRASTRUCTURE, OOM, STALLED, JobStatus
from tfk8s_airflow.job.run.records import Attempt
from tfk8s_airflow.job.run.recovery_policy import RecoveryPolicy
from tfk8s_airflow.job.states import JobState

NONE, FAIL, RESTART_GROUP, REPLACE = "none", "fail", "restart_group", "replace"


@dataclass(frozen=True)
class Progress:
    """The lead replica's training progress as last reported, and when its step last grew."""

    step: int | None
    changed_at: float  # when the step last increased (or, before any step, when training started)
    loss: float | None = None
    examples_per_sec: float | None = None
    target_step: int | None = None


@dataclass(frozen=True)
class Decision:
    action: str  # none | fail | restart_group | replace
    failure_class: str | None = None
    reason: str = ""
    replicas: tuple[str, ...] = ()  # replace: these replicas; restart_group: every replica
    memory: Mapping[str, float] = field(default_factory=dict)  # replica -> new memory bytes (OOM)
    avoid_nodes: tuple[str, ...] = ()


def used(attempts: Sequence[Attempt], *classes: str) -> int:
    return sum(1 for a in attempts if a.failure_class in classes)


def history(attempts: Sequence[Attempt]) -> str:
    if not attempts:
        return ""
    return "; earlier: " + "; ".join(f"attempt {a.number - 1} ended by {a.failure_class}: {a.reason}"
                                     for a in attempts)


def decide(status: JobStatus, policy: RecoveryPolicy, attempts: Sequence[Attempt], now: float, *,
           roles: Mapping[str, str], lost_nodes: Mapping[str, float] | None = None,
           progress: Progress | None = None, memory: Mapping[str, float] | None = None) -> Decision:
    """What to do now. ``roles`` maps each replica key to its role; ``lost_nodes`` maps a node
    that is NotReady or unreachable to when it was first seen so; ``memory`` maps a replica to
    its current memory limit in bytes (for an OOM relaunch)."""
    match status.state:
        case JobState.RUNNING:
            return _while_running(status, policy, attempts, now, roles, lost_nodes or {}, progress, memory or {})
        case JobState.SUCCEEDED | JobState.QUEUED | JobState.HELD:  # nothing started: nothing to recover
            return Decision(NONE)
        case JobState.FAILED:
            return _after_failure(status, policy, attempts, roles, memory or {})
        case _:
            assert_never(status.state)


def _while_running(status: JobStatus, policy: RecoveryPolicy, attempts: Sequence[Attempt], now: float,
                   roles: Mapping[str, str], lost_nodes: Mapping[str, float], progress: Progress | None,
                   memory: Mapping[str, float]) -> Decision:
    """A running job: a lost node, an OOM kill to relaunch bigger, or no progress for too long."""
    lost = _lost_replicas(status, policy, now, lost_nodes)
    if lost:
        nodes = tuple(sorted({st_node for _, st_node in lost}))
        reason = (f"node {', '.join(nodes)} lost (NotReady or unreachable for more than "
                  f"{policy.node_lost_grace:.0f}s) with {', '.join(k for k, _ in lost)}")
        return _infrastructure(reason, [k for k, _ in lost], policy, attempts, roles, avoid=nodes)
    oomed = sorted(st.key for st in status.replicas.values() if st.oom and st.phase != "Succeeded")
    if oomed and policy.oom_memory_factor:  # relaunch bigger at the first OOM kill, not after a crash loop
        return _oom(f"{oomed[0]} was OOMKilled", oomed[0], policy, attempts, roles, memory)
    if policy.progress_timeout and progress is not None and now - progress.changed_at > policy.progress_timeout:
        where = f"stalled at step {progress.step}" if progress.step is not None else "stalled before step 1"
        reason = f"{where}: no progress for {now - progress.changed_at:.0f}s (progress_timeout " \
                 f"{policy.progress_timeout:.0f}s)"
        return _code_like(STALLED, reason, policy, attempts)
    return Decision(NONE)


def _after_failure(status: JobStatus, policy: RecoveryPolicy, attempts: Sequence[Attempt],
                   roles: Mapping[str, str], memory: Mapping[str, float]) -> Decision:
    """A failed job: recovered by its failure class's budget, or failed for good."""
    cls, key = status.failure_class, status.failed_key
    retried = _exit_code_retry(status, policy, attempts, roles)
    if retried is not None:
        return retried
    if cls == INFRASTRUCTURE and key:
        return _infrastructure(status.reason, [key], policy, attempts, roles)
    if cls == OOM and key:
        return _oom(status.reason, key, policy, attempts, roles, memory)
    if cls in (CODE, STALLED):
        return _code_like(cls, status.reason, policy, attempts)
    return Decision(FAIL, cls, status.reason + history(attempts))


#: The words every ExitCode recreation's reason starts its budget note with (how attempts are counted).
_EXIT_CODE_RETRY = "ExitCode recreates the pod"


def _exit_code_retry(status: JobStatus, policy: RecoveryPolicy, attempts: Sequence[Attempt],
                     roles: Mapping[str, str]) -> Decision | None:
    """TFJob's ExitCode: a retryable exit (>= 128) of a replica whose role says ExitCode recreates its pod,
    up to ``max_restarts`` times for that replica; None when the rule does not apply."""
    key = status.failed_key
    if key is None:
        return None
    st = status.replicas.get(key)
    if st is None or roles.get(key) not in policy.exit_code_roles or st.phase != "Failed":
        return None
    code = st.exit_code if st.exit_code is not None else st.last_exit_code
    if code is None or not is_retryable_exit(code) or st.deleting or st.disruption:
        return None  # a permanent code (1-127) is the program's; a disruption is infrastructure's
    if status.failure_class == OOM and policy.oom_memory_factor:
        return None  # relaunched bigger instead
    done = sum(1 for a in attempts if key in a.replicas and _EXIT_CODE_RETRY in a.reason)
    cls = status.failure_class or CODE
    if done >= policy.max_restarts:
        return Decision(FAIL, cls, f"{status.reason}; {_EXIT_CODE_RETRY} at most max_restarts "
                                   f"{policy.max_restarts} times, spent" + history(attempts))
    why = f"{status.reason}; {_EXIT_CODE_RETRY} for exit code {code} ({done + 1} of max_restarts " \
          f"{policy.max_restarts})"
    if roles.get(key) == "ps":
        return Decision(RESTART_GROUP, cls, why, tuple(sorted(roles)))
    return Decision(REPLACE, cls, why, (key,))


def _lost_replicas(status: JobStatus, policy: RecoveryPolicy, now: float,
                   lost_nodes: Mapping[str, float]) -> list[tuple[str, str]]:
    return sorted((st.key, st.node) for st in status.replicas.values()
                  if st.node is not None and st.node in lost_nodes
                  and now - lost_nodes[st.node] > policy.node_lost_grace and st.phase in ("Running", "Pending"))


def _infrastructure(reason: str, keys: Sequence[str], policy: RecoveryPolicy, attempts: Sequence[Attempt],
                    roles: Mapping[str, str], avoid: tuple[str, ...] = ()) -> Decision:
    spent = used(attempts, INFRASTRUCTURE, OOM)
    if spent >= policy.infra_restarts:
        return Decision(FAIL, INFRASTRUCTURE, f"{reason}; infra_restarts {policy.infra_restarts} spent"
                        + history(attempts))
    if any(roles.get(k) == "ps" for k in keys):
        return Decision(RESTART_GROUP, INFRASTRUCTURE, reason, tuple(sorted(roles)), avoid_nodes=avoid)
    return Decision(REPLACE, INFRASTRUCTURE, reason, tuple(keys), avoid_nodes=avoid)


def _oom(reason: str, key: str, policy: RecoveryPolicy, attempts: Sequence[Attempt], roles: Mapping[str, str],
         memory: Mapping[str, float]) -> Decision:
    if not policy.oom_memory_factor:
        return Decision(FAIL, OOM, reason + " (fix: more memory for the role, or oom_memory_factor)"
                        + history(attempts))
    current = memory.get(key)
    if not current:
        return Decision(FAIL, OOM, reason + " (no memory limit to grow: set resources.memory for the role)"
                        + history(attempts))
    grown = current * policy.oom_memory_factor
    if policy.max_memory and grown > policy.max_memory:
        return Decision(FAIL, OOM, f"{reason}; {_gib(grown)} would exceed max_memory {_gib(policy.max_memory)}"
                        + history(attempts))
    if used(attempts, INFRASTRUCTURE, OOM) >= policy.infra_restarts:
        return Decision(FAIL, OOM, f"{reason}; infra_restarts {policy.infra_restarts} spent" + history(attempts))
    why = f"{reason}; relaunched with {_gib(grown)} (x{policy.oom_memory_factor:g})"
    if roles.get(key) == "ps":
        return Decision(RESTART_GROUP, OOM, why, tuple(sorted(roles)), memory={key: grown})
    return Decision(REPLACE, OOM, why, (key,), memory={key: grown})


def _code_like(cls: str, reason: str, policy: RecoveryPolicy, attempts: Sequence[Attempt]) -> Decision:
    if used(attempts, CODE, STALLED) >= policy.group_restarts:
        budget = f"; group_restarts {policy.group_restarts} spent" if policy.group_restarts else ""
        return Decision(FAIL, cls, reason + budget + history(attempts))
    return Decision(RESTART_GROUP, cls, reason)


def _gib(value: float) -> str:
    return f"{value / 2**30:.2f}Gi"


__all__ = ["RecoveryPolicy", "Progress", "Decision", "decide", "NONE", "FAIL", "RESTART_GROUP", "REPLACE",
           "CONFIG"]


def relaunch_memory(spec_memory: float | None, override: Any) -> int | None:
    """The memory in bytes that an OOM relaunch's ``override`` gives a recreated replica's training
    container (its request and limit), bounded below by what the replica's spec asked (``spec_memory``:
    its template's memory limit, else its request).

    The planner only ever grows memory (``oom_memory_factor`` > 1), so an override below the spec's own
    can only come from a rewritten ``tfk8s.io/attempts`` annotation: ``1e-300`` rendered as memory
    ``"0"``, a pod with no memory limit at all. Such an override is **clamped** up to the spec's memory
    (not refused: the relaunch still happens, with what the spec asked). A replica whose spec set no
    memory keeps its template as it is (None: no relaunch grows memory there), as does an override that
    is no finite number.
    """
    if not spec_memory or not math.isfinite(spec_memory) or isinstance(override, bool) \
            or not isinstance(override, (int, float)) or not math.isfinite(override):
        return None
    return max(int(override), math.ceil(spec_memory))
