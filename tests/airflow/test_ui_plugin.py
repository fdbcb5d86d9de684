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
    nav, run, task = TFK8sPlugin.external_views
    assert (nav["destination"], nav["href"], nav["url_route"]) == ("nav", "/tfk8s/jobs", "tf-jobs")
    assert (run["destination"], run["url_route"]) == ("dag_run", "tf-job")
    assert run["href"] == "/tfk8s/jobs?dag_id={DAG_ID}&run_id={RUN_ID}"
    assert (task["destination"], task["url_route"]) == ("task_instance", "tf-job-task")
    assert task["href"] == "/tfk8s/jobs?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}"


def test_airflow_serves_the_three_views_with_their_destinations_and_placeholders():
    """What the UI reads (``GET /ui/plugins`` is built from these): Airflow's own response model takes
    each entry, destination and all, and the tabs' hrefs keep the placeholders the UI fills in."""
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse

    from tfk8s_airflow.plugin import TFK8sPlugin

    views = [ExternalViewResponse.model_validate(v) for v in TFK8sPlugin.external_views]
    assert [(v.destination, v.name) for v in views] == [("nav", "TF jobs"), ("dag_run", "TF job"),
                                                       ("task_instance", "TF job")]
    assert all(v.url_route for v in views)  # the UI offers a tab only for an entry with a route
    for v in views[1:]:
        filled = (v.href.replace("{DAG_ID}", "d").replace("{RUN_ID}", "r").replace("{TASK_ID}", "t")
                  .replace("{MAP_INDEX}", "0"))
        assert "{" not in filled and filled.startswith("/tfk8s/jobs?dag_id=d&run_id=r"), filled


def test_loading_the_plugin_imports_no_api_server_module():
    code = ("import sys, tfk8s_airflow.plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('airflow.api_fastapi', 'tfk8s_airflow.ui.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_DIR)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout
