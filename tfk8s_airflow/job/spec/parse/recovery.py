"""The recovery keys: restart budgets, backoff, stall, straggler and node-loss timeouts, OOM relaunch.

What each does is :mod:`tfk8s_airflow.job.run.recovery`'s (docs/recovery.md); here they are read
and checked against each other and against the roles' memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job.defaults import GROUP_RESTARTS, INFRA_RESTARTS, MAX_BUDGET, NODE_LOST_GRACE_S, RESTART_BACKOFF_S
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.model import RoleSpec
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.job.spec.quantity import quantity_problem, quantity_value

#: OOM relaunch factors: above 1 (a relaunch must grow), at most 10 (one step past that is a typo).
FACTOR_RANGE = (1.0, 10.0)


def recovery(r: Reader, d: Mapping[str, Any]) -> dict[str, Any]:
    """The recovery fields of TFJobSpec, each checked on its own."""
    out: dict[str, Any] = {
        "group_restarts": r.integer(d, "group_restarts", "group_restarts", GROUP_RESTARTS, low=0, high=MAX_BUDGET),
        "infra_restarts": r.integer(d, "infra_restarts", "infra_restarts", INFRA_RESTARTS, low=0, high=MAX_BUDGET),
        "restart_backoff": _backoff(r, d),
        "progress_timeout": r.duration(d, "progress_timeout", "progress_timeout", None),
        "straggler_timeout": r.duration(d, "straggler_timeout", "straggler_timeout", None),
        "node_lost_grace": r.duration(d, "node_lost_grace", "node_lost_grace", NODE_LOST_GRACE_S) or NODE_LOST_GRACE_S,
        "oom_memory_factor": _factor(r, d),
        "max_memory": None,
    }
    raw = d.get("max_memory")
    if raw is not None:
        text = v.as_text(raw)
        problem = quantity_problem(raw if text is None else text, "max_memory")
        if problem is not None or text is None:
            r.extend([problem] if problem else [])
        elif quantity_value(text) <= 0:
            r.add("max_memory", f"must be more than 0, got {v.show(text)}", "write max_memory: 16Gi")
        else:
            out["max_memory"] = text
    return out


def check_recovery(r: Reader, fields: Mapping[str, Any], roles: Mapping[str, RoleSpec]) -> None:
    """Rules across keys: a cap needs a factor, and no role may start above the cap."""
    cap = fields.get("max_memory")
    if cap is None:
        return
    if fields.get("oom_memory_factor") is None:
        r.add("max_memory", "caps OOM relaunches, but oom_memory_factor is not set",
              "add oom_memory_factor: 1.5, or remove max_memory")
        return
    limit = quantity_value(cap)
    for rs in roles.values():
        memory = rs.resources.limits.get("memory") or rs.resources.requests.get("memory")
        if rs.replicas and memory and quantity_problem(memory, "memory") is None and quantity_value(memory) > limit:
            r.add("max_memory", f"{cap} is below {rs.role}'s memory {memory}: no relaunch could fit",
                  f"raise max_memory to at least {memory}, or lower {rs.role}'s memory")


def _backoff(r: Reader, d: Mapping[str, Any]) -> int:
    val = d.get("restart_backoff", RESTART_BACKOFF_S)
    secs = v.parse_duration(val)
    if secs == 0:
        return 0
    return r.duration(d, "restart_backoff", "restart_backoff", RESTART_BACKOFF_S) or RESTART_BACKOFF_S


def _factor(r: Reader, d: Mapping[str, Any]) -> float | None:
    val = d.get("oom_memory_factor")
    if val is None:
        return None
    num = v.parse_number(val)
    low, high = FACTOR_RANGE
    if num is None or not math.isfinite(num):
        r.add("oom_memory_factor", f"must be a number, got {v.show(val)}", "write oom_memory_factor: 1.5")
        return None
    if not low < num <= high:
        r.add("oom_memory_factor", f"must be above {low:g} and at most {high:g}, got {v.show(val)}",
              "write oom_memory_factor: 1.5 (each relaunch gets 1.5 times the memory)")
        return None
    return num
