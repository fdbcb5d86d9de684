"""One container of a pod on the node agent: its process, its runs and the status the API gets.

Why apart from the pod: a container's own state (restart count, back-off, the current run's
log and termination file, the last exit) is what the pod's lifecycle drives and what its
status reports; keeping it here leaves the pod worker with the decisions only.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

BACKOFF_START_S, BACKOFF_MAX_S, BACKOFF_RESET_S = 1.0, 10.0, 120.0
# Termination messages, as the kubelet bounds them: the last 4096 bytes of the file; with
# FallbackToLogsOnError and an empty file, the last 80 lines (at most 2048 bytes) of the log.
TERMINATION_MESSAGE_MAX = 4096
FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES = 80, 2048


class Container:
    """One container of a pod: its process, restart count and the status the API gets."""

    def __init__(self, spec: dict[str, Any], init: bool, logs_dir: Path, restarts: int = 0):
        self.spec = spec
        self.name = spec["name"]
        self.init = init
        self.logs_dir = logs_dir / self.name
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.restart_count = restarts
        self.runs = 0  # processes started by this agent
        self.state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict[str, Any] = {}
        self.started_at: float | None = None
        self.exit_code: int | None = None  # of the last run
        self.backoff = BACKOFF_START_S
        self.next_start = 0.0
        self.done = False  # terminated and will not run again
        self.termination_file: Path | None = None  # of the current run (TFK8S_TERMINATION_LOG)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_path(self, previous: bool = False) -> Path:
        n = self.runs - 1 - (1 if previous else 0)
        return self.logs_dir / f"{max(n, 0)}.log"

    def status(self, ready: bool) -> dict[str, Any]:
        out = {"name": self.name, "image": self.spec.get("image", ""), "imageID": "",
               "ready": bool(ready and self.running), "restartCount": self.restart_count,
               "started": self.running, "state": self.state}
        if self.runs:
            out["containerID"] = f"tfk8s://{self.logs_dir.parent.name}-{self.name}-{self.runs - 1}"
        if self.last_state:
            out["lastState"] = self.last_state
        return out

    def termination_message(self, code: int) -> str | None:
        """What the kubelet puts into state.terminated.message: the run's termination file
        (its last 4096 bytes), else with FallbackToLogsOnError and a failed run the log's tail."""
        data = b""
        if self.termination_file is not None:
            try:
                with open(self.termination_file, "rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - TERMINATION_MESSAGE_MAX))
                    data = fh.read()
            except OSError:
                pass
        if not data and code != 0 and self.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            try:
                lines = self.log_path().read_bytes().splitlines(keepends=True)
                data = b"".join(lines[-FALLBACK_LOG_LINES:])[-FALLBACK_LOG_BYTES:]
            except OSError:
                pass
        return data.decode("utf-8", "replace") if data else None
