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
from tfk8s_airflow.job.spec import fields as v


class Reader:
    """Collects the problems of one spec document."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: set[Problem] = set()

    def add(self, fld: str, message: str, fix: str = "") -> None:
        self.extend([Problem(fld, message, fix)])

    def extend(self, problems: Iterable[Problem]) -> None:
        """Record problems, each once (a job-wide value inherited by every role is reported once)."""
        for p in problems:
            if p not in self._seen:
                self._seen.add(p)
                self.problems.append(p)

    def string(self, d: Mapping[str, Any], key: str, fld: str, default: str | None = None) -> str | None:
        val = d.get(key, default)
        if val is None:
            return default
        text = v.as_text(val)
        if text is None:
            what = show_type(val)
            self.add(fld, f"must be a string, got {what}", f"write {key}: \"...\" (quoted)")
            return default
        return text

    def integer(self, d: Mapping[str, Any], key: str, fld: str, default: int, *,
                low: int = -v.INT64_MAX - 1, high: int = v.INT64_MAX) -> int:
        val = d.get(key, default)
        num = v.parse_int(val)
        if num is None:
            self.add(fld, f"must be an integer, got {v.show(val)}", f"write {key}: {default}")
            return default
        if not low <= num <= high:
            self.add(fld, f"{v.show(num)} is out of range ({low} to {high})", f"write {key}: {default}")
            return default
        return num

    def boolean(self, d: Mapping[str, Any], key: str, fld: str, default: bool) -> bool:
        val = d.get(key, default)
        if isinstance(val, bool):
            return val
        if isinstance(val, str) and val.lower() in ("true", "false"):
            return val.lower() == "true"
        self.add(fld, f"must be true or false, got {v.show(val)}", f"write {key}: {str(default).lower()}")
        return default

    def strings(self, d: Mapping[str, Any], key: str, fld: str) -> tuple[str, ...] | None:
        val = d.get(key)
        if val is None:
            return None
        if isinstance(val, str):
            self.add(fld, "must be a list of strings, got a single string",
                     f"write {key}: [\"python\", \"train.py\"] (one item per argument)")
            return None
        if not isinstance(val, (list, tuple)):
            self.add(fld, f"must be a list of strings, got {show_type(val)}", f"write {key}: [\"...\", \"...\"]")
            return None
        out = []
        for i, item in enumerate(val):
            text = v.as_text(item)
            if text is None:
                self.add(f"{fld}[{i}]", f"must be a string, got {show_type(item)}", "quote it")
                continue
            out.append(text)
        return tuple(out) if len(out) == len(val) else None

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
            self.add(fld, f"must be a positive duration, got {v.show(val)}",
                     "write seconds (300) or a duration like 90s, 5m, 2h")
            return default
        if secs > v.MAX_DURATION_S:
            self.add(fld, f"{v.show(val)} is longer than {v.MAX_DURATION_S} seconds (about 68 years)",
                     "write a shorter duration, e.g. 2h or 7d")
            return default
        return secs

    def choice(self, d: Mapping[str, Any], key: str, fld: str, choices: tuple[str, ...], default: str) -> str:
        val = d.get(key, default)
        if not isinstance(val, str) or val not in choices:
            self.add(fld, f"must be one of {', '.join(choices)}, got {v.show(val)}", f"write {key}: {default}")
            return default
        return val

    def unknown(self, d: Mapping[str, Any], allowed: Iterable[str], prefix: str) -> None:
        allowed = set(allowed)
        for key in d:
            if key not in allowed:
                self.add(f"{prefix}{key or v.show(key)}", "unknown key", _unknown_fix(str(key), allowed))


def show_type(value: Any) -> str:
    """How a value of the wrong type is named: its type, or the value for numbers that are not text."""
    if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
        return v.show(value)
    return type(value).__name__


def _snake(word: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in word).lstrip("_")


def _unknown_fix(word: str, allowed: set[str]) -> str:
    if _snake(word) in allowed:
        return f"write {_snake(word)}: the spec's keys are snake_case"
    guess = v.did_you_mean(word, allowed)
    return f"did you mean '{guess}'?" if guess else f"remove it; known keys: {', '.join(sorted(allowed))}"
