"""The parser's reading primitives: typed getters that record a problem and return a safe default.

Why: parsing never stops at the first problem; each getter either returns a value of the
expected type or records one :class:`~tfk8s_airflow.exceptions.Problem` (field, message,
fix) and returns a default, so the rest of the spec is still read and every problem is
reported at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tfk8s_airflow.exceptions import Problem
from tfk8s_airflow.job import fields as v


class Reader:
    """Collects the problems of one spec document."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, fld: str, message: str, fix: str = "") -> None:
        self.problems.append(Problem(fld, message, fix))

    def extend(self, problems: Iterable[Problem]) -> None:
        self.problems.extend(problems)

    def string(self, d: Mapping[str, Any], key: str, fld: str, default: str | None = None) -> str | None:
        val = d.get(key, default)
        if val is None:
            return default
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            self.add(fld, f"must be a string, got {type(val).__name__}", f"write {key}: \"...\"")
            return default
        return str(val)

    def integer(self, d: Mapping[str, Any], key: str, fld: str, default: int) -> int:
        val = d.get(key, default)
        if isinstance(val, bool) or not isinstance(val, int):
            if isinstance(val, str) and val.strip().lstrip("-").isdigit():
                return int(val)
            self.add(fld, f"must be an integer, got {val!r}", f"write {key}: {default}")
            return default
        return val

    def boolean(self, d: Mapping[str, Any], key: str, fld: str, default: bool) -> bool:
        val = d.get(key, default)
        if isinstance(val, bool):
            return val
        if isinstance(val, str) and val.lower() in ("true", "false"):
            return val.lower() == "true"
        self.add(fld, f"must be true or false, got {val!r}", f"write {key}: {str(default).lower()}")
        return default

    def strings(self, d: Mapping[str, Any], key: str, fld: str) -> tuple[str, ...] | None:
        val = d.get(key)
        if val is None:
            return None
        if isinstance(val, str):
            self.add(fld, "must be a list of strings, got a single string",
                     f"write {key}: [\"python\", \"train.py\"] (one item per argument)")
            return None
        if not isinstance(val, (list, tuple)) or not all(isinstance(x, (str, int, float)) and
                                                          not isinstance(x, bool) for x in val):
            self.add(fld, "must be a list of strings", f"write {key}: [\"...\", \"...\"]")
            return None
        return tuple(str(x) for x in val)

    def mapping(self, d: Mapping[str, Any], key: str, fld: str) -> dict[str, Any]:
        val = d.get(key)
        if val is None:
            return {}
        if not isinstance(val, Mapping):
            self.add(fld, f"must be a mapping, got {type(val).__name__}", f"write {key}: {{KEY: VALUE}}")
            return {}
        return dict(val)

    def duration(self, d: Mapping[str, Any], key: str, fld: str, default: int | None) -> int | None:
        val = d.get(key, default)
        if val is None:
            return None
        secs = v.parse_duration(val)
        if secs is None or secs <= 0:
            self.add(fld, f"must be a positive duration, got {val!r}",
                     "write seconds (300) or a duration like 90s, 5m, 2h")
            return default
        return secs

    def choice(self, d: Mapping[str, Any], key: str, fld: str, choices: tuple[str, ...], default: str) -> str:
        val = d.get(key, default)
        if val not in choices:
            self.add(fld, f"must be one of {', '.join(choices)}, got {val!r}", f"write {key}: {default}")
            return default
        return str(val)

    def unknown(self, d: Mapping[str, Any], allowed: Iterable[str], prefix: str) -> None:
        allowed = set(allowed)
        for key in d:
            if key not in allowed:
                guess = v.did_you_mean(str(key), allowed)
                self.add(f"{prefix}{key}", "unknown key", f"did you mean '{guess}'?" if guess else
                         f"remove it; known keys: {', '.join(sorted(allowed))}")
