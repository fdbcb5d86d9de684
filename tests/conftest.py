"""Shared pytest fixtures: real Airflow, and devstack servers (Kubernetes, HDFS, GlusterFS).

In CI (``CI`` set) a skipped test is a failure: a test that cannot reach its
server or its dependency must be seen, not hidden in a green run.
"""
import os

import pytest

from tests.fixtures.airflow import *  # noqa: F401,F403  (sets AIRFLOW_HOME before airflow is imported)
from tests.fixtures.airflow_services import *  # noqa: F401,F403
from tests.fixtures.data import *  # noqa: F401,F403
from tests.fixtures.k8s import *  # noqa: F401,F403
from tests.fixtures.nodeagent import *  # noqa: F401,F403


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which counts as a failure: {reason}"
