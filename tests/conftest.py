"""Shared pytest fixtures: real Airflow, and devstack servers (Kubernetes, HDFS, GlusterFS).

In CI (``CI`` set) a skipped test is a failure: a test that cannot reach its
server or its dependency must be seen, not hidden in a green run.

How ``scripts/test`` runs the suite (docs/development.md, "Tests"): first the tests marked
``serial``, one at a time with nothing beside them, then all others in two processes
(``pytest -n 2 --dist loadfile``). In the second run a test module is one unit of work, so
its module fixtures are made once; the modules of :data:`ONE_AT_A_TIME` are one unit
together, run one after another in one process, and so are those of :data:`ONE_QUEUE`.
"""
import asyncio
import os

import pytest

from tests.fixtures.airflow import *  # noqa: F401,F403  (sets AIRFLOW_HOME before airflow is imported)
from tests.fixtures.airflow_services import *  # noqa: F401,F403
from tests.fixtures.data import *  # noqa: F401,F403
from tests.fixtures.k8s import *  # noqa: F401,F403
from tests.fixtures.realnode import *  # noqa: F401,F403

#: Real TensorFlow training (in pods on the real node, on loopback, in the evaluation) and the
#: Airflow stacks: each takes most of both cores, and their stall detection, straggler timeouts and
#: deadlines assume the headroom of a serial run, so they never run two at a time: under
#: ``--dist loadfile`` these modules are one unit of work (one process, one after another).
ONE_AT_A_TIME = ("tests/e2e/", "tests/ui/", "tests/realpods/", "tests/tf/",
                 "tests/security/test_evaluation_isolation.py")
HEAVY_MARKS = ("tf", "ui")
#: The Kueue tests share the devstack ClusterQueue's quota (4 GPUs): two of them at once starve each
#: other (a gang waits for GPUs the other holds), so they are one unit of work too.
ONE_QUEUE = ("tests/kueue/", "tests/devstack/test_kueue_devstack.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` (one module, one unit of work), with the modules of ONE_AT_A_TIME one unit together,
    and those of ONE_QUEUE another.

    (pytest-xdist's own ``loadgroup`` groups by renaming items, ``item._nodeid``, which pytest 9.2 no longer reads.)
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OneUnitForTheHeavyModules(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(ONE_AT_A_TIME):
                return "tensorflow"
            if nodeid.startswith(ONE_QUEUE):
                return "kueue"
            return super()._split_scope(nodeid)

    return OneUnitForTheHeavyModules(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("serial") and os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.fail("marked serial: it needs the machine to itself, so it runs without -n; under -n select "
                    "-m 'not serial' (scripts/test runs the two apart)", pytrace=False)
    if any(item.get_closest_marker(m) for m in HEAVY_MARKS) and not item.nodeid.startswith(ONE_AT_A_TIME):
        pytest.fail(f"marked {' or '.join(HEAVY_MARKS)} but not in a module of ONE_AT_A_TIME (tests/conftest.py), "
                    "so under -n it could run beside another of its kind: add its module there", pytrace=False)


@pytest.fixture(autouse=True)
def _no_running_event_loop_left_behind(request):
    """A test that leaves an event loop marked running on the main thread fails itself.

    Otherwise every later test in its process that calls ``asyncio.run()`` fails instead, far from the cause
    (a sync Playwright left open did that). The mark is cleared so that the tests after it are judged on their own.
    """
    yield
    loop = asyncio._get_running_loop()
    if loop is not None:
        asyncio._set_running_loop(None)
        pytest.fail(f"{request.node.nodeid} left an event loop marked running on the main thread ({loop!r}): "
                    "close what runs it (a sync Playwright, a loop run in a greenlet) before the test ends",
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which counts as a failure: {reason}"
