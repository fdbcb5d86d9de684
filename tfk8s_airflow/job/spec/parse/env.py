"""``env`` and ``env_from``: the environment of the training container, Secrets included.

``env`` is a mapping ``NAME: value``, where a value is text or ``{value_from: {...}}``
(``secret_key_ref``, ``config_map_key_ref`` or ``field_ref``), or Kubernetes' list form
``[{name, value | value_from}]``. ``env_from`` imports every key of a Secret or ConfigMap.
No message here ever quotes an environment value: a plain value may still be a secret
someone pasted, so a bad one is named by its variable only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import ENV_PREFIX, RESERVED_ENV
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.model import ENV_FROM_SOURCES, VALUE_SOURCES, EnvFrom, ValueFrom
from tfk8s_airflow.job.spec.parse.reader import Reader

_ITEM_KEYS = ("name", "value", "value_from")
_REF_KEYS = ("name", "key", "optional")
_ENV_FROM_KEYS = (*ENV_FROM_SOURCES, "prefix")
#: The pod fields an env variable may read (the API server's list for env, not for volumes).
FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
               "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
_SUBSCRIPTED = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def env(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str | ValueFrom]:
    raw = d.get(key)
    if raw is None:
        return {}
    if isinstance(raw, list):  # Kubernetes style [{name: X, value: Y}]
        raw = _from_list(r, raw, fld)
    if not isinstance(raw, Mapping):
        r.add(fld, "must be a mapping of NAME: value", f"write {key}: {{LOG_LEVEL: info}}")
        return {}
    out: dict[str, str | ValueFrom] = {}
    for name, value in raw.items():
        path = f"{fld}.{name}"
        if not v.is_env_name(name):
            r.add(path, "is not a valid environment variable name",
                  "use letters, digits, '_', '-', '.' and do not start with a digit")
        elif name in RESERVED_ENV or name.startswith(ENV_PREFIX):
            r.add(path, "is set by tfk8s-airflow itself", "remove it; TF_CONFIG and TFK8S_* are derived from the spec")
        parsed = _value(r, value, path)
        if parsed is not None:
            out[name] = parsed
    return out


def _from_list(r: Reader, items: list[Any], fld: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        path = f"{fld}[{i}]"
        name = v.as_text(item.get("name")) if isinstance(item, Mapping) else None
        if not isinstance(item, Mapping) or not name:
            r.add(path, "must be {name: ..., value: ...} or {name: ..., value_from: {...}}",
                  "or write env as a mapping NAME: value")
            continue
        r.unknown(item, _ITEM_KEYS, path + ".")
        out[name] = {k: val for k, val in item.items() if k in ("value", "value_from")} or ""
    return out


def _value(r: Reader, value: Any, path: str) -> str | ValueFrom | None:
    if isinstance(value, Mapping):
        r.unknown(value, ("value", "value_from"), path + ".")
        if ("value" in value) == ("value_from" in value):
            r.add(path, "needs exactly one of value or value_from",
                  "write NAME: text, or NAME: {value_from: {secret_key_ref: {name: db, key: password}}}")
            return None
        if "value_from" in value:
            return value_from(r, value["value_from"], path + ".value_from")
        value = value["value"]
    text = "" if value is None else v.as_text(value, bools=True)
    if text is None:  # never quote the value back: it may be a secret
        r.add(path, "value must be a string", "quote it or JSON-encode it")
    return text


def value_from(r: Reader, raw: Any, path: str) -> ValueFrom | None:
    fix = "write value_from: {secret_key_ref: {name: db, key: password}} (or config_map_key_ref, field_ref)"
    if not isinstance(raw, Mapping):
        r.add(path, "must be a mapping", fix)
        return None
    r.unknown(raw, VALUE_SOURCES, path + ".")
    sources = [s for s in VALUE_SOURCES if s in raw]
    if len(sources) != 1:
        r.add(path, "needs exactly one of " + ", ".join(VALUE_SOURCES), fix)
        return None
    source = sources[0]
    ref, where = raw[source], f"{path}.{source}"
    if source == "field_ref":
        return _field_ref(r, ref, where)
    if not isinstance(ref, Mapping):
        r.add(where, "must be a mapping {name, key}", f"write {source}: {{name: db, key: password}}")
        return None
    r.unknown(ref, _REF_KEYS, where + ".")
    name = r.string(ref, "name", where + ".name") or ""
    ref_key = r.string(ref, "key", where + ".key") or ""
    optional = r.boolean(ref, "optional", where + ".optional", False)
    if not name:
        r.add(where + ".name", "is required", f"name the {_what(source)}: name: db")
    else:
        r.extend(v.check_dns_subdomain(name, where + ".name"))
    if not ref_key:
        r.add(where + ".key", "is required", f"name the {_what(source)}'s key: key: password")
    else:
        r.extend(v.check_config_key(ref_key, where + ".key"))
    return ValueFrom(source, name=name, key=ref_key, optional=optional)


def _field_ref(r: Reader, ref: Any, where: str) -> ValueFrom | None:
    if isinstance(ref, Mapping):
        r.unknown(ref, ("field_path",), where + ".")
        ref = ref.get("field_path")
    path = v.as_text(ref) if ref is not None else None
    fix = "write field_ref: {field_path: metadata.name} (or status.podIP, metadata.labels['key'] ...)"
    if not path:
        r.add(where, "needs a field_path", fix)
        return None
    m = _SUBSCRIPTED.match(path)
    if m:
        r.extend(v.check_label_key(m.group(2), where + ".field_path"))
    elif path not in FIELD_PATHS:
        r.add(where + ".field_path", f"{v.show(path)} is not a pod field an env variable can read",
              "use one of " + ", ".join(FIELD_PATHS) + ", metadata.labels['key'], metadata.annotations['key']")
    return ValueFrom("field_ref", field_path=path)


def _what(source: str) -> str:
    return "Secret" if source.startswith("secret") else "ConfigMap"


def env_from(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> tuple[EnvFrom, ...]:
    raw = d.get(key)
    if raw is None:
        return ()
    fix = f"write {key}: [{{secret_ref: db, prefix: DB_}}] (or config_map_ref)"
    if not isinstance(raw, list):
        r.add(fld, "must be a list", fix)
        return ()
    out = []
    for i, item in enumerate(raw):
        path = f"{fld}[{i}]"
        if not isinstance(item, Mapping):
            r.add(path, "must be a mapping", fix)
            continue
        r.unknown(item, _ENV_FROM_KEYS, path + ".")
        sources = [s for s in ENV_FROM_SOURCES if s in item]
        if len(sources) != 1:
            r.add(path, "needs exactly one of " + ", ".join(ENV_FROM_SOURCES), fix)
            continue
        source = sources[0]
        ref, where = item[source], f"{path}.{source}"
        if isinstance(ref, Mapping):
            r.unknown(ref, ("name", "optional"), where + ".")
            name = r.string(ref, "name", where + ".name") or ""
            optional = r.boolean(ref, "optional", where + ".optional", False)
        else:
            name, optional = v.as_text(ref) or "", False
        if not name:
            r.add(where, f"needs the {_what(source)}'s name", fix)
        else:
            r.extend(v.check_dns_subdomain(name, where if not isinstance(ref, Mapping) else where + ".name"))
        prefix = r.string(item, "prefix", path + ".prefix", "") or ""
        if prefix and not v.is_env_name(prefix):
            r.add(path + ".prefix", f"{v.show(prefix)} cannot start an environment variable name",
                  "use letters, digits, '_', e.g. DB_")
        elif prefix.startswith(ENV_PREFIX):
            r.add(path + ".prefix", f"{ENV_PREFIX}* variables are set by tfk8s-airflow itself", "use another prefix")
        out.append(EnvFrom(source, name, prefix, optional))
    return tuple(out)
