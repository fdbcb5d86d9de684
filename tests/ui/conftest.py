"""The UI tests' fixtures: an Airflow stack whose auth manager restricts DAGs, and a real browser.

**Why a stack of their own.** The SimpleAuthManager's roles (viewer, user, op, admin) all
read every DAG; the one DAG-level restriction it makes is by team: in multi-team mode a DAG
belongs to its bundle's team, and ``is_authorized_dag`` refuses a user who is not in that team
(admins excepted). So this stack runs with ``[core] multi_team``, both DAG bundles owned by the
team ``training`` (made by ``airflow teams sync`` before the services start, as is the team
``research``, which the auth manager requires to exist since a user belongs to it), the triggerer
serving that team's triggers (``--team-name training``), and three users:

* ``admin`` (admin): triggers the job in the browser;
* ``reader`` (viewer, team ``training``): may read the DAGs;
* ``outsider`` (viewer, team ``research``): may read no DAG of this stack.

The shared ``airflow_stack`` stays single-team: nothing else changes for the other tests; this
stack lives for the module only, so the whole suite does not keep two stacks up to its end.

**The browser** is Debian's ``/usr/bin/chromium`` driven by the Playwright driver, both
installed by ``scripts/browser`` (apt; a pinned PyPI wheel in ``~/.cache/tfk8s-airflow``),
headless, each test with a fresh profile. Screenshots go to ``.artifacts/ui/`` (git-ignored).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.airflow_services import REPO_DIR, running_stack

TEAM, OTHER_TEAM = "training", "research"
USERS = {"admin": "admin", "reader": f"viewer:{TEAM}", "outsider": f"viewer:{OTHER_TEAM}"}
ARTIFACTS = REPO_DIR / ".artifacts" / "ui"
DOCS_IMAGES = REPO_DIR / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


#: Seconds each worker of the UI stack's jobs sleeps after a step: two workers make some 25 global steps
#: a second, whatever else the machine runs (at full speed, about 100 a second, using a core).
STEP_DELAY = 0.05
#: Local steps between a worker's progress lines: a job of the view's tests logs more lines than the
#: 100 of teardown's tail (the test of the archived log tells the whole log from a tail).
LOG_EVERY = 10


def team_env() -> dict[str, str]:
    """The multi-team configuration: every bundle of the stack owned by ``TEAM``."""
    bundles = [{"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(REPO_DIR / "dags")}, "team_name": TEAM},
               {"name": "test-dags", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(REPO_DIR / "tests" / "dags")}, "team_name": TEAM}]
    return {"AIRFLOW__CORE__MULTI_TEAM": "True",
            # Every job's reference trainer sleeps STEP_DELAY after each step and logs every LOG_EVERY
            # (docs/runtime.md): the view's jobs last long enough to be followed, and log more lines than
            # teardown's tail, while the trainers leave the node's CPU to the rest.
            "TFK8S_POD_ENV": json.dumps({"TRAINER_STEP_DELAY": str(STEP_DELAY), "TRAINER_LOG_EVERY": str(LOG_EVERY)}),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles)}


@pytest.fixture(scope="module")
def ui_stack(request: pytest.FixtureRequest, realnode, hdfs_server, gluster_volume):
    """The four services with the DAGs owned by team ``training`` (see the module docstring)."""
    with running_stack(request, gluster_volume, extra_env=team_env(),
                       after_migrate=[["teams", "sync"], ["teams", "create", OTHER_TEAM]],
                       commands={"triggerer": ["triggerer", "--team-name", TEAM]}) as stack:
        yield stack


def password(stack, user: str) -> str:
    """The SimpleAuthManager's password of ``user`` (it writes new users' passwords at start)."""
    return json.loads((stack.home / "passwords.json").read_text())[user]


def token(stack, user: str) -> str:
    resp = stack.api.post(stack.url("auth/token"), json={"username": user, "password": password(stack, user)},
                          timeout=10)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["access_token"]


@pytest.fixture
def playwright_driver():
    """The Playwright driver (sync API), installed by scripts/browser if missing.

    One per test, never per session: while a sync Playwright is open it marks its event loop as the main
    thread's running loop between calls, so any later ``asyncio.run()`` in the same process (a trigger under
    ``dag.test()``, a unit test of a watch) would fail with "cannot be called from a running event loop".
    """
    res = subprocess.run([str(REPO_DIR / "scripts" / "browser"), sys.executable], capture_output=True, text=True,
                         timeout=900, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        pytest.fail(f"scripts/browser failed (exit {res.returncode}):\n{res.stderr[-3000:]}", pytrace=False)
    path = res.stdout.strip().splitlines()[-1]
    if path not in sys.path:
        sys.path.insert(0, path)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture
def browser(playwright_driver):
    """A fresh headless chromium profile; call it for each user (each its own profile and session)."""
    contexts = []

    def open_browser():
        context = playwright_driver.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="tfk8s-chromium-"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 900})
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context

    yield open_browser
    for context in contexts:
        context.close()


def screenshot(target, name: str, docs: bool = False) -> Path:
    """A PNG of a page or of one element (a locator) in ``.artifacts/ui/``; with ``docs`` and
    ``TFK8S_DOCS_IMAGES=1`` in the environment, also in ``docs/images/`` (what docs/observability.md shows)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    target.screenshot(path=str(path))
    if docs and os.environ.get("TFK8S_DOCS_IMAGES") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / path.name)
    return path


@pytest.fixture
def k8s_namespace(k8s_namespace, realnode):
    """The test's namespace, whose pods may pull the training image (the registry's pull secret)."""
    realnode.grant_pull(k8s_namespace)
    return k8s_namespace
