"""The README and docs/ stay true: links resolve, runnable examples run, documented imports
import, the reference tables are the code's declarations and every spec example validates.

A code block preceded by ``<!-- runnable: tfk8s validate -->`` is a job spec that
``tfk8s validate`` must accept; one preceded by ``<!-- runnable: dag -->`` is a DAG file that
Airflow must load without import errors (next to the last spec block, as ``specs/<name>.yaml``).

The spec's keys, the job's defaults and limits and the deployment's settings are declared once, in
tfk8s_airflow/job/spec/model.py, tfk8s_airflow/job/defaults.py, tfk8s_airflow/job/policy/deployment.py and
tfk8s_airflow/staging/fanout.py (the ``[tfk8s]`` settings through tfk8s_airflow/configspec.py); the
tables of docs/spec.md, docs/security.md and docs/staging.md between the
``<!-- ...:begin -->`` and ``<!-- ...:end -->`` markers are generated from those declarations
(``TFK8S_UPDATE_GOLDEN=1`` rewrites them), and every ```` ```yaml spec ```` block there is a
whole spec that ``tfk8s validate`` accepts under the policy the docs state.
"""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfk8s_airflow.configspec import declared
from tfk8s_airflow.job.defaults import DEFAULTS, MAX_REPLICAS, MAX_REPLICAS_ENV, POLL_INTERVAL_S
from tfk8s_airflow.job.policy import SECTION, DeploymentPolicy
from tfk8s_airflow.job.spec import ROLES, RoleSpec, TFJobSpec, spec_fields
from tfk8s_airflow.staging.fanout import CopySettings

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
SPEC_DOC = REPO / "docs" / "spec.md"
SECURITY_DOC = REPO / "docs" / "security.md"
#: The policy the docs' spec examples assume (docs/spec.md says so above its examples).
DOC_POLICY = {"TFK8S_ALLOWED_SERVICE_ACCOUNTS": "tf-trainer",
              "TFK8S_ALLOWED_SECRETS": "db,registry-creds,ml-team/db,ml-team/registry-creds"}
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


ARCHITECTURE = REPO / "docs" / "architecture.md"


def test_the_architecture_page_names_every_module_and_only_modules_that_exist():
    text = ARCHITECTURE.read_text()
    named = set(DOTTED.findall(text))
    for dotted in sorted(named):  # a module, or a name in one (``job.records.JobRecord``)
        module, _, attr = dotted.rpartition(".")
        try:
            importlib.import_module(dotted)
        except ImportError:
            assert hasattr(importlib.import_module(module), attr), dotted
    package = REPO / "tfk8s_airflow"
    top = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    top |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    unnamed = sorted(m for m in top if not any(n == f"tfk8s_airflow.{m}" or n.startswith(f"tfk8s_airflow.{m}.")
                                               for n in named))
    assert not unnamed, f"docs/architecture.md does not say where these live: {unnamed}"
    for path in re.findall(r"`(tfk8s_airflow/[\w/.]+)`", text):
        assert (REPO / path).exists(), path


# ------------------------------------------------ generated tables and spec examples
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def field_table() -> str:
    rows = ["| key | where | default | meaning |", "| --- | --- | --- | --- |"]
    for f in spec_fields(TFJobSpec):
        where = "job, role" if "role" in f.metadata else "job"
        rows.append(f"| `{f.name}` | {where} | {_cell(f.metadata['default']) or '—'} | {_cell(f.metadata['doc'])} |")
    roles = ", ".join(f"`{r}`" for r in ROLES)
    rows.append(f"| {roles} | job | — | the role blocks: `replicas`, `tracked` and every key marked role; "
                "`worker: 3` is short for `worker: {replicas: 3}` |")
    for f in spec_fields(RoleSpec):
        rows.append(f"| `{f.name}` | role | {_cell(f.metadata['default'])} | {_cell(f.metadata['doc'])} |")
    return "\n".join(rows)


def settings_table() -> str:
    rows = [f"| `[{SECTION}]` setting | fallback variable | default | meaning |", "| --- | --- | --- | --- |"]
    for s in declared(DeploymentPolicy):
        rows.append(f"| `{s.name}` | `{s.variable}` | {_cell(s.default)} | {_cell(s.doc)} |")
    return "\n".join(rows)


def staging_settings_table() -> str:
    rows = ["| setting | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | `{s.default}` | {_cell(s.doc)} |" if not s.default.startswith("unset") else
             f"| `{s.name}` | {_cell(s.default)} | {_cell(s.doc)} |" for s in declared(CopySettings)]
    return "\n".join(rows)


def defaults_table() -> str:
    rows = ["| what | value | meaning |", "| --- | --- | --- |"]
    rows += [f"| {_cell(d.name)} | {_cell(d.value)} | {_cell(d.doc)} |" for d in DEFAULTS]
    return "\n".join(rows)


def metrics_table() -> str:
    from tfk8s_airflow.metricnames import CATALOG

    rows = ["| metric | kind | unit | tags | meaning |", "| --- | --- | --- | --- | --- |"]
    rows += [f"| `{m.name}` | {m.kind} | {_cell(m.unit)} | {', '.join(m.tags)} | {_cell(m.meaning)} |"
             for m in CATALOG]
    return "\n".join(rows)


def test_the_metrics_table_is_what_the_code_may_emit():
    _check_block(REPO / "docs" / "observability.md", "metrics", metrics_table())


def _check_block(path: Path, name: str, generated: str) -> None:
    text = path.read_text()
    m = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert m, f"{path.name} has no <!-- {name}:begin --> ... <!-- {name}:end --> block"
    if os.environ.get("TFK8S_UPDATE_GOLDEN"):
        path.write_text(text[:m.start(1)] + generated + "\n" + text[m.end(1):])
        return
    assert m.group(1) == generated + "\n", f"{path.name}'s {name} table is stale: run with TFK8S_UPDATE_GOLDEN=1"


def test_the_spec_reference_table_is_the_declared_fields():
    _check_block(SPEC_DOC, "fields", field_table())


def test_the_spec_doc_lists_the_defaults_and_limits():
    _check_block(SPEC_DOC, "defaults", defaults_table())


def test_the_operator_tables_show_the_declared_defaults():
    jobs = (REPO / "docs" / "jobs.md").read_text()
    assert f"| `poll_interval` | `{POLL_INTERVAL_S}` |" in jobs
    assert f"| `max_replicas` | `${MAX_REPLICAS_ENV}` or {MAX_REPLICAS} |" in jobs


def test_the_security_doc_lists_every_policy_setting():
    _check_block(SECURITY_DOC, "settings", settings_table())


def test_the_staging_doc_lists_every_staging_setting():
    _check_block(REPO / "docs" / "staging.md", "settings", staging_settings_table())


def test_every_tfk8s_setting_is_in_one_of_the_docs_tables():
    """The provider's ``config`` (what ``airflow config list`` shows) and the docs' tables are one list."""
    from tfk8s_airflow.provider import HOLDERS
    tables = settings_table() + staging_settings_table()
    for holder in HOLDERS:
        for s in declared(holder):
            assert f"| `{s.name}` |" in tables, s.name


def spec_blocks():
    for doc in (SPEC_DOC, SECURITY_DOC):
        for i, m in enumerate(re.finditer(r"```yaml spec\n(.*?)```", doc.read_text(), re.S)):
            yield pytest.param(m.group(1), id=f"{doc.stem}-{i}")


@pytest.mark.parametrize("text", list(spec_blocks()))
def test_every_spec_example_in_the_docs_validates(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFK8S_")} | DOC_POLICY
    res = subprocess.run([sys.executable, "-m", "tfk8s_airflow.cli", "validate", str(path)], capture_output=True,
                         text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
