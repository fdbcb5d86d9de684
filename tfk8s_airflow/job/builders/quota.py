"""Quota pre-flight: does the whole job fit in the namespace's ResourceQuotas?

Why before any pod: a job that exceeds its quota gets some pods admitted and the
rest refused, and the admitted ones wait forever for peers (TFJob #948, #1264:
partial starts deadlock). Summing the job's requests and limits against every quota's
remaining headroom fails it up front, with the numbers. As the quota admission does:
``requests.<r>`` and the bare ``cpu``/``memory``/``ephemeral-storage`` count requests,
``limits.<r>`` counts limits, and a quota on cpu or memory refuses any pod that does not
say its amount.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tfk8s_airflow.job.builders import tensorboard
from tfk8s_airflow.job.spec import TFJobSpec
from tfk8s_airflow.job.spec.quantity import STANDARD_RESOURCES, quantity_to_float

#: Quota resources a pod must state (in requests, or in limits) to be admitted at all.
_MUST_STATE = {"cpu": "requests", "memory": "requests", "requests.cpu": "requests", "requests.memory": "requests",
               "limits.cpu": "limits", "limits.memory": "limits"}


def job_requests(spec: TFJobSpec) -> dict[str, float]:
    """Total requests and limits of the job in base units, keyed by quota resource name."""
    total: dict[str, float] = {"pods": float(spec.total_replicas)}

    def add(key: str, amount: float) -> None:
        total[key] = total.get(key, 0.0) + amount

    def pods(count: int, requests: Mapping[str, str], limits: Mapping[str, str]) -> None:
        for name, qty in requests.items():
            amount = quantity_to_float(qty) * count
            add(f"requests.{name}", amount)
            if name in STANDARD_RESOURCES:
                add(name, amount)
        for name, qty in limits.items():
            if "/" not in name:  # extended resources have no limits.* quota
                add(f"limits.{name}", quantity_to_float(qty) * count)

    for rs in spec.active_roles:
        pods(rs.replicas, rs.resources.requests, rs.resources.limits)
    if spec.tensorboard is not None:  # its pod counts like a replica's (it states both, always)
        total["pods"] += 1
        pods(1, tensorboard.REQUESTS, tensorboard.LIMITS)
    total["count/pods"] = total["pods"]
    return total


def _fmt(resource: str, value: float) -> str:
    if "memory" in resource or "storage" in resource:
        return f"{value / 2**30:.2f}Gi"
    return f"{value:g}"


def check(spec: TFJobSpec, quotas: Iterable[Any]) -> list[str]:
    """Problems (one per exceeded quota resource); empty when the job fits."""
    need = job_requests(spec)
    problems = []
    for quota in quotas:
        name = _field(quota, "metadata", "name")
        hard: Mapping[str, str] = _field(quota, "status", "hard") or _field(quota, "spec", "hard") or {}
        used: Mapping[str, str] = _field(quota, "status", "used") or {}
        for resource, limit in hard.items():
            if resource in _MUST_STATE:
                missing = _unstated(spec, resource)
                if missing:
                    problems.append(_unstated_problem(name, resource, missing))
                    continue
            if resource not in need:
                continue
            requested = need[resource]
            remaining = quantity_to_float(limit) - quantity_to_float(used.get(resource, "0"))
            if requested > remaining + 1e-9:
                problems.append(f"ResourceQuota {name}: {resource} requested {_fmt(resource, requested)}, "
                                f"remaining {_fmt(resource, max(remaining, 0))} "
                                f"(hard {limit}, used {used.get(resource, '0')})")
    return problems


def _unstated(spec: TFJobSpec, resource: str) -> list[str]:
    """Active roles whose pods do not state the quota resource (as the admission requires)."""
    base = resource.split(".", 1)[-1]
    part = _MUST_STATE[resource]
    return [rs.role for rs in spec.active_roles if base not in getattr(rs.resources, part)]


def _unstated_problem(quota: str, resource: str, roles: list[str]) -> str:
    base = resource.split(".", 1)[-1]
    where = " and ".join(roles)
    if _MUST_STATE[resource] == "limits":
        return (f"ResourceQuota {quota} limits {resource}, so every pod must set a {base} limit (the {where} "
                f"pods set none): set resources.{base} or resources.limits.{base} in the spec")
    return (f"ResourceQuota {quota} limits {resource}, so every pod must request {base} (the {where} pods do "
            f"not): set resources.{base} in the spec")


def _field(obj: Any, *path: str) -> Any:
    for key in path:
        if obj is None:
            return None
        obj = obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
    return obj
