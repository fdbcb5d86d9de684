"""The spec as a document: reading YAML/JSON files and applying ``--set`` overrides.

Why apart from the parser: a spec document arrives as a file, as text from a template or
as a dict from ``dag_run.conf``; loading it and applying overrides is the same for all of
them, and happens before the parser reads a single field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tfk8s_airflow.exceptions import Problem, SpecError

__all__ = ["load_spec_file", "apply_overrides"]


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON spec file into a dict, with a clear error for bad syntax."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(Problem(str(path), f"cannot read spec file: {exc.strerror or exc}",
                                "check the path")) from exc
    try:
        data = yaml.safe_load(text) if path.suffix != ".json" else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError(Problem(str(path), f"not valid YAML/JSON: {exc}",
                                "fix the syntax at the position shown")) from exc
    if not isinstance(data, dict):
        raise SpecError(Problem(str(path), "the file must hold one mapping (name:, image:, worker: ...)",
                                "see the README's spec format"))
    return data


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a copy of data."""
    out = copy.deepcopy(dict(data))
    for item in overrides:
        if "=" not in item:
            raise SpecError(Problem(f"--set {item}", "expected key=value",
                                    "write e.g. --set worker.replicas=4"))
        name, _, raw = item.partition("=")
        parts = [p for p in name.strip().split(".") if p]
        if not parts:
            raise SpecError(Problem(f"--set {item}", "empty key", "write e.g. --set worker.replicas=4"))
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node: dict[str, Any] = out
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return out
