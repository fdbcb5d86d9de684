"""Small JSON files the trainer leaves in the model directory.

Why: the orchestrator and the tests must see *what happened* without loading TensorFlow:
the final step and loss (``metrics.json``), and for every replica the step it started
from on each (re)start (``replicas/<role>-<i>.json``), which is the evidence that a
restarted replica resumed from a checkpoint instead of starting over. The chief also
writes ``train_state.json`` (its run history plus ``finished``), which an evaluator
replica polls. All writes are atomic (temp file + rename): a pod killed mid-write must
never leave a half-written file that the next reader chokes on.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from tfk8s_airflow import untrusted

TRAIN_STATE = "train_state.json"
METRICS = "metrics.json"
REPLICAS_DIR = "replicas"
#: Bytes of a state or replica record read back (each is a few KiB).
STATE_READ_MAX = 16 << 20


def _finite(value: Any) -> Any:
    """NaN/inf (e.g. the loss of a replica that ran no step) become null: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_json_atomic(path: str, doc: Any) -> None:
    doc = _finite(doc)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True, allow_nan=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_json(path: str, default: Any = None) -> Any:
    """The JSON document at ``path`` (on the shared volume, which other jobs' pods may write), read through
    the bounded reader: ``default`` when it is absent, larger than :data:`STATE_READ_MAX`, nested too deep
    or not JSON."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(STATE_READ_MAX + 1)
    except FileNotFoundError:
        return default
    try:
        return untrusted.loads(data, max_bytes=STATE_READ_MAX, what=path)
    except ValueError:
        return default


class RunRecorder:
    """Appends one entry per (re)start of a replica and completes it at the end."""

    def __init__(self, model_dir: str, task_key: str, is_chief: bool, mode: str):
        self.path = os.path.join(model_dir, REPLICAS_DIR, f"{task_key}.json")
        self.chief_path = os.path.join(model_dir, TRAIN_STATE) if is_chief else None
        self.model_dir = model_dir
        self.task_key = task_key
        self.mode = mode
        self.doc = read_json(self.path, {}) or {}
        self.doc.setdefault("task", task_key)
        self.doc.setdefault("mode", mode)
        self.doc.setdefault("runs", [])

    @property
    def run(self) -> dict:
        return self.doc["runs"][-1]

    def _flush(self) -> None:
        write_json_atomic(self.path, self.doc)
        if self.chief_path:
            chief = dict(self.doc, start_step=self.run.get("start_step"),
                         final_step=self.run.get("final_step"), loss=self.run.get("loss"),
                         finished=self.run.get("status") == "finished")
            write_json_atomic(self.chief_path, chief)

    def started(self, start_step: int, **extra: Any) -> None:
        self.doc["runs"].append({"start_step": int(start_step), "started_at": time.time(),
                                 "status": "running", "pid": os.getpid(), **extra})
        self._flush()

    def progress(self, step: int, loss: float) -> None:
        self.run.update(last_step=int(step), loss=float(loss), updated_at=time.time())
        self._flush()

    def finished(self, final_step: int, loss: float, **extra: Any) -> None:
        self.run.update(final_step=int(final_step), loss=float(loss), status="finished",
                        finished_at=time.time(), **extra)
        self._flush()


def write_metrics(model_dir: str, **metrics: Any) -> dict:
    doc = dict(metrics, written_at=time.time())
    write_json_atomic(os.path.join(model_dir, METRICS), doc)
    return doc
