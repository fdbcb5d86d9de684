"""Quota pre-flight: does the whole job fit in the namespace's ResourceQuotas?

Why before any pod: a job that exceeds its quota gets some pods admitted and the
rest refused, and the admitted ones wait forever for peers (TFJob #948, #1264:
partial starts deadlock). Summing the job's requests against every quota's
remaining headroom fails it up front, with the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tfk8s_airflow.job.quantity import quantity_to_float
from tfk8s_airflow.job.spec import TFJobSpec


def job_requests(spec: TFJobSpec) -> dict[str, float]:
    """Total requests of the job in base units, keyed by quota resource name."""
    total: dict[str, float] = {"pods": float(spec.total_replicas)}
    for rs in spec.active_roles:
        for name, qty in rs.resources.items():
            amount = quantity_to_float(qty) * rs.replicas
            for key in (f"requests.{name}", f"limits.{name}") if "/" not in name else (f"requests.{name}",):
                total[key] = total.get(key, 0.0) + amount
            if name in ("cpu", "memory", "ephemeral-storage"):
                total[name] = total.get(name, 0.0) + amount
    total["count/pods"] = total["pods"]
    return total


def _fmt(resource: str, value: float) -> str:
    if "memory" in resource or "storage" in resource:
        return f"{value / 2**30:.2f}Gi"
    if "cpu" in resource:
        return f"{value:g}"
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
            if resource not in need and not _requires_request(resource):
                continue
            requested = need.get(resource, 0.0)
            if requested == 0.0 and _requires_request(resource):
                base = resource.split(".", 1)[-1]
                problems.append(f"ResourceQuota {name} limits {resource}, so every pod must request "
                                f"{base}: set resources.{base} in the spec")
                continue
            remaining = quantity_to_float(limit) - quantity_to_float(used.get(resource, "0"))
            if requested > remaining + 1e-9:
                problems.append(f"ResourceQuota {name}: {resource} requested {_fmt(resource, requested)}, "
                                f"remaining {_fmt(resource, max(remaining, 0))} "
                                f"(hard {limit}, used {used.get(resource, '0')})")
    return problems


def _requires_request(resource: str) -> bool:
    return resource in ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")


def _field(obj: Any, *path: str) -> Any:
    for key in path:
        if obj is None:
            return None
        obj = obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
    return obj
