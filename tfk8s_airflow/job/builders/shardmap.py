"""Shard assignments as a job receives them: their shape, their JSON, and the ConfigMap's size.

Why checked before anything exists: the assignments reach the pods in one ConfigMap, and
the API server refuses a ConfigMap over 1 MiB. A staging run of 20,000 files writes more
than that; found only when the ConfigMap is created, it would fail setup after the Service
exists, so the size is checked with the spec, and the error says what to change. A value
that is not a list of paths (a string would be read as one path per character) is refused too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.spec.fields import show

__all__ = ["MAX_CONFIGMAP_BYTES", "normalize_shards", "shards_json"]

#: The API server's limit on a ConfigMap's data (core.MaxConfigMapSize).
MAX_CONFIGMAP_BYTES = 1024 * 1024
_FIX = "pass the staging task's output, or a mapping like {\"worker-0\": [\"/data/part-0\", ...]}"


def shards_json(shards: Mapping[str, Sequence[str]]) -> str:
    """The ConfigMap's ``shards.json``: keys sorted, one path a line."""
    return json.dumps({k: list(val) for k, val in sorted(shards.items())}, indent=1)


def normalize_shards(shards: Any, fld: str = "shards") -> dict[str, list[str]] | None:
    """A ``{"worker-0": [paths]}`` mapping, or a staging result holding one under ``shards``; None for none.

    SpecError (naming ``fld``) when it is anything else, or too large for the ConfigMap.
    """
    if shards is None or (isinstance(shards, (str, Mapping, list, tuple)) and not shards):
        return None
    if isinstance(shards, Mapping) and isinstance(shards.get("shards"), Mapping):
        shards = shards["shards"]
    if not isinstance(shards, Mapping):
        raise SpecError(Problem(fld, f"must be a mapping like {{'worker-0': [paths]}}, got {type(shards).__name__}",
                                _FIX))
    problems: list[Problem] = []
    out: dict[str, list[str]] = {}
    for key, paths in shards.items():
        where = f"{fld}.{key}"
        if not isinstance(key, str) or not key:
            problems.append(Problem(f"{fld}[{show(key)}]", "keys must be replica names such as worker-0", _FIX))
            continue
        if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
            problems.append(Problem(where, f"must be a list of paths, got {type(paths).__name__}",
                                    f"write {key}: [\"/data/part-0\", ...]"))
            continue
        bad = [i for i, p in enumerate(paths) if not isinstance(p, str) or not p]
        if bad:
            problems.append(Problem(f"{where}[{bad[0]}]", "every path must be a non-empty string", _FIX))
            continue
        out[key] = list(paths)
        if len(problems) > 50:
            break
    if problems:
        raise SpecError(problems)
    size = len(shards_json(out).encode("utf-8"))
    if size > MAX_CONFIGMAP_BYTES:
        files = sum(len(p) for p in out.values())
        raise SpecError(Problem(fld, f"the assignments of {files} files are {size} bytes as JSON, more than a "
                                     f"ConfigMap holds ({MAX_CONFIGMAP_BYTES} bytes); nothing was created",
                                "stage fewer, larger files (merge small part files), or shorter paths"))
    return out
