"""The example DAGs in ``dags/`` import cleanly, are tagged, and the manual form validates.

No cluster or server is needed: ``airflow dags list-import-errors --local`` parses the
``dags-folder`` bundle with the real CLI (against the session's SQLite database), and
DagBag parses the same files in this process for the per-DAG checks.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

REPO_DIR = Path(__file__).resolve().parents[2]
DAGS_DIR = REPO_DIR / "dags"
EXPECTED = {"tfk8s_example_job", "tfk8s_retrain_daily", "tfk8s_train_manual", "tfk8s_deploy_model"}
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def _list_import_errors(bundle_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps([
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(bundle_dir)}}])
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(bundle_dir)
    return subprocess.run([AIRFLOW, "dags", "list-import-errors", "--local", "-B", "dags-folder", "-o", "json"],
                          env=env, capture_output=True, text=True, timeout=300)


def _errors(res: subprocess.CompletedProcess) -> list:
    # The JSON document is the last line that looks like one (warnings precede it).
    lines = [ln for ln in res.stdout.splitlines() if ln.strip().startswith(("[", "{"))]
    return json.loads(lines[-1]) if lines else []


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_DIR), safe_mode=False, bundle_path=DAGS_DIR, bundle_name="dags-folder")


def test_list_import_errors_is_empty_for_dags_folder(airflow_db):
    res = _list_import_errors(DAGS_DIR)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert _errors(res) == [], res.stdout[-3000:]


def test_list_import_errors_does_report_a_broken_file(airflow_db, tmp_path):
    """The check above would see an error: the same command names a broken DAG file."""
    (tmp_path / "broken_dag.py").write_text("from airflow.sdk import DAG\nraise RuntimeError('boom')\n")
    res = _list_import_errors(tmp_path)
    assert "broken_dag.py" in res.stdout + res.stderr and "boom" in res.stdout + res.stderr, \
        res.stdout[-3000:] + res.stderr[-3000:]


def test_dagbag_parses_every_dag_without_errors(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) >= EXPECTED, sorted(dagbag.dag_ids)


def test_every_dag_has_tags(dagbag):
    for dag_id in dagbag.dag_ids:
        assert "tfk8s" in (dagbag.get_dag(dag_id).tags or ()), dag_id


def test_manual_form_rejects_zero_workers_without_a_cluster(dagbag):
    from airflow.sdk.exceptions import ParamValidationError

    params = copy.deepcopy(dagbag.get_dag("tfk8s_train_manual").params)
    params.validate()  # the defaults are valid
    with pytest.raises(ParamValidationError, match="workers"):
        params["workers"] = 0
    for name, bad in [("ps", 0), ("gpus_per_worker", -1), ("learning_rate", 0), ("namespace", "Not_A_Name"),
                      ("data_path", "relative/path"), ("steps", 0)]:
        with pytest.raises(ParamValidationError, match=name):
            copy.deepcopy(params)[name] = bad


def test_daily_dag_is_safe_to_backfill(dagbag):
    """Keyed by the logical date, at most two runs at once, no catch-up on unpause."""
    dag = dagbag.get_dag("tfk8s_retrain_daily")
    assert dag.max_active_runs == 2 and dag.catchup is False
    assert {t.task_id for t in dag.tasks} >= {"wait_for_partition", "stage", "train.setup", "train.replica",
                                              "train.wait", "train.teardown", "evaluate", "promote"}
    assert dag.get_task("promote").version == "{{ ds }}"
    assert "{{ ds }}" in dag.get_task("evaluate").model_dir
