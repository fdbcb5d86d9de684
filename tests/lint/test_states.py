"""Adding a state names every consumer: each place that acts on a state matches it exhaustively.

The case copies the package into a scratch directory, adds one member to a state enum of
``tfk8s_airflow/job/states.py`` (as the one-line change docs/architecture.md describes) and runs
the project's mypy there: it must fail, and name each module that must decide what the new
state means (its ``match`` ends in ``assert_never``). The clean copy passes first, so the
errors are the new state's.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MYPY = str(Path(sys.executable).parent / "mypy")

#: The consumers of each enum: where a new member must be given a meaning.
CONSUMERS = {
    "JobState": {"tfk8s_airflow/job/states.py", "tfk8s_airflow/job/run/judge.py", "tfk8s_airflow/job/run/recovery.py",
                 "tfk8s_airflow/triggers/job.py", "tfk8s_airflow/sensors/job.py", "tfk8s_airflow/ui/rows.py"},
    "EndState": {"tfk8s_airflow/triggers/job.py", "tfk8s_airflow/sensors/job.py", "tfk8s_airflow/sensors/hdfs.py",
                 "tfk8s_airflow/operators/replica.py"},
}


def mypy(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([MYPY, "--cache-dir", str(tree.parent / "mypy-cache")], cwd=tree, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("states") / "tree"
    shutil.copytree(REPO / "tfk8s_airflow", tree / "tfk8s_airflow", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", tree / "pyproject.toml")
    clean = mypy(tree)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    return tree


@pytest.mark.parametrize("enum", sorted(CONSUMERS))
def test_a_new_state_makes_mypy_name_every_consumer(pristine, tmp_path, enum):
    tree = tmp_path / "tree"
    shutil.copytree(pristine, tree)
    # The clean tree's cache: mypy rechecks what the new member changes (states.py and every module that
    # imports it) instead of the whole package and its dependencies' stubs.
    shutil.copytree(pristine.parent / "mypy-cache", tmp_path / "mypy-cache")
    states = tree / "tfk8s_airflow/job/states.py"
    text = states.read_text()
    anchor = f"class {enum}(StrEnum):\n"
    head, _, body = text.partition(anchor)
    doc_end = body.index('"""', body.index('"""') + 3) + 4  # after the class docstring
    states.write_text(head + anchor + body[:doc_end] + '    WAITING_FOR_ADMISSION = "waiting_for_admission"\n'
                      + body[doc_end:])
    planted = mypy(tree)
    assert planted.returncode == 1, planted.stdout + planted.stderr
    named = set(re.findall(r"^(tfk8s_airflow/\S+\.py):\d+: error: .*assert_never", planted.stdout, re.M))
    assert named == CONSUMERS[enum], planted.stdout
