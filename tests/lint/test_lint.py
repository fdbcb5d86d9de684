"""`make lint` passes on the tree and fails on a planted violation of each kind it checks.

Each case copies the tracked files into a scratch git repository, runs ``scripts/lint <check>``
there on the clean copy (it must pass, so the failure below is the plant's), plants one
violation and runs it again: it must fail and name what was planted.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)

PLANTS = {
    "ruff": ("tfk8s_airflow/exceptions.py", "\nimport os\n", "F401"),
    "mypy": ("tfk8s_airflow/job/naming.py", '\n\ndef planted() -> int:\n    return "not an int"\n',
             "Incompatible return value type"),
    "imports-layers": ("tfk8s_airflow/job/naming.py", "\nfrom tfk8s_airflow.operators import setup  # noqa\n",
                       "tfk8s_airflow.job.naming -> tfk8s_airflow.operators"),
    "imports-job-layers": ("tfk8s_airflow/job/builders/objects.py",
                           "\nfrom tfk8s_airflow.job.run import judge  # noqa\n",
                           "tfk8s_airflow.job.builders.objects -> tfk8s_airflow.job.run.judge"),
    "imports-job-floor": ("tfk8s_airflow/job/naming.py", "\nfrom tfk8s_airflow.job.spec import fields  # noqa\n",
                          "tfk8s_airflow.job.naming -> tfk8s_airflow.job.spec.fields"),
    "imports-job-unplaced": ("tfk8s_airflow/job/helpers.py", '"""A module in no layer."""\n',
                             "tfk8s_airflow.job.helpers"),
    "imports-job-model": ("tfk8s_airflow/job/spec/model.py", "\nfrom tfk8s_airflow.job.spec import parse  # noqa\n",
                          "tfk8s_airflow.job.spec.model -> tfk8s_airflow.job.spec.parse"),
    "imports-job-objects": ("tfk8s_airflow/job/builders/objects.py",
                            "\nfrom tfk8s_airflow.job.builders import tensorboard  # noqa\n",
                            "tfk8s_airflow.job.builders.objects -> tfk8s_airflow.job.builders.tensorboard"),
    "imports-pod-side": ("tfk8s_airflow/pod/runtime.py", "\nimport airflow  # noqa\n",
                         "tfk8s_airflow.pod.runtime -> airflow"),
    "imports-pod-ground": ("tfk8s_airflow/pod/trainer/state.py", "\nfrom tfk8s_airflow import viewpaths  # noqa\n",
                           "tfk8s_airflow.pod.trainer.state -> tfk8s_airflow.viewpaths"),
    "shell": ("devstack/down", '\nfor f in $(ls /tmp); do echo "$f"; done\n', "SC2045"),
}


def lint(tree: Path, check: str) -> subprocess.CompletedProcess:
    return subprocess.run(["scripts/lint", check], cwd=tree, capture_output=True, text=True, timeout=600,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "TFK8S_LINT_BIN": BIN, "TMPDIR": str(tree.parent)})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("lint") / "tree"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / rel)
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)
    return tree


@pytest.mark.parametrize("case", sorted(PLANTS))
def test_lint_fails_on_a_planted_violation(pristine, tmp_path, case):
    check = case.split("-")[0]
    tree = tmp_path / "tree"
    shutil.copytree(pristine, tree, symlinks=True)
    clean = lint(tree, check)
    assert clean.returncode == 0, f"scripts/lint {check} fails on the clean tree:\n{clean.stdout}\n{clean.stderr}"
    rel, text, expected = PLANTS[case]
    with open(tree / rel, "a", encoding="utf-8") as fh:
        fh.write(text)
    planted = lint(tree, check)
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert expected in planted.stdout + planted.stderr
    assert f"[lint] FAILED: {check}" in planted.stderr
