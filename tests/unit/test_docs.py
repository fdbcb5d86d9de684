"""docs/spec.md and docs/security.md: their tables are the code's declarations, their examples validate.

The spec's keys and the deployment's settings are declared once, in tfk8s_airflow/job/spec.py
and tfk8s_airflow/job/policy.py; the tables between the docs' ``<!-- ...:begin -->`` and
``<!-- ...:end -->`` markers are generated from those declarations (``TFK8S_UPDATE_GOLDEN=1``
rewrites them), and every ```` ```yaml spec ```` block is a whole spec that ``tfk8s validate``
accepts under the policy the docs state.
"""
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfk8s_airflow.job.policy import SECTION, DeploymentPolicy
from tfk8s_airflow.job.spec import ROLES, RoleSpec, TFJobSpec, spec_fields

ROOT = Path(__file__).resolve().parents[2]
SPEC_DOC = ROOT / "docs" / "spec.md"
SECURITY_DOC = ROOT / "docs" / "security.md"
#: The policy the docs' examples assume (docs/spec.md says so above its examples).
DOC_POLICY = {"TFK8S_ALLOWED_SERVICE_ACCOUNTS": "tf-trainer", "TFK8S_ALLOWED_SECRETS": "db,registry-creds"}


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
    rows = [f"| `[{SECTION}]` setting | environment (`tfk8s` CLI) | default | meaning |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(DeploymentPolicy):
        rows.append(f"| `{f.name}` | `TFK8S_{f.name.upper()}` | {_cell(f.metadata['default'])} | "
                    f"{_cell(f.metadata['doc'])} |")
    return "\n".join(rows)


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


def test_the_security_doc_lists_every_policy_setting():
    _check_block(SECURITY_DOC, "settings", settings_table())


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
