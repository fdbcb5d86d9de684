"""``resources``: what each replica requests of a node (cpu, memory, GPUs, extended resources)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job import fields as v
from tfk8s_airflow.job.parse.reader import Reader


def resources(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = r.mapping(d, key, fld)
    out: dict[str, str] = {}
    for rname, qty in raw.items():
        rname = str(rname)
        path = f"{fld}.{rname}"
        if rname not in v.KNOWN_RESOURCES and "/" not in rname:
            guess = v.RESOURCE_ALIASES.get(rname.lower()) or v.did_you_mean(rname, set(v.KNOWN_RESOURCES))
            r.add(path, "unknown resource name",
                  f"did you mean '{guess}'?" if guess
                  else "use cpu, memory, nvidia.com/gpu or a domain/name extended resource")
            continue
        problem = v.check_quantity(qty, path, integer=rname not in ("cpu", "memory", "ephemeral-storage"))
        if problem:
            r.problems.append(problem)
            continue
        out[rname] = str(qty)
    return out
