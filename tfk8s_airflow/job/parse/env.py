"""``env``: the environment variables of the training container."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import ENV_PREFIX, RESERVED_ENV
from tfk8s_airflow.job import fields as v
from tfk8s_airflow.job.parse.reader import Reader


def env(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = d.get(key)
    if raw is None:
        return {}
    if isinstance(raw, list):  # Kubernetes style [{name: X, value: Y}]
        items: dict[str, Any] = {}
        for i, item in enumerate(raw):
            if not isinstance(item, Mapping) or "name" not in item:
                r.add(f"{fld}[{i}]", "must be {name: ..., value: ...}", "or write env as a mapping NAME: value")
                continue
            items[v.as_text(item["name"]) or ""] = item.get("value", "")
        raw = items
    if not isinstance(raw, Mapping):
        r.add(fld, "must be a mapping of NAME: value", f"write {key}: {{LOG_LEVEL: info}}")
        return {}
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not v.is_env_name(name):
            r.add(f"{fld}.{name}", "is not a valid environment variable name",
                  "use letters, digits, '_', '-', '.' and do not start with a digit")
        elif name in RESERVED_ENV or name.startswith(ENV_PREFIX):
            r.add(f"{fld}.{name}", "is set by tfk8s-airflow itself",
                  "remove it; TF_CONFIG and TFK8S_* are derived from the spec")
        text = "" if value is None else v.as_text(value, bools=True)
        if text is None:  # never quote the value back: it may be a secret
            r.add(f"{fld}.{name}", "value must be a string", "quote it or JSON-encode it")
            continue
        out[name] = text
    return out
