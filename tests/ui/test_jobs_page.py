"""The TF jobs page's own script in a real browser, fed rows the pure assembly makes (no server).

The browser loads the page's real HTML, script and style; its data call is answered with rows
that ``tfk8s_airflow.ui.rows.job_row`` assembled from records a hostile pod or DAG could have
written. What this pins: every such value is shown as text (no element, no script, no dialog),
only http(s) and relative URLs become links, and a pushed ``progress`` renders as step / target,
loss, rate and ETA with a TensorBoard link (what the stack test sees once the sensor pushes it).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ui.conftest import screenshot
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JobProgress, ReplicaResult
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.ui.rows import JobSources, Links, ReplicaTask, job_row

pytestmark = [pytest.mark.ui]

STATIC = Path(__file__).resolve().parents[2] / "tfk8s_airflow" / "ui" / "static"
ORIGIN = "http://tfk8s.invalid"
HOSTILE = '<img src=x onerror="window.__pwned=1">'


def rows() -> list[dict]:
    spec = parse_spec({"name": "ctr", "image": "i:1", "ps": 1, "worker": 2})
    names = JobNames.for_run(spec, "manual__1", "train", "dag_a")
    record = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec, 600),
                        has_shards=False, kubernetes_conn_id="kubernetes_default", poll_interval=2.0, created_at=1.0)
    progress = JobProgress(job=record.job, namespace="ns", state="running", updated_at=1.0, step=120,
                           target_step=300, loss=0.4123, examples_per_sec=850.0, eta_s=75.0,
                           replicas={"worker-0": {"phase": "Running", "node": HOSTILE}},
                           tensorboard_url="http://127.0.0.1:6006/")
    running = JobSources(dag_id="dag_a", run_id=f"manual__1{HOSTILE}", run_state="running", prefix="train.",
                         record=record, progress=progress, tasks={0: ReplicaTask(0, "deferred", 1)})
    failed_progress = JobProgress(job=record.job, namespace="ns", state="failed", updated_at=1.0,
                                  tensorboard_url="javascript:window.__pwned=1")
    failed = JobSources(dag_id="dag_b", run_id="manual__2", run_state="failed", prefix="train.", record=record,
                        progress=failed_progress,
                        summary={"state": "failed", "reason": f"worker-1 exited 3: {HOSTILE}", "replicas": {}},
                        results={2: ReplicaResult("worker-1", "p", "failed", HOSTILE, phase="Failed", exit_code=3)})
    links = Links(ui="/", app="/tfk8s")
    out = [job_row(running, links), job_row(failed, links)]
    assert out[1]["tensorboard_url"] is None  # the assembly refuses it; the page must refuse it too:
    out[1]["tensorboard_url"] = failed_progress.tensorboard_url
    return out


def test_hostile_values_are_text_and_progress_renders(browser):
    context = browser()
    page = context.new_page()
    body = json.dumps({"user": HOSTILE, "jobs": rows()})

    def serve(route):
        path = route.request.url[len(ORIGIN):].split("?")[0]
        if path == "/tfk8s/jobs":
            route.fulfill(body=(STATIC / "jobs.html").read_text(), content_type="text/html")
        elif path.startswith("/tfk8s/static/"):
            name = path.rsplit("/", 1)[-1]
            kind = "text/javascript" if name.endswith(".js") else "text/css"
            route.fulfill(body=(STATIC / name).read_text(), content_type=kind)
        elif path == "/tfk8s/api/jobs":
            route.fulfill(body=body, content_type="application/json")
        else:
            route.fulfill(status=404, body="")

    context.route(f"{ORIGIN}/**", serve)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{ORIGIN}/tfk8s/jobs")
    page.locator("section.job").nth(1).wait_for()

    running, failed = page.locator("section.job").all()
    assert running.locator("[data-field=step]").inner_text() == "step 120 / 300"
    progress = running.locator("[data-field=progress]").inner_text()
    assert "loss 0.4123" in progress and "850.0 examples/s" in progress and "ETA 1m 15s" in progress
    assert running.locator("[data-field=tensorboard]").get_attribute("href") == "http://127.0.0.1:6006/"
    assert running.locator("tr[data-replica=worker-0] [data-field=log]").get_attribute("href") == \
        f"{ORIGIN}/dags/dag_a/runs/manual__1%3Cimg%20src%3Dx%20onerror%3D%22window.__pwned%3D1%22%3E" \
        "/tasks/train.replica/mapped/1"

    # Hostile text stays text: in the run link, a node, a reason, the user's name.
    assert HOSTILE in running.locator("a").first.inner_text()
    assert HOSTILE in running.locator("tr[data-replica=worker-0]").inner_text()
    assert HOSTILE in failed.locator("[data-field=reason]").inner_text()
    assert HOSTILE in page.locator("#scope").inner_text()
    assert page.locator("main img").count() == 0
    # A javascript: URL is never a link.
    assert failed.locator("[data-field=tensorboard]").evaluate("e => e.tagName") == "SPAN"
    assert page.evaluate("window.__pwned") is None and dialogs == []
    assert "no progress was reported" in failed.locator("[data-field=progress]").inner_text()


def test_the_task_instance_tab_marks_the_replica_and_the_charts_are_the_servers_points(browser):
    """What the task-instance tab opens (``href`` as the UI fills it in): the page asks for the run's jobs
    with the task and map index, shows the marked job's replica row marked, its progress bar at the
    server's percent, and the loss and examples/s charts as SVG polylines with exactly the server's points."""
    from tfk8s_airflow.job.run.records import ProgressPoint
    from tfk8s_airflow.ui.rows import mark_task

    spec = parse_spec({"name": "ctr", "image": "i:1", "ps": 1, "worker": 2})
    run_id = "manual__2026-01-01T00:00:00+00:00"
    names = JobNames.for_run(spec, run_id, "train", "dag_a")
    record = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec, 600),
                        has_shards=False, kubernetes_conn_id="kubernetes_default", poll_interval=2.0, created_at=1.0)
    history = tuple(ProgressPoint(float(i), 100 * i, loss=2.0 / i, examples_per_sec=700.0 + 5 * i)
                    for i in range(1, 9))
    progress = JobProgress(job=record.job, namespace="ns", state="running", updated_at=8.0, step=800,
                           target_step=1000, loss=0.25, examples_per_sec=740.0, eta_s=20.0, history=history)
    src = JobSources(dag_id="dag_a", run_id=run_id, run_state="running", prefix="train.", record=record,
                     progress=progress)
    asked: list[str] = []

    def serve(route):
        url = route.request.url[len(ORIGIN):]
        path, _, query = url.partition("?")
        if path == "/tfk8s/jobs":
            route.fulfill(body=(STATIC / "jobs.html").read_text(), content_type="text/html")
        elif path.startswith("/tfk8s/static/"):
            name = path.rsplit("/", 1)[-1]
            route.fulfill(body=(STATIC / name).read_text(),
                          content_type="text/javascript" if name.endswith(".js") else "text/css")
        elif path.startswith("/tfk8s/api/runs/"):
            asked.append(url)
            rows = [job_row(src, Links(ui="/", app="/tfk8s"))]
            if "task_id=" in query:
                rows = mark_task(rows, "train.replica", 2)
            route.fulfill(body=json.dumps({"user": "u", "jobs": rows}), content_type="application/json")
        else:
            route.fulfill(status=404, body="")

    context = browser()
    context.route(f"{ORIGIN}/**", serve)
    page = context.new_page()
    # As the UI fills in the tab's href: each id encodeURIComponent'ed, the map index as it is.
    page.goto(f"{ORIGIN}/tfk8s/jobs?dag_id=dag_a&run_id=manual__2026-01-01T00%3A00%3A00%2B00%3A00"
              f"&task_id=train.replica&map_index=2")
    section = page.locator("section.job.marked")
    section.wait_for()
    assert asked[0] == ("/tfk8s/api/runs/dag_a/manual__2026-01-01T00%3A00%3A00%2B00%3A00/jobs"
                        "?task_id=train.replica&map_index=2")
    assert page.locator("tr.marked").get_attribute("data-replica") == "worker-1"
    assert page.locator("tr[aria-current=true]").count() == 1
    assert "task train.replica [2]" in page.locator("#scope").inner_text()

    bar = section.locator("[data-field=bar]")
    assert bar.get_attribute("aria-valuenow") == "80"
    assert bar.locator("div").evaluate("e => e.style.width") == "80%"
    expected = job_row(src, Links())["progress"]["charts"]
    for name in ("loss", "examples_per_sec"):
        figure = section.locator(f"figure[data-chart={name}]")
        assert figure.locator("svg polyline").get_attribute("points") == expected[name]["points"]
        assert figure.get_attribute("data-points") == "8"
        box = figure.locator("svg").bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 20  # drawn, not collapsed
    assert "loss 0.25 (0.25–2)" in section.locator("figure[data-chart=loss]").inner_text()
    screenshot(section, "tf-jobs-page-task-tab")

    # In a frame narrower and shorter than the job: the marked row is scrolled to, vertically only.
    page.set_viewport_size({"width": 600, "height": 260})
    page.reload()
    page.locator("tr.marked").wait_for()
    box = page.locator("tr.marked").bounding_box()
    assert page.evaluate("window.scrollX") == 0 and page.evaluate("window.scrollY") > 0
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 260, box

    # A task instance that is not mapped: the UI leaves "{MAP_INDEX}" as it is; the page sends no map index.
    asked.clear()
    page.goto(f"{ORIGIN}/tfk8s/jobs?dag_id=dag_a&run_id=r&task_id=train.wait&map_index={{MAP_INDEX}}")
    page.locator("section.job").wait_for()
    assert asked[0] == "/tfk8s/api/runs/dag_a/r/jobs?task_id=train.wait"
