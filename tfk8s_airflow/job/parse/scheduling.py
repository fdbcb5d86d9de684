"""``tolerations``: which node taints the replicas tolerate."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tfk8s_airflow.job.parse.reader import Reader

_TOLERATION_KEYS = ("key", "operator", "value", "effect", "toleration_seconds", "tolerationSeconds")


def tolerations(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> tuple[Mapping[str, Any], ...]:
    raw = d.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.add(fld, "must be a list of tolerations", "write tolerations: [{key: gpu, operator: Exists}]")
        return ()
    out = []
    for i, t in enumerate(raw):
        path = f"{fld}[{i}]"
        if not isinstance(t, Mapping):
            r.add(path, "must be a mapping", "write {key: ..., operator: Exists, effect: NoSchedule}")
            continue
        r.unknown(t, _TOLERATION_KEYS, path + ".")
        op = t.get("operator", "Equal")
        if op not in ("Equal", "Exists"):
            r.add(path + ".operator", f"must be Equal or Exists, got {op!r}", "write operator: Exists")
        eff = t.get("effect")
        if eff is not None and eff not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            r.add(path + ".effect", f"must be NoSchedule, PreferNoSchedule or NoExecute, got {eff!r}",
                  "write effect: NoSchedule")
        if op == "Exists" and t.get("value"):
            r.add(path + ".value", "must be empty when operator is Exists", "remove value or use operator: Equal")
        tol: dict[str, Any] = {}
        for name in ("key", "operator", "value", "effect"):
            if t.get(name) is not None:
                tol[name] = str(t[name])
        secs = t.get("toleration_seconds", t.get("tolerationSeconds"))
        if secs is not None:
            if isinstance(secs, bool) or not isinstance(secs, int):
                r.add(path + ".toleration_seconds", "must be an integer", "write toleration_seconds: 300")
            else:
                tol["tolerationSeconds"] = secs
        out.append(MappingProxyType(tol))
    return tuple(out)
