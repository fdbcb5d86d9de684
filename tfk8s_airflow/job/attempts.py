"""The recovery state a job keeps on its Service (``tfk8s.io/attempts``), read back as untrusted data.

Why read like a form's value: the annotation is written by the job's watches, but anyone who may
write Services in the namespace may write it too, and every watch of the job reads it. What it
holds is checked whole: attempts (numbered from 2, of a known failure class and action, naming
replicas by key) and overrides (a finite positive memory in bytes, node names to avoid). Anything
else makes the whole value unreadable (:class:`ValueError` naming what): the watch then recovers
nothing and judges the job as its pods stand, saying so once; it never raises out of the watch,
and a wrong value never becomes a budget, a memory or a node.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job.judge import FAILURE_CLASSES
from tfk8s_airflow.job.records import Attempt

__all__ = ["ATTEMPTS_MAX_CHARS", "read_attempts"]

#: Characters of the annotation read (the API server bounds all of an object's annotations to 256 KiB).
ATTEMPTS_MAX_CHARS = 256 * 1024
#: Attempts and overridden replicas kept at most (a job's budgets are far smaller).
ATTEMPTS_MAX = 1000
REASON_MAX = 2000
NODES_MAX = 100
MEMORY_MAX = float(2**63)  # bytes: a Kubernetes quantity's bound
ACTIONS = ("restart_group", "replace")
_KEY = re.compile(r"[a-z]{1,20}-[0-9]{1,6}")
_NODE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def read_attempts(raw: Any) -> tuple[list[Attempt], dict[str, dict[str, Any]]]:
    """(attempts, overrides) of the annotation's value; ``([], {})`` when there is none.

    Raises ValueError naming the first thing that is not as a watch writes it.
    """
    if raw is None or raw == "":
        return [], {}
    if not isinstance(raw, str) or len(raw) > ATTEMPTS_MAX_CHARS:
        raise ValueError(f"not a JSON text of at most {ATTEMPTS_MAX_CHARS} characters")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    items = doc.get("attempts", [])
    overrides = doc.get("overrides") or {}
    if not isinstance(items, list) or len(items) > ATTEMPTS_MAX:
        raise ValueError(f"attempts is not a list of at most {ATTEMPTS_MAX}")
    if not isinstance(overrides, dict) or len(overrides) > ATTEMPTS_MAX:
        raise ValueError(f"overrides is not an object of at most {ATTEMPTS_MAX} replicas")
    attempts = [_attempt(i, a) for i, a in enumerate(items)]
    return attempts, {_key(k, "overrides"): _override(k, v) for k, v in overrides.items()}


def _attempt(i: int, a: Any) -> Attempt:
    where = f"attempts[{i}]"
    if not isinstance(a, dict):
        raise ValueError(f"{where} is not an object")
    unknown = set(a) - {"number", "failure_class", "reason", "at", "action", "replicas"}
    if unknown:
        raise ValueError(f"{where} has unknown fields {sorted(unknown)[:3]}")
    number, at, reason = a.get("number"), a.get("at"), a.get("reason", "")
    if isinstance(number, bool) or not isinstance(number, int) or not 2 <= number <= ATTEMPTS_MAX + 1:
        raise ValueError(f"{where}.number is not a whole number from 2 to {ATTEMPTS_MAX + 1}")
    if a.get("failure_class") not in (*FAILURE_CLASSES, ""):
        raise ValueError(f"{where}.failure_class is not one of {', '.join(FAILURE_CLASSES)}")
    if not isinstance(reason, str):
        raise ValueError(f"{where}.reason is not a string")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
        raise ValueError(f"{where}.at is not a time")
    action = a.get("action", "restart_group")
    if action not in ACTIONS:
        raise ValueError(f"{where}.action is not one of {', '.join(ACTIONS)}")
    replicas = a.get("replicas") or []
    if not isinstance(replicas, list) or len(replicas) > ATTEMPTS_MAX:
        raise ValueError(f"{where}.replicas is not a list of replica keys")
    return Attempt(number=number, failure_class=a["failure_class"], reason=reason[:REASON_MAX], at=float(at),
                   action=action, replicas=tuple(_key(r, f"{where}.replicas") for r in replicas))


def _key(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        raise ValueError(f"{where}: {str(value)[:40]!r} is not a replica key (<role>-<index>)")
    return value


def _override(key: str, value: Any) -> dict[str, Any]:
    where = f"overrides[{key!r}]"
    if not isinstance(value, Mapping) or set(value) - {"memory", "avoid_nodes"}:
        raise ValueError(f"{where} is not an object of memory and avoid_nodes")
    out: dict[str, Any] = {}
    memory = value.get("memory")
    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, (int, float)) or not 0 < memory < MEMORY_MAX:
            raise ValueError(f"{where}.memory is not a number of bytes from 1 to 2**63")
        out["memory"] = float(memory)
    nodes = value.get("avoid_nodes")
    if nodes is not None:
        if not isinstance(nodes, list) or len(nodes) > NODES_MAX or \
                not all(isinstance(n, str) and _NODE.fullmatch(n) for n in nodes):
            raise ValueError(f"{where}.avoid_nodes is not a list of at most {NODES_MAX} node names")
        out["avoid_nodes"] = list(nodes)
    return out
