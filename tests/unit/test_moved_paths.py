"""The pod side's old paths (before tfk8s_airflow.pod) keep working for one release: the same
module objects on import, the same programs under ``python -m``."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

MOVED = {"tfk8s_airflow.runtime": "tfk8s_airflow.pod.runtime",
         "tfk8s_airflow.codefetch": "tfk8s_airflow.pod.codefetch",
         "tfk8s_airflow.trainer.dataset": "tfk8s_airflow.pod.trainer.dataset",
         "tfk8s_airflow.trainer.state": "tfk8s_airflow.pod.trainer.state",
         "tfk8s_airflow.trainer.evaluate": "tfk8s_airflow.pod.trainer.evaluate"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_import_path_is_the_new_module(old):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert importlib.import_module(old) is importlib.import_module(MOVED[old])


@pytest.mark.parametrize("old,usage", [("tfk8s_airflow.trainer", "--mode"),
                                       ("tfk8s_airflow.trainer.evaluate", "--heldout"),
                                       ("tfk8s_airflow.codefetch", "--uri")])
def test_an_old_python_m_path_runs_the_program(old, usage):
    out = subprocess.run([sys.executable, "-m", old, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert usage in out.stdout
    argv0 = subprocess.run([sys.executable, "-c", f"import runpy, sys; sys.argv = ['x', '--help']; "
                            f"runpy.run_module({old!r}, run_name='__main__', alter_sys=True)"],
                           capture_output=True, text=True, timeout=60)
    assert argv0.returncode == 0, argv0.stderr  # sys.argv[0] is the module's file, as programs expect
