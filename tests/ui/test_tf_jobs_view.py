"""The TF jobs view in a real browser, on the real stack (api-server, scheduler, triggerer, DAG processor).

Headless chromium logs in to the Airflow UI, triggers ``tfk8s_train_manual`` through its trigger
form (a real TF1 PS + 2 workers job on the devstack's real node with a TensorBoard, data from the devstack
HDFS), opens the TF jobs view from the UI's navigation, reads the job's replicas while it trains,
follows the TensorBoard link (TensorBoard's own page, in the view's frame, lists the loss scalar),
follows a replica's task log link and its archived log, and sees the run succeed. A second test shows
that a user whose team does not own the DAG sees none of its jobs, neither in the page nor
through the data or archived-log endpoints, while a user of the team does (see conftest.py for
why teams).

Two parts depend on what the job's sensor will push while the job runs, and switch on by
themselves once it does (or fail once their switch below is on and it does not):

* the step count that grows between two reads: XCom ``progress`` (JobProgress) of ``train.wait``;
  until then the test asserts that the view says no progress is reported and shows the
  replicas' phases from a LIST of the job's pods;
* the TensorBoard link: ``JobProgress.tensorboard_url`` (the stack sets ``[tfk8s] tensorboard_url``
  to ``http://{pod_ip}:{port}/``: this machine reaches the real node's pods).

A third test opens a run's **TF job** tab from the run's page (and a replica task's) and waits for
the progress bar and the loss and examples/s charts.

Screenshots land in ``.artifacts/ui/``; with ``TFK8S_DOCS_IMAGES=1`` the view's two also replace
``docs/images/tf-jobs-view-*.png``, and the run's tab ``docs/images/tf-jobs-run-tab.png`` (the README's).
"""
from __future__ import annotations

import ipaddress
import os
import re
import time
from urllib.parse import quote, unquote

import pytest
import requests

from tests.e2e._support import E2E_MARKS, env_root, leftovers, publish, task_states, wait_gone
from tests.fixtures.waiting import wait_until
from tests.ui.conftest import password, screenshot, token
from tfk8s_airflow.volume.logs import archive_path

pytestmark = [*E2E_MARKS, pytest.mark.ui, pytest.mark.timeout(1500)]

DAG_ID = "tfk8s_train_manual"
PARTITION = "2026-03-01"
#: Long enough (about 110 s: the UI stack's trainers make some 28 steps a second, see tests/ui/conftest.py
#: STEP_DELAY) for TensorBoard to start and the browser to follow its link while the job trains (25 s on a
#: quiet machine): teardown deletes the TensorBoard with the job.
STEPS = 3000
#: The sensor's trigger pushes XCom ``progress`` while the job runs: the view must show a growing step.
EXPECT_PROGRESS = True
#: JobProgress carries ``tensorboard_url`` once the job's TensorBoard is ready.
EXPECT_TENSORBOARD = True


def login(context, stack, user: str, path: str):
    """A page of ``context`` signed in as ``user`` through the auth manager's login form, at ``path``."""
    page = context.new_page()
    page.goto(stack.url(path))
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password(stack, user))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(stack.url(path.split("?")[0]))))
    return page


def open_view(page):
    """The TF jobs view through the UI's navigation (Browse > TF jobs); returns its frame."""
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="TF jobs").click()
    page.wait_for_url("**/plugin/tf-jobs**")
    return page.frame_locator("iframe[title='TF jobs']")


def replica_cells(section) -> dict[str, list[str]]:
    """Replica key -> the texts of its row's cells, as the page shows them now."""
    out = {}
    for row in section.locator("tbody tr").all():
        out[row.get_attribute("data-replica")] = [c.inner_text().strip() for c in row.locator("td").all()]
    return out


COLUMNS = ("replica", "pod", "phase", "restarts", "exit_code", "attempt", "node", "task", "log", "archive")


def column(cells: list[str], name: str) -> str:
    return cells[COLUMNS.index(name)]


def state_of(section) -> str:
    return section.locator("[data-field=state]").inner_text().strip()


def state_of_run(stack, run_id: str) -> str:
    return stack.get(f"dags/{DAG_ID}/dagRuns/{run_id}")["state"]


def test_trigger_from_the_form_and_follow_the_job_in_the_tf_jobs_view(ui_stack, browser, k8s_cluster, k8s_namespace):
    stack = ui_stack
    publish(stack.env, PARTITION)
    page = login(browser(), stack, "admin", f"dags/{DAG_ID}")

    # The trigger form: the DAG's Params, filled as a person would.
    page.get_by_role("button", name="Trigger").first.click()
    form = page.get_by_role("dialog")
    values = {"namespace": k8s_namespace, "node_type": "local", "workers": "2", "steps": str(STEPS),
              "data_path": f"/data/clicks/dt={PARTITION}"}
    for name, value in values.items():
        form.locator(f"input[name=element_{name}]").fill(value)
    switch = form.locator("input[name=element_tensorboard]")
    assert not switch.is_checked()  # off by default
    form.locator("label:has(input[name=element_tensorboard])").click()
    assert switch.is_checked()
    screenshot(page, "trigger-form")
    form.get_by_role("button", name="Trigger").click()
    page.wait_for_url(re.compile(rf"/dags/{DAG_ID}/runs/[^/?]+"))
    run_id = unquote(re.search(rf"/dags/{DAG_ID}/runs/([^/?]+)", page.url).group(1))
    run = stack.get(f"dags/{DAG_ID}/dagRuns/{run_id}")
    assert (run["conf"]["namespace"], run["conf"]["workers"], run["conf"]["steps"], run["conf"]["tensorboard"]) == \
        (k8s_namespace, 2, STEPS, True), run["conf"]

    view = open_view(page)
    section = view.locator(f"section.job[data-run-id='{run_id}']")
    section.wait_for(timeout=600_000)  # staging comes first; the row appears once setup made the job
    assert section.get_attribute("data-dag-id") == DAG_ID
    assert k8s_namespace in section.locator("[data-field=meta]").inner_text()
    rows = wait_until(lambda: (r := replica_cells(section)) and len(r) == 3 and r, 60, "the job's three replica rows")
    assert list(rows) == ["ps-0", "worker-0", "worker-1"]
    job = section.get_attribute("data-job")
    assert [column(c, "pod") for c in rows.values()] == [f"{job}-ps-0", f"{job}-worker-0", f"{job}-worker-1"]

    # While it trains: the replicas' phases and nodes, from the progress record or from one LIST of the pods.
    progress_box = section.locator("[data-field=progress]")

    def training():
        cells, said = replica_cells(section), progress_box.inner_text()
        return state_of(section) == "running" and column(cells["ps-0"], "phase") == "Running" and (cells, said)

    cells, said = wait_until(training, 600, "the view to show the job running with ps-0 Running", interval=1)
    assert column(cells["ps-0"], "node") not in ("", "–"), cells
    assert {column(cells[k], "phase") for k in ("worker-0", "worker-1")} <= {"Pending", "Running", "Succeeded"}, cells
    screenshot(page, "tf-jobs-running")
    if not EXPECT_TENSORBOARD:
        screenshot(section, "tf-jobs-view-running", docs=True)

    progress_pushed = EXPECT_PROGRESS or stack.xcom(DAG_ID, run_id, "train.wait", "progress") is not None
    if progress_pushed:
        # Depends on JobProgress (XCom 'progress' of train.wait): a step count that grows between two reads.
        step = section.locator("[data-field=step]")
        first = int(wait_until(lambda: step.count() and step.get_attribute("data-step"), 120, "a step count",
                             interval=1))

        def grown():
            now = int(step.get_attribute("data-step") or 0)
            if now <= first and state_of(section) != "running":
                pytest.fail(f"the job ended at step {now} before the view showed a step past {first}: "
                            f"raise STEPS ({STEPS}) or push progress more often")
            return now > first and now

        second = int(wait_until(grown, 300, f"the step count to grow past {first}", interval=1))
        assert first < second <= STEPS and f"/ {STEPS}" in progress_box.inner_text()
    else:
        # Until the sensor pushes progress: the view says so and names where the phases come from.
        assert "no progress reported yet" in said and "LIST of the job's pods" in said, said

    tensorboard = section.locator("[data-field=tensorboard]")
    if EXPECT_TENSORBOARD:
        # JobProgress.tensorboard_url once the TensorBoard pod is ready: the link, at the pod's address.
        url = wait_until(lambda: tensorboard.get_attribute("href") or (
            state_of(section) != "running" and pytest.fail(f"the job ended ({state_of(section)}) before the view "
                                                           f"linked its TensorBoard: raise STEPS ({STEPS})")),
            300, "the TensorBoard link", interval=1)
        rows_json = page.request.get(stack.url(f"tfk8s/api/runs/{DAG_ID}/{run_id}/jobs")).json()["jobs"]
        # At the address the real node gave the pod: within its pod subnet (devstack/env node).
        host = re.fullmatch(r"http://([0-9.]+):6006/", url)
        assert url == rows_json[0]["tensorboard_url"] and host, url
        assert ipaddress.ip_address(host.group(1)) in ipaddress.ip_network(os.environ["TFK8S_NODE_SUBNET"]), url
        screenshot(section, "tf-jobs-view-running", docs=True)
        # Follow it: TensorBoard's own page opens in a new tab and lists the chief's loss scalar.
        with page.context.expect_page() as opened:
            tensorboard.click()
        board = opened.value
        board.wait_for_load_state()
        assert board.url.startswith(url), board.url

        reloaded = [time.monotonic()]

        def lists_loss():
            if board.get_by_text("loss", exact=True).count():
                return True
            if state_of_run(stack, run_id) != "running":
                pytest.fail(f"the run ended before TensorBoard listed the loss scalar: raise STEPS ({STEPS})")
            has_it = requests.get(f"{url}data/plugin/scalars/tags", timeout=10).json().get("train")
            if has_it and time.monotonic() - reloaded[0] > 15:
                board.reload()  # TensorBoard has the first summary: load its page again, not wait for its refresh
                reloaded[0] = time.monotonic()
            return False

        wait_until(lists_loss, 240, "TensorBoard's page to list the loss scalar", interval=3)
        screenshot(board, "tensorboard")
        board.close()
        assert view.locator(f"section.job[data-run-id='{run_id}']").count() == 1  # the view stayed where it was
    else:
        assert tensorboard.inner_text() == "no TensorBoard"

    (done,) = stack.wait_for_runs(DAG_ID, [run_id], timeout=900)
    assert done["state"] == "success", task_states(stack, DAG_ID, run_id)
    links = section.locator("[data-field=links]")
    wait_until(lambda: state_of(section) == "succeeded" and links.inner_text().endswith("logs archived"), 60,
             "the view to show the job succeeded, its logs archived", interval=1)
    cells = replica_cells(section)
    for key in ("worker-0", "worker-1"):
        assert [column(cells[key], c) for c in ("phase", "exit_code", "task")] == ["Succeeded", "0", "success"], cells
    assert column(cells["ps-0"], "replica") == "ps-0 (untracked)" and column(cells["ps-0"], "task") == "success"
    assert "success policy met" in section.locator("[data-field=reason]").inner_text()
    if EXPECT_TENSORBOARD:
        # Teardown deleted it with the job: no link to it any more; the sensor's extra link names where it was.
        assert tensorboard.inner_text() == "TensorBoard ended with the job"
        extra = stack.get(f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/train.wait/links")
        assert extra["extra_links"] == {"TensorBoard": url}, extra
    screenshot(page, "tf-jobs-succeeded")
    screenshot(section, "tf-jobs-view-succeeded", docs=True)

    # The archived log: the replica's own file, served by the view.
    with page.expect_event("framenavigated", predicate=lambda f: f.url.endswith("/logs/worker-1")) as navigated:
        section.locator("tr[data-replica=worker-1] [data-field=archive]").click()
    archived = navigated.value
    archived.wait_for_load_state()
    text = archived.inner_text("body")
    assert "worker-1 done at global step" in text and "worker-0 done at global step" not in text, text[-2000:]
    # The replica task's own extra link "Replica log" (stored from the triggerer) opens the same
    # file: the replica's whole log, from the container's first line to the program's last.
    extra = stack.get(f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/train.replica/links", params={"map_index": 2})
    log_link = extra["extra_links"]["Replica log"]
    assert log_link == f"/tfk8s/api/runs/{DAG_ID}/{quote(run_id, safe='')}/jobs/{job}/logs/worker-1", log_link
    whole = page.request.get(stack.url(log_link.lstrip("/")))
    assert whole.status == 200, whole.text()
    lines = whole.text().splitlines()
    assert lines[0].endswith(", mode tf1") and "task worker-1 (" in lines[0], lines[:2]
    assert re.search(r"worker-1 done at global step \d+", lines[-1]), lines[-3:]
    assert sum(" global step " in line for line in lines) > 100  # more than teardown's 100-line tail
    # Pods share the volume: a symlink planted in place of an archived file is refused, never followed.
    (ended,) = page.request.get(stack.url(f"tfk8s/api/runs/{DAG_ID}/{run_id}/jobs")).json()["jobs"]
    planted = archive_path(env_root(stack) / "logs", job, f"{job}-worker-0")
    planted.unlink()
    planted.symlink_to("/etc/hostname")
    refused = page.request.get(stack.url(ended["replicas"][1]["archive_url"]))
    assert refused.status == 403 and "symbolic link" in refused.text(), refused.text()

    # The replica task's log: that replica's own lines, to its last (read whole from the API the
    # UI reads it from: the UI renders only the lines in view of a log this long, top or bottom).
    text = stack.task_log(DAG_ID, run_id, "train.replica", map_index=2)
    assert re.search(r"worker-1 done at global step \d+", text) and "worker-0 done at global step" not in text, \
        text[-2000:]
    # ... and in the Airflow UI, reached from the view's link.
    page.goto(stack.url("plugin/tf-jobs"))
    view = page.frame_locator("iframe[title='TF jobs']")
    view.locator(f"section.job[data-run-id='{run_id}'] tr[data-replica=worker-1] [data-field=log]").click()
    page.wait_for_url(re.compile(r"/tasks/train\.replica/mapped/2"))
    page.get_by_text(re.compile(r"global step \d+")).first.wait_for(timeout=60_000)
    body = page.locator("body").inner_text()
    assert "worker-0 done at global step" not in body
    screenshot(page, "replica-task-log")
    assert wait_gone(k8s_cluster.core_v1, k8s_namespace) == [], leftovers(k8s_cluster.core_v1, k8s_namespace)


def test_a_user_who_cannot_read_the_dag_sees_none_of_its_jobs(ui_stack, browser, k8s_cluster, k8s_namespace):
    stack, dag = ui_stack, "tfk8s_t_slow"  # KWOK workers that run 40 s
    resp = stack.api.post(stack.url(f"api/v2/dags/{dag}/dagRuns"),
                          json={"logical_date": None, "conf": {"namespace": k8s_namespace}}, timeout=60)
    assert resp.status_code in (200, 201), resp.text
    run_id = resp.json()["dag_run_id"]
    run_api = f"tfk8s/api/runs/{dag}/{run_id}/jobs"

    def as_user(user: str | None, path: str) -> requests.Response:
        headers = {"Authorization": f"Bearer {token(stack, user)}"} if user else {}
        return requests.get(stack.url(path), headers=headers, timeout=30, allow_redirects=False)

    # There is a job to hide: the admin sees it, and so does a viewer of the DAG's team.
    job = wait_until(lambda: (r := as_user("admin", run_api)).status_code == 200 and r.json()["jobs"][0], 300,
                   "the job of the run in the view's data")
    archived_url = f"{run_api}/{job['job']}/logs/worker-0"
    assert [r["key"] for r in job["replicas"]] == ["ps-0", "worker-0", "worker-1", "worker-2"]
    assert as_user("reader", run_api).status_code == 200
    assert run_id in {j["run_id"] for j in as_user("reader", "tfk8s/api/jobs").json()["jobs"]}

    # The auth manager says the outsider may not read the DAG; the view agrees everywhere.
    assert as_user("outsider", f"api/v2/dags/{dag}").status_code == 403
    listed = as_user("outsider", "tfk8s/api/jobs")
    assert listed.status_code == 200 and listed.json()["user"] == "outsider"
    assert {j["dag_id"] for j in listed.json()["jobs"]} & {dag, DAG_ID} == set(), listed.json()
    for path in (run_api, f"tfk8s/api/jobs?dag_id={dag}", archived_url):
        assert as_user("outsider", path).status_code == 403, path
    # Without a session: 401 for the data, the login page for the page.
    for path in ("tfk8s/api/jobs", run_api, archived_url):
        assert as_user(None, path).status_code == 401, path
    page_resp = as_user(None, "tfk8s/jobs")
    assert page_resp.status_code == 303 and "/auth/login" in page_resp.headers["location"]

    # In the browser: the outsider's view lists no job, a direct URL to the run is refused...
    outsider = login(browser(), stack, "outsider", "plugin/tf-jobs")
    frame = outsider.frame_locator("iframe[title='TF jobs']")
    frame.get_by_text("No TF job in the runs you may read.").wait_for()
    assert frame.locator("section.job").count() == 0
    screenshot(outsider, "tf-jobs-outsider")
    outsider.goto(stack.url(f"tfk8s/jobs?dag_id={dag}&run_id={run_id}"))
    outsider.get_by_text(re.compile(r"^403: you may not read the DAG")).wait_for()
    assert outsider.locator("section.job").count() == 0
    # ...while the reader's shows the job.
    reader = login(browser(), stack, "reader", "plugin/tf-jobs")
    reader.frame_locator("iframe[title='TF jobs']").locator(f"section.job[data-run-id='{run_id}']").wait_for()

    (done,) = stack.wait_for_runs(dag, [run_id], timeout=600, interval=2)
    assert done["state"] == "success", task_states(stack, dag, run_id)
    assert wait_gone(k8s_cluster.core_v1, k8s_namespace) == [], leftovers(k8s_cluster.core_v1, k8s_namespace)


#: Enough steps for a few dozen progress points (the sensor polls every 2 s; the UI stack's trainers make
#: some 25 steps a second) while the browser opens the run's tab, and no more.
TAB_STEPS = 2400


def chart_points(section, name: str) -> int:
    figure = section.locator(f"figure[data-chart={name}]")
    return int(figure.get_attribute("data-points") or 0) if figure.locator("svg polyline").count() else 0


def test_a_runs_tab_opens_the_view_on_its_job_with_the_progress_bar_and_charts(ui_stack, browser, k8s_cluster,
                                                                                k8s_namespace):
    """From a DAG run's page, its **TF job** tab (the plugin's ``dag_run`` external view) shows that run's
    job, with the progress bar and the loss and examples/s charts the server drew from the progress
    history; a replica task's **TF job** tab (``task_instance``) marks that replica's row."""
    stack = ui_stack
    publish(stack.env, PARTITION)
    conf = {"namespace": k8s_namespace, "node_type": "local", "workers": 2, "steps": TAB_STEPS,
            "data_path": f"/data/clicks/dt={PARTITION}"}
    resp = stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns"), json={"logical_date": None, "conf": conf},
                          timeout=60)
    assert resp.status_code in (200, 201), resp.text
    run_id = resp.json()["dag_run_id"]
    run_path = f"dags/{DAG_ID}/runs/{quote(run_id, safe='')}"
    page = login(browser(), stack, "admin", run_path)

    tab = page.locator("a[href$='/plugin/tf-job']")
    tab.click()
    page.wait_for_url(re.compile(rf"/dags/{DAG_ID}/runs/[^/]+/plugin/tf-job$"))
    assert unquote(page.url.split("/runs/")[1].split("/")[0]) == run_id, page.url
    frame_el = page.locator("iframe[title='TF job']")
    src = frame_el.get_attribute("src") or ""
    assert f"dag_id={DAG_ID}" in src and f"run_id={quote(run_id, safe='')}" in src, src
    view = page.frame_locator("iframe[title='TF job']")
    section = view.locator("section.job")
    section.first.wait_for(timeout=600_000)  # staging comes first; the job appears once setup made it
    assert section.count() == 1 and section.get_attribute("data-run-id") == run_id  # this run's job only
    assert f"run {run_id}" in view.locator("#scope").inner_text()

    def charted():
        if state_of(section) not in ("running", "queued", "held"):
            pytest.fail(f"the job ended ({state_of(section)}) before the tab showed both charts: raise TAB_STEPS")
        return (section.locator("[data-field=bar]").count() and chart_points(section, "loss") >= 3
                and chart_points(section, "examples_per_sec") >= 3)

    wait_until(charted, 600, "the progress bar and both charts in the run's tab", interval=1)
    bar = section.locator("[data-field=bar]")
    filled = bar.evaluate("b => [b.getAttribute('aria-valuenow'), b.firstElementChild.style.width]")
    assert 0 < float(filled[0]) <= 100 and filled[1] == f"{filled[0]}%", filled
    progress = section.locator("[data-field=progress]").inner_text()
    assert f"/ {TAB_STEPS}" in progress and "loss –" not in progress and "– examples/s" not in progress, progress
    # The page draws what the API computed: the same points as the row's charts.
    (row,) = page.request.get(stack.url(f"tfk8s/api/runs/{DAG_ID}/{run_id}/jobs")).json()["jobs"]
    for name in ("loss", "examples_per_sec"):
        chart = row["progress"]["charts"][name]
        # No bound by TAB_STEPS: TF1's last global step may pass the target by one.
        assert chart["count"] >= 3 and chart["from_step"] < chart["to_step"], chart
        assert len(section.locator(f"figure[data-chart={name}] polyline").get_attribute("points").split()) >= 3
    screenshot(page, "tf-jobs-run-tab", docs=True)

    # A replica task's tab: worker-0 is map index 1 of train.replica.
    page.goto(stack.url(f"{run_path}/tasks/train.replica/mapped/1"))
    page.locator("a[href$='/plugin/tf-job-task']").click()
    page.wait_for_url(re.compile(r"/tasks/train\.replica/mapped/1/plugin/tf-job-task$"))
    task_view = page.frame_locator("iframe[title='TF job']")
    task_view.locator("section.job.marked tr.marked").wait_for()
    assert task_view.locator("tr.marked").get_attribute("data-replica") == "worker-0"
    assert "task train.replica [1]" in task_view.locator("#scope").inner_text()
    screenshot(page, "tf-job-task-tab")

    (done,) = stack.wait_for_runs(DAG_ID, [run_id], timeout=900)
    assert done["state"] == "success", task_states(stack, DAG_ID, run_id)
    # Once the job ended the charts stay: the sensor's summary keeps the history.
    (ended,) = page.request.get(stack.url(f"tfk8s/api/runs/{DAG_ID}/{run_id}/jobs")).json()["jobs"]
    assert ended["state"] == "succeeded" and ended["progress"]["charts"]["loss"]["count"] >= 3, ended["progress"]
    assert wait_gone(k8s_cluster.core_v1, k8s_namespace) == [], leftovers(k8s_cluster.core_v1, k8s_namespace)
