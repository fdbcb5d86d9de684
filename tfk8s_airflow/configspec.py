"""Every ``[tfk8s]`` setting declared once, on the dataclass field that holds its value.

Why one declaration: a setting is read (its parser), documented (docs/security.md's and
docs/staging.md's tables, generated and checked by tests/docs) and announced to Airflow (the
``config`` of the provider's metadata, :mod:`tfk8s_airflow.provider`, which ``airflow config
list`` shows); all three read the same field metadata, so they cannot differ. A new field with
``metadata=setting(...)`` on :class:`~tfk8s_airflow.job.policy.DeploymentPolicy` or
:class:`~tfk8s_airflow.staging.fanout.CopySettings` (:data:`HOLDERS` of the provider) is read,
documented and announced without another line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from tfk8s_airflow.exceptions import Problem, SpecError

__all__ = ["SECTION", "Setting", "declared", "read", "setting"]

#: The section of Airflow's configuration (``AIRFLOW__TFK8S__<NAME>``); ``TFK8S_<NAME>`` is the fallback.
SECTION = "tfk8s"

_UNSET = object()
#: Airflow's option types (provider_info.schema.json) by the field's annotation.
_KINDS = {"int": "integer", "bool": "boolean", "float": "float"}


def setting(doc: str, default: str, parse: Callable[[Any], Any], *, name: str | None = None,
            value: Any = _UNSET, kind: str | None = None, example: str | None = None) -> dict[str, Any]:
    """Metadata of a field that is a ``[tfk8s]`` setting.

    :param doc: what it decides (the docs' "meaning", the provider's description).
    :param default: the default as the docs show it ("86400 (24 h)", "unset: no queue").
    :param parse: reads a raw value into the field's, or returns a :class:`Problem` (its field is
        filled in with ``[tfk8s] <name>``).
    :param name: the setting's name when it is not the field's (``staging_pods`` for ``pods``).
    :param value: the default as Airflow's configuration writes it (default: from the field's
        default; None where it has none to show, e.g. a default derived from other settings).
    :param kind: Airflow's option type when the annotation does not say it (``string`` for a
        duration held as seconds).
    :param example: a value to show (``airflow config list`` writes it commented out).
    """
    return {"doc": doc, "default": default, "parse": parse, "name": name, "value": value, "kind": kind,
            "example": example}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One ``[tfk8s]`` setting as the docs and the provider's metadata show it."""

    name: str
    field: str
    doc: str
    default: str
    value: str | None
    kind: str
    example: str | None
    parse: Callable[[Any], Any]

    @property
    def variable(self) -> str:
        """The fallback environment variable."""
        return f"TFK8S_{self.name.upper()}"


def _literal(value: Any) -> str | None:
    """A field's default as a value of Airflow's configuration (None: nothing to write)."""
    if value is None or value == "" or (isinstance(value, (tuple, list, Mapping)) and not value):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def declared(cls: type) -> list[Setting]:
    """The settings of dataclass ``cls`` (its fields with :func:`setting` metadata), in field order."""
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if "parse" not in meta:
            continue
        value = meta.get("value", _UNSET)
        if value is _UNSET:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            value = _literal(default)
        kind = meta.get("kind") or _KINDS.get(str(f.type), "string")
        out.append(Setting(meta.get("name") or f.name, f.name, meta["doc"], meta["default"], value, kind,
                           meta.get("example"), meta["parse"]))
    return out


def read(cls: type, get: Callable[[str], Any]) -> dict[str, Any]:
    """The field values of ``cls`` its settings give through ``get(name) -> raw or None``.

    Unset and empty settings keep the field's default. Every setting is checked: a bad one is a
    :class:`SpecError` naming ``[tfk8s] <name>``, all of them at once.
    """
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for s in declared(cls):
        raw = get(s.name)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            continue
        value = s.parse(raw)
        if isinstance(value, Problem):
            problems.append(Problem(f"[{SECTION}] {s.name}", value.message, value.fix))
        else:
            values[s.field] = value
    if problems:
        raise SpecError(problems)
    return values
