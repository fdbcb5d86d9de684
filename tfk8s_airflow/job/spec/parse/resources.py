"""``resources``: what each replica requests of a node (cpu, memory, GPUs, extended resources).

Two forms: the short ``{cpu: 2, memory: 4Gi}`` (requests = limits, the pod is Guaranteed),
and Kubernetes' own ``{requests: {...}, limits: {...}}``. The API server's rules between
the two are checked here: no limit below its request, and an extended resource (a GPU) has
a limit equal to its request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job.spec import quantity as q
from tfk8s_airflow.job.spec.fields import as_text, show
from tfk8s_airflow.job.spec.model import Resources
from tfk8s_airflow.job.spec.parse.reader import Reader

_PARTS = ("requests", "limits")


def resources(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> Resources:
    raw = r.mapping(d, key, fld)
    if not any(part in raw for part in _PARTS):
        amounts = _amounts(r, raw, fld)
        return Resources(amounts, dict(amounts))
    for name in raw:
        if name not in _PARTS:
            r.add(f"{fld}.{name}", "cannot be mixed with requests/limits",
                  f"write {name} under {fld}.requests and {fld}.limits, or drop requests/limits (requests = limits)")
    requests = _amounts(r, r.mapping(raw, "requests", f"{fld}.requests"), f"{fld}.requests")
    limits = _amounts(r, r.mapping(raw, "limits", f"{fld}.limits"), f"{fld}.limits")
    for name, limit in limits.items():
        request = requests.setdefault(name, limit)  # as the API server defaults it
        if q.quantity_value(limit) < q.quantity_value(request):
            r.add(f"{fld}.limits.{name}", f"{show(limit)} is below the request {show(request)}",
                  f"raise the limit, or lower {fld}.requests.{name}")
    for name, request in requests.items():
        if q.is_extended_resource(name) and (name not in limits or
                                             q.quantity_value(limits[name]) != q.quantity_value(request)):
            r.add(f"{fld}.limits.{name}", f"an extended resource needs a limit equal to its request {show(request)}",
                  f"write {fld}.limits.{name}: {request}, or use the short form {fld}: {{{name}: {request}}}")
    return Resources(requests, limits)


def _amounts(r: Reader, raw: Mapping[str, Any], fld: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for rname, qty in raw.items():
        path = f"{fld}.{rname}"
        problems = q.resource_name_problems(rname, path)
        if problems:
            r.extend(problems)
            continue
        problem = q.quantity_problem(qty, path, integer=q.is_extended_resource(rname))
        if problem:
            r.extend([problem])
            continue
        out[rname] = (as_text(qty) or "").strip()
    return out
