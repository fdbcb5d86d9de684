"""The spec as a document: bounded loading of YAML/JSON, the document's shape, ``--set`` overrides.

Why bounds before anything reads a field: a spec may come from the UI form or a rendered
template, and YAML aliases let 500 bytes stand for a structure of billions of values. So
spec text is capped (:data:`MAX_SPEC_CHARS`), the YAML node graph is measured with every
alias expanded before a single Python object is built (:data:`MAX_NODES`,
:data:`MAX_DEPTH`, no recursive aliases), and a document handed over as a dict (from
``dag_run.conf`` or Python) is walked, iteratively and only up to the same bounds, before
the parser or ``copy.deepcopy`` touches it. The walk also refuses what no field can hold:
non-string keys (YAML reads an unquoted ``on:`` as a boolean) and text that is not valid
Unicode (a lone surrogate cannot be sent to the API server).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.spec.fields import show

__all__ = ["MAX_SPEC_CHARS", "MAX_NODES", "MAX_DEPTH", "load_yaml", "load_spec_file", "document_problems",
           "apply_overrides"]

#: The largest spec text (and total text of a spec document): 1 MiB, far above any real job.
MAX_SPEC_CHARS = 2**20
#: The most values a spec document may hold, YAML aliases counted each time they are used.
MAX_NODES = 50_000
#: The deepest nesting: a spec's deepest field (worker.env.X.value_from.secret_key_ref.name) is 6.
MAX_DEPTH = 16

try:  # libyaml's parser bounds flow nesting itself; the pure-Python one is the fallback
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyPI wheels ship libyaml
    _Loader = yaml.SafeLoader

_TOO_BIG_FIX = "write a smaller spec (YAML anchors and aliases count each time they are used)"


def load_yaml(text: str, source: str) -> Any:
    """One YAML (or JSON) document, bounded; SpecError naming ``source`` when it cannot be read."""
    try:
        return _load_yaml(text, source)
    except yaml.YAMLError as exc:
        raise SpecError(Problem(source, f"not valid YAML/JSON: {_clip(str(exc))}",
                                "fix the syntax at the position shown")) from exc


def _load_yaml(text: str, source: str) -> Any:
    """Like ``yaml.safe_load`` but refusing oversized text and node graphs; syntax errors stay YAMLError."""
    if len(text) > MAX_SPEC_CHARS:
        raise SpecError(Problem(source, f"is {len(text)} characters, more than the limit of {MAX_SPEC_CHARS}",
                                _TOO_BIG_FIX))
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problem = _graph_problem(node, source)
        if problem:
            raise SpecError(problem)
        return loader.construct_document(node)
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an integer of 10,000 digits
        raise SpecError(Problem(source, f"holds a value that cannot be read: {_clip(str(exc))}",
                                "quote long numbers, or write them shorter")) from exc
    finally:
        loader.dispose()


def _graph_problem(root: yaml.Node, source: str) -> Problem | None:
    """Measure a composed YAML node graph with aliases expanded, without expanding them.

    Aliases make the graph share nodes, so the expanded size of a node is computed once
    per node (memoised), iteratively; a node reached again while its own children are
    being measured is a recursive alias.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        nid = id(node)
        kids = _children(node)
        if children_done:
            open_nodes.discard(nid)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            depth[nid] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[nid] > MAX_NODES:
                return Problem(source, f"expands to more than {MAX_NODES} values", _TOO_BIG_FIX)
            if depth[nid] > MAX_DEPTH:
                return Problem(source, f"nests deeper than {MAX_DEPTH} levels", "flatten the document")
            continue
        if nid in size:
            continue
        if nid in open_nodes:
            return Problem(source, "has a recursive alias (an anchor used inside itself)", "remove the alias")
        open_nodes.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON spec file into a dict, with a clear error for bad syntax."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:
            text = fh.read(MAX_SPEC_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError(Problem(str(path), f"cannot read spec file: {_clip(reason)}",
                                "check the path, and that the file is UTF-8 text")) from exc
    if path.suffix == ".json":
        if len(text) > MAX_SPEC_CHARS:
            raise SpecError(Problem(str(path), f"is more than {MAX_SPEC_CHARS} characters", _TOO_BIG_FIX))
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise SpecError(Problem(str(path), f"not valid JSON: {_clip(str(exc))}",
                                    "fix the syntax at the position shown")) from exc
    else:
        data = load_yaml(text, str(path))
    if not isinstance(data, dict):
        raise SpecError(Problem(str(path), "the file must hold one mapping (name:, image:, worker: ...)",
                                "see docs/spec.md for the spec format"))
    return data


def document_problems(data: Any) -> list[Problem]:
    """What makes a document unreadable as a spec, whatever its fields; [] when none.

    An iterative walk that stops at the first bound exceeded, so a document that shares
    its parts (YAML aliases, or one Python list put in many places) costs at most
    :data:`MAX_NODES` steps.
    """
    problems: list[Problem] = []
    chars = 0
    count = 0
    stack: list[tuple[Any, int, tuple]] = [(data, 0, ())]
    while stack:
        value, level, where = stack.pop()
        count += 1
        if count > MAX_NODES:
            return [Problem("spec", f"holds more than {MAX_NODES} values", _TOO_BIG_FIX)]
        if level > MAX_DEPTH:
            return [Problem(_where(where), f"nests deeper than {MAX_DEPTH} levels", "flatten the spec")]
        if isinstance(value, str):
            chars += len(value)
            if not _is_unicode(value):
                problems.append(Problem(_where(where), "is not valid Unicode text (it holds a lone surrogate)",
                                        "send the text as UTF-8"))
        elif isinstance(value, Mapping):
            for k, child in value.items():
                if not isinstance(k, str):
                    problems.append(Problem(_where((where, show(k))), f"the key {show(k)} is not a string",
                                            "quote it: YAML reads unquoted yes, no, on, off as booleans "
                                            "and digits as numbers"))
                    continue
                chars += len(k)
                if not _is_unicode(k):
                    problems.append(Problem(_where(where), "has a key that is not valid Unicode text",
                                            "send the text as UTF-8"))
                    continue
                stack.append((child, level + 1, (where, k)))
        elif isinstance(value, (list, tuple)):
            stack.extend((child, level + 1, (where, i)) for i, child in enumerate(value))
        if chars > MAX_SPEC_CHARS:
            return [Problem("spec", f"holds more than {MAX_SPEC_CHARS} characters of text", _TOO_BIG_FIX)]
        if len(problems) > 100:
            break
    return problems


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _where(path: tuple) -> str:
    parts: list[Any] = []
    while path:
        path, part = path
        parts.append(part)
    out = ""
    for part in reversed(parts):
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "spec"


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a copy of data.

    The copy is made only of a document that :func:`document_problems` passed.
    """
    out = copy.deepcopy(dict(data))
    for item in overrides:
        where = f"--set {_clip(item, 80)}"
        if "=" not in item:
            raise SpecError(Problem(where, "expected key=value", "write e.g. --set worker.replicas=4"))
        name, _, raw = item.partition("=")
        parts = [p for p in name.strip().split(".") if p]
        if not parts:
            raise SpecError(Problem(where, "empty key", "write e.g. --set worker.replicas=4"))
        try:
            value = _load_yaml(raw, where) if raw.strip() else ""
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
