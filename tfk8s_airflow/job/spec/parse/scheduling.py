"""``tolerations``: which node taints the replicas tolerate, under the API server's rules."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.parse.reader import Reader

_TOLERATION_KEYS = ("key", "operator", "value", "effect", "toleration_seconds", "tolerationSeconds")
_OPERATORS = ("Equal", "Exists")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


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
        out.append(MappingProxyType(toleration(r, t, path)))
    return tuple(out)


def toleration(r: Reader, t: Mapping[str, Any], path: str) -> dict[str, Any]:
    """One toleration as Kubernetes has it, with every rule ValidateTolerations applies."""
    r.unknown(t, _TOLERATION_KEYS, path + ".")
    tkey = r.string(t, "key", path + ".key", "") or ""
    op = t.get("operator", "Equal")
    if op not in _OPERATORS:
        r.add(path + ".operator", f"must be Equal or Exists, got {v.show(op)}", "write operator: Exists")
        op = "Equal"
    value = "" if t.get("value") is None else v.as_text(t["value"], bools=True)
    if value is None:
        r.add(path + ".value", f"must be a string, got {type(t['value']).__name__}", "write value: \"...\"")
        value = ""
    effect = t.get("effect") or ""
    if effect not in ("", *_EFFECTS):
        r.add(path + ".effect", f"must be NoSchedule, PreferNoSchedule or NoExecute, got {v.show(effect)}",
              "write effect: NoSchedule")
        effect = ""
    if tkey:
        r.extend(v.check_label_key(tkey, path + ".key"))
    elif op != "Exists":
        r.add(path + ".operator", "must be Exists when key is empty (that tolerates every taint)",
              "give the taint's key, or write operator: Exists")
    if op == "Exists" and value:
        r.add(path + ".value", "must be empty when operator is Exists", "remove value or use operator: Equal")
    elif op == "Equal":
        r.extend(v.check_label_value(value, path + ".value"))
    tol: dict[str, Any] = {}
    if tkey:
        tol["key"] = tkey
    if "operator" in t:
        tol["operator"] = op
    if t.get("value") is not None:
        tol["value"] = value
    if effect:
        tol["effect"] = effect
    secs_key = "toleration_seconds" if "toleration_seconds" in t else "tolerationSeconds"
    if t.get(secs_key) is not None:
        secs = r.integer(t, secs_key, f"{path}.{secs_key}", 300)
        if effect != "NoExecute":
            r.add(path + ".effect", "must be NoExecute when toleration_seconds is set",
                  "write effect: NoExecute, or remove toleration_seconds")
        tol["tolerationSeconds"] = secs
    return tol
