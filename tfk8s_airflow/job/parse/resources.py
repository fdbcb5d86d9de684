"""``resources``: what each replica requests of a node (cpu, memory, GPUs, extended resources)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job import quantity as q
from tfk8s_airflow.job.fields import as_text
from tfk8s_airflow.job.parse.reader import Reader


def resources(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = r.mapping(d, key, fld)
    out: dict[str, str] = {}
    for rname, qty in raw.items():
        rname = str(rname)
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
