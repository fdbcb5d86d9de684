"""The subprocess evaluation's child cannot read the Airflow worker's environment through /proc.

A real child process (this machine's Python, as the evaluator would be started) looks for the worker's
connection password in ``/proc/<ppid>/environ`` and in every ``/proc/<pid>/environ`` it can see. Run
plainly it finds it (the finding: the worker's ``AIRFLOW_CONN_*``); run by
:func:`~tfk8s_airflow.isolation.run_isolated` it sees no process but its own.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys

from tfk8s_airflow.isolation import namespaces_available

LOOK = r"""
import glob, os, sys
secret = sys.argv[2].encode()
found = []
for path in ["/proc/%d/environ" % os.getppid()] + glob.glob("/proc/[0-9]*/environ"):
    try:
        with open(path, "rb") as fh:
            if secret in fh.read():
                found.append(path)
    except OSError:
        pass
with open(sys.argv[1], "w") as out:
    out.write(",".join(found) or "none")
"""


#: The Airflow worker: a process started with the connection password in its environment (as Airflow's
#: task runner is), starting the child plainly or through run_isolated; it prints what the child found.
WORKER = r"""
import subprocess, sys, tempfile, os
from tfk8s_airflow.isolation import run_isolated
look, secret, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "plain":
    out = os.path.join(tempfile.mkdtemp(), "found")
    subprocess.run([sys.executable, "-c", look, out, secret], check=True, env={"PATH": "/usr/bin:/bin"})
    print(open(out).read())
else:
    run = run_isolated(lambda out: [sys.executable, "-c", look, out, secret], timeout=60)
    print(run.returncode, (run.result or b"").decode(), run.output)
"""


def _worker(mode: str, secret: str) -> str:
    env = {**os.environ, "AIRFLOW_CONN_WAREHOUSE": f"postgresql://etl:{secret}@warehouse:5432/dwh"}
    res = subprocess.run([sys.executable, "-c", WORKER, LOOK, secret, mode], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_the_child_cannot_read_the_workers_environment():
    assert namespaces_available(), "unprivileged user and PID namespaces are available on the devstack machine"
    secret = f"pw-{secrets.token_hex(12)}"
    assert _worker("plain", secret) != "none"  # a plain child with a scrubbed environment reads its parent's
    assert _worker("isolated", secret) == "0 none"
