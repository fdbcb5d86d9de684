"""Recovery state read back from the job's Service: bounded and validated, never trusted.

Why: the attempts a job's recovery made and the overrides they brought (more memory after an
OOM kill, nodes to avoid) live in the Service's annotation ``tfk8s.io/attempts``, and anyone
who may write Services in the namespace may write it. What recovery recreates pods with must
not be chosen there: an override of ``1e15`` bytes of memory, a replica the job does not have,
a thousand-entry node list are refused here (:class:`ValueError`, naming what is wrong), and the
job's watch then recovers nothing (the job is judged as it stands).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow import untrusted
from tfk8s_airflow.job.run.judge import FAILURE_CLASSES
from tfk8s_airflow.job.run.records import Attempt, JobRecord
from tfk8s_airflow.job.run.recovery import REPLACE, RESTART_GROUP
from tfk8s_airflow.job.spec.fields import finite_float

__all__ = ["ATTEMPTS_ANNOTATION", "MAX_ANNOTATION_BYTES", "MAX_ATTEMPTS", "MAX_MEMORY_OVERRIDE", "MAX_RECREATED",
           "read_attempts", "read_recreated"]

#: The annotation's largest size read (the API server allows 256 KiB for all of an object's annotations).
MAX_ANNOTATION_BYTES = 64 * 1024
#: More attempts than any restart budget spends.
MAX_ATTEMPTS = 1000
#: A memory override's bound when the job sets no ``max_memory``: 1 TiB (no node of ours has more).
MAX_MEMORY_OVERRIDE = float(1 << 40)
_MAX_NODES = 256
_MAX_REASON = 4096
_NODE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
#: The Service's annotation that holds the attempts, their overrides and the pods recovery created.
ATTEMPTS_ANNOTATION = "tfk8s.io/attempts"
_UID = re.compile(r"^[0-9a-fA-F-]{1,64}$")
_KEYS = {"attempts", "overrides", "pods"}
#: Pods recovery recorded: more than any restart budget recreates (each entry ~120 bytes: the annotation's
#: bound is reached first).
MAX_RECREATED = 4096


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{what} must be an integer in [{lo}, {hi}]")
    return value


def _attempt(doc: Any, keys: set[str], i: int) -> Attempt:
    where = f"attempts[{i}]"
    if not isinstance(doc, Mapping) or not set(doc) <= {"number", "failure_class", "reason", "at", "action",
                                                        "replicas"}:
        raise ValueError(f"{where} must be an object of number, failure_class, reason, at, action, replicas")
    failure_class, reason, at = doc.get("failure_class", ""), doc.get("reason", ""), doc.get("at", 0.0)
    action, replicas = doc.get("action", RESTART_GROUP), doc.get("replicas") or []
    if failure_class not in ("", *FAILURE_CLASSES):
        raise ValueError(f"{where}.failure_class is not one of {', '.join(FAILURE_CLASSES)}")
    if not isinstance(reason, str) or len(reason) > _MAX_REASON:
        raise ValueError(f"{where}.reason must be text of at most {_MAX_REASON} characters")
    if finite_float(at) is None or at < 0:
        raise ValueError(f"{where}.at must be a time")
    if action not in (RESTART_GROUP, REPLACE):
        raise ValueError(f"{where}.action must be {RESTART_GROUP} or {REPLACE}")
    if not isinstance(replicas, list) or not all(isinstance(r, str) and r in keys for r in replicas):
        raise ValueError(f"{where}.replicas must name replicas of the job")
    return Attempt(number=_int(doc.get("number"), f"{where}.number", 2, MAX_ATTEMPTS + 1),
                   failure_class=failure_class, reason=reason, at=float(at), action=action, replicas=tuple(replicas))


def _override(key: str, doc: Any, memory_bound: float | None) -> dict[str, Any]:
    where = f"overrides[{key}]"
    if not isinstance(doc, Mapping) or not set(doc) <= {"memory", "avoid_nodes"}:
        raise ValueError(f"{where} may hold only memory and avoid_nodes")
    out: dict[str, Any] = {}
    if doc.get("memory") is not None:
        memory = doc["memory"]
        if memory_bound is None:
            raise ValueError(f"{where}.memory: the job sets no oom_memory_factor, so no memory is ever overridden")
        if finite_float(memory) is None or not 0 < memory <= memory_bound:
            raise ValueError(f"{where}.memory must be a number of bytes in (0, {memory_bound:.0f}]")
        out["memory"] = memory
    if doc.get("avoid_nodes") is not None:
        nodes = doc["avoid_nodes"]
        if not isinstance(nodes, list) or len(nodes) > _MAX_NODES or \
                not all(isinstance(n, str) and _NODE.match(n) for n in nodes):
            raise ValueError(f"{where}.avoid_nodes must be at most {_MAX_NODES} node names")
        out["avoid_nodes"] = list(nodes)
    return out


def read_attempts(raw: str | None, record: JobRecord) -> tuple[list[Attempt], dict[str, dict[str, Any]]]:
    """The attempts and overrides of the annotation ``raw`` (None or empty: none yet), validated against
    the job's record: replicas it has, memory within its ``max_memory`` (else :data:`MAX_MEMORY_OVERRIDE`)
    and only when it sets ``oom_memory_factor``, attempt numbers increasing. ValueError otherwise."""
    if not raw:
        return [], {}
    # The shared bounded reader: larger than the bound, nested too deep, not JSON: a ValueError.
    doc = _document(raw)
    keys = {r.key for r in record.replicas}
    items = doc.get("attempts") or []
    if not isinstance(items, list) or len(items) > MAX_ATTEMPTS:
        raise ValueError(f"attempts must be a list of at most {MAX_ATTEMPTS}")
    attempts = [_attempt(a, keys, i) for i, a in enumerate(items)]
    if any(b.number <= a.number for a, b in zip(attempts, attempts[1:], strict=False)):
        raise ValueError("attempts must be numbered in increasing order")
    recovery = record.recovery
    bound = None
    if recovery.oom_memory_factor:
        bound = min(recovery.max_memory, MAX_MEMORY_OVERRIDE) if recovery.max_memory else MAX_MEMORY_OVERRIDE
    overrides = doc.get("overrides") or {}
    if not isinstance(overrides, Mapping) or not all(isinstance(k, str) and k in keys for k in overrides):
        raise ValueError("overrides must be keyed by replicas of the job")
    return attempts, {k: _override(k, v, bound) for k, v in overrides.items()}


def _document(raw: str) -> Mapping[str, Any]:
    # The shared bounded reader: larger than the bound, nested too deep, not JSON: a ValueError.
    doc = untrusted.loads(raw, max_bytes=MAX_ANNOTATION_BYTES, strict=True, what="the annotation")
    if not isinstance(doc, Mapping) or not set(doc) <= _KEYS:
        raise ValueError("the annotation must be an object of attempts, overrides and pods")
    return doc


def read_recreated(raw: str | None, record: JobRecord) -> dict[str, tuple[str, str, int]]:
    """The pods recovery created, as it recorded them from the API server's creation responses:
    ``{uid: (pod name, replica key, attempt)}`` (None or empty annotation: none). Entries name replicas
    of the job and attempts after the first; ValueError otherwise (nothing of it is then believed)."""
    if not raw:
        return {}
    items = _document(raw).get("pods") or []
    if not isinstance(items, list) or len(items) > MAX_RECREATED:
        raise ValueError(f"pods must be a list of at most {MAX_RECREATED}")
    keys = {r.key for r in record.replicas}
    out: dict[str, tuple[str, str, int]] = {}
    for i, item in enumerate(items):
        where = f"pods[{i}]"
        if not isinstance(item, Mapping) or set(item) != {"uid", "name", "key", "attempt"}:
            raise ValueError(f"{where} must be an object of uid, name, key and attempt")
        uid, name, key = item["uid"], item["name"], item["key"]
        if not isinstance(uid, str) or not _UID.match(uid):
            raise ValueError(f"{where}.uid is no UID")
        if not isinstance(name, str) or not _NODE.match(name) or len(name) > 253:
            raise ValueError(f"{where}.name is no pod name")
        if key not in keys:
            raise ValueError(f"{where}.key must name a replica of the job")
        out[uid] = (name, str(key), _int(item["attempt"], f"{where}.attempt", 2, MAX_ATTEMPTS + 1))
    return out
