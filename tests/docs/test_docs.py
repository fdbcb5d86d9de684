"""The README and docs/ stay true: links resolve, runnable examples run, documented imports import.

A code block preceded by ``<!-- runnable: tfk8s validate -->`` is a job spec that
``tfk8s validate`` must accept; one preceded by ``<!-- runnable: dag -->`` is a DAG file that
Airflow must load without import errors (next to the last spec block, as ``specs/<name>.yaml``).
"""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(?:<!-- runnable: (?P<kind>[a-z0-9 ]+) -->\n)?"
                   r"(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)\n(?P=indent)```", re.S | re.M)
DOTTED = re.compile(r"`(tfk8s_airflow(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")
FROM_IMPORT = re.compile(r"^\s*from (tfk8s_airflow[\w.]*) import ([\w, ]+)$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_readme_is_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, broken


def test_runnable_examples_run(tmp_path, airflow_db):
    found = 0
    for doc in DOCS:
        spec_text = None
        for m in FENCE.finditer(doc.read_text()):
            kind = (m.group("kind") or "").strip()
            if not kind:
                continue
            found += 1
            where = f"{doc.name}: block at offset {m.start()}"
            if kind == "tfk8s validate":
                spec_text = m.group("body")
                spec = tmp_path / "spec.yaml"
                spec.write_text(spec_text)
                res = subprocess.run([str(Path(sys.executable).with_name("tfk8s")), "validate", str(spec)],
                                     capture_output=True, text=True)
                assert res.returncode == 0, f"{where}: {res.stdout}{res.stderr}"
            elif kind == "dag":
                folder = tmp_path / f"dag{found}"
                (folder / "specs").mkdir(parents=True)
                if spec_text is not None:
                    name = re.search(r"^name: (\S+)", spec_text, re.M).group(1)
                    (folder / "specs" / f"{name}.yaml").write_text(spec_text)
                (folder / "example_dag.py").write_text(m.group("body"))
                from airflow.dag_processing.dagbag import DagBag

                bag = DagBag(dag_folder=str(folder))
                assert not bag.import_errors, f"{where}: {bag.import_errors}"
                assert bag.dags, f"{where}: no DAG"
            else:
                pytest.fail(f"{where}: unknown runnable kind {kind!r}")
    assert found >= 2


def test_every_documented_import_path_imports():
    missing = []
    for doc in DOCS:
        if doc.name == "CHANGELOG.md":  # it names the old paths of what moved, on purpose
            continue
        text = doc.read_text()
        names = set(DOTTED.findall(text))
        for module, items in FROM_IMPORT.findall(text):
            names.update(f"{module}.{item.strip()}" for item in items.split(",") if item.strip())
        for dotted in sorted(names):
            try:
                importlib.import_module(dotted)
                continue
            except ImportError:
                pass
            module, _, attr = dotted.rpartition(".")
            try:
                obj = importlib.import_module(module)
            except ImportError:
                obj = None
                # a.b.Class.method: one level deeper
                mod2, _, cls = module.rpartition(".")
                try:
                    obj = getattr(importlib.import_module(mod2), cls)
                except (ImportError, AttributeError):
                    missing.append(f"{doc.name}: {dotted}")
                    continue
            if not hasattr(obj, attr):
                missing.append(f"{doc.name}: {dotted}")
    assert not missing, missing
