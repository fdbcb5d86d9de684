"""Model promotion: copy a trained model to ``serving/`` only if it beats the current one.

Why a module of its own: promotion must be idempotent per logical date (a backfill
or a cleared run promotes the same version again without harm) and safe when two
runs finish at once (a backfill runs dates in parallel). Versions are copied
under a temporary name and renamed, ``current.json`` is replaced atomically, and
the compare-and-swap happens under a file lock on the serving directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tfk8s_airflow.exceptions import DataError, ModelMissingError

CURRENT = "current.json"
VERSIONS = "versions"


_THREAD_LOCK = threading.Lock()


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Across processes (flock on the serving volume) and threads of this one."""
    root.mkdir(parents=True, exist_ok=True)
    with _THREAD_LOCK, open(root / ".promote.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_json_atomic(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def current(serving_root: str | Path) -> dict[str, Any] | None:
    path = Path(serving_root) / CURRENT
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def promote(model_dir: str | Path, serving_root: str | Path, version: str, metrics: dict[str, Any],
            metric: str = "accuracy", higher_is_better: bool = True) -> dict[str, Any]:
    """Promote when ``metrics[metric]`` beats the current model; returns what happened."""
    model_dir, root = Path(model_dir), Path(serving_root)
    if not model_dir.is_dir() or not any(model_dir.iterdir()):
        raise ModelMissingError(f"nothing to promote: {model_dir} is missing or empty")
    if metric not in metrics:
        raise DataError(f"metrics have no {metric!r}: {sorted(metrics)}")
    value = float(metrics[metric])
    safe_version = "".join(c if c.isalnum() or c in "-_." else "_" for c in version)
    with _locked(root):
        cur = current(root)
        target = root / VERSIONS / safe_version
        if cur and cur.get("version") == safe_version:
            return {"promoted": True, "already": True, "version": safe_version, "value": cur["value"],
                    "path": cur["path"], "reason": "this version is already the current model"}
        if cur is not None:
            better = value > cur["value"] if higher_is_better else value < cur["value"]
            if not better:
                return {"promoted": False, "version": safe_version, "value": value,
                        "current": cur, "reason": f"{metric} {value:.4f} does not beat the current "
                        f"model {cur['version']} ({cur['value']:.4f})"}
        if not target.exists():
            tmp = root / VERSIONS / f".{safe_version}.tmp-{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            shutil.copytree(model_dir, tmp)
            _write_json_atomic(tmp / "promotion.json", {"version": safe_version, "metrics": metrics,
                                                       "source": str(model_dir), "time": time.time()})
            os.replace(tmp, target)
        record = {"version": safe_version, "metric": metric, "value": value, "path": str(target),
                  "metrics": metrics, "promoted_at": time.time(),
                  "previous": cur["version"] if cur else None}
        _write_json_atomic(root / CURRENT, record)
        return {"promoted": True, "version": safe_version, "value": value, "path": str(target),
                "previous": record["previous"],
                "reason": "first model" if cur is None else f"beats {cur['version']} ({cur['value']:.4f})"}
