"""Run a distributed TF job as local processes on 127.0.0.1, one per replica.

Why: the trainer's contract with its pods is TF_CONFIG + env + exit codes, and that can be
exercised for real without Kubernetes: each replica is a subprocess with the TF_CONFIG a
pod would get (127.0.0.1 and a free port instead of the Service's DNS name). PS and TF2
worker processes never exit by themselves, so :meth:`LocalJob.stop` kills every process
it started; tests call it in ``finally``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.ports import free_port

__all__ = ["LocalJob", "free_port", "tf_config", "trainer_command"]

REPO = Path(__file__).resolve().parents[2]


def tf_config(cluster: dict[str, list[str]], role: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index},
                       "environment": "cloud"})


class LocalJob:
    """Replicas of one job; ``command`` is the argv every replica runs (like a pod spec)."""

    def __init__(self, workdir: Path, roles: dict[str, int], command: Sequence[str],
                 env: dict[str, str] | None = None, hidden_roles: Sequence[str] = ("evaluator",)):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.roles = roles
        self.command = list(command)
        self.env = env or {}
        self.cluster = {r: [f"127.0.0.1:{free_port()}" for _ in range(n)]
                        for r, n in roles.items() if n}
        # The evaluator is hidden from the other replicas' cluster (it serves nothing).
        self.visible = {r: h for r, h in self.cluster.items() if r not in hidden_roles}
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts: dict[str, int] = {}

    def keys(self) -> list[str]:
        return [f"{r}-{i}" for r, n in self.roles.items() for i in range(n)]

    def log_path(self, key: str) -> Path:
        return self.workdir / f"{key}.{self.starts.get(key, 1)}.log"

    def start(self, key: str, extra_args: Sequence[str] = ()) -> subprocess.Popen:
        role, index = key.rsplit("-", 1)
        cluster = self.cluster if role in ("evaluator",) else self.visible
        env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONUNBUFFERED="1", TF_CONFIG=tf_config(cluster, role, int(index)),
                   TFK8S_JOB_NAME="local", TFK8S_ROLE=role, TFK8S_INDEX=index)
        env.update(self.env)
        self.starts[key] = self.starts.get(key, 0) + 1
        log = open(self.log_path(key), "w")  # noqa: SIM115 - owned by the process
        proc = subprocess.Popen([*self.command, *extra_args], env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=self.workdir)
        log.close()
        self.procs[key] = proc
        return proc

    def start_all(self) -> None:
        for key in self.keys():
            self.start(key)

    def kill(self, key: str) -> None:
        proc = self.procs[key]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def wait(self, key: str, timeout: float) -> int:
        try:
            return self.procs[key].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{key} did not finish in {timeout}s; log:\n{self.log(key)}") from None

    def log(self, key: str, tail: int = 4000) -> str:
        try:
            return self.log_path(key).read_text(errors="replace")[-tail:]
        except FileNotFoundError:
            return ""

    def logs(self) -> str:
        return "\n".join(f"===== {k}\n{self.log(k, 2500)}" for k in self.procs)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)


def trainer_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tfk8s_airflow.pod.trainer", *args]
