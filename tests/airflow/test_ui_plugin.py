"""The plugin registers the TF jobs view, and loading it for macros costs no api-server import."""
import subprocess
import sys

from tests.fixtures.airflow_services import REPO_DIR


def test_the_plugin_mounts_the_view_and_adds_it_to_the_navigation():
    from tfk8s_airflow.plugin import TFK8sPlugin
    from tfk8s_airflow.ui.app import app

    (entry,) = TFK8sPlugin.fastapi_apps
    assert entry["url_prefix"] == "/tfk8s" and entry["app"] is app
    assert {r.path for r in app.routes} >= {"/jobs", "/api/jobs", "/api/runs/{dag_id}/{run_id}/jobs",
                                            "/api/runs/{dag_id}/{run_id}/jobs/{job}/logs/{replica}"}
    (view,) = TFK8sPlugin.external_views
    assert view["href"] == "/tfk8s/jobs" and view["url_route"] == "tf-jobs"


def test_loading_the_plugin_imports_no_api_server_module():
    code = ("import sys, tfk8s_airflow.plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('airflow.api_fastapi', 'tfk8s_airflow.ui.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_DIR)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout
