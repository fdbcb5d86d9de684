"""Model promotion: copy a trained model to ``serving/`` only if it beats the current one.

Why a module of its own: promotion must be idempotent per logical date (a backfill or a
cleared run promotes the same version again without harm), safe when two runs finish at
once (a backfill runs dates in parallel), and safe against the model directory itself,
which a training pod wrote. So:

* **Nothing of the pod's is followed.** The model is copied with
  :func:`tfk8s_airflow.nofollow.copytree`: regular files and directories only; a
  symbolic link, a hard link or a special file anywhere in the model refuses the promotion.
* **Versions are immutable.** The copy goes to a temporary directory, gets its
  ``promotion.json`` (metrics, source, the content's digest) and is renamed into
  ``versions/<version>``; nothing is written into a version directory after that. A
  version promoted again with the *same* content (a retried task) is a no-op; with other
  content (the date retrained) it gets a directory of its own,
  ``versions/<version>+<digest>``, so a stale copy is never served under new metrics.
* **``current.json`` is replaced atomically**, under a file lock on the serving directory,
  so two runs finishing together cannot both win. It names the directory holding the model.
* **Only finite metrics.** A NaN or infinite value is refused (it would beat nothing and be
  beaten by nothing); a current model whose value is not finite (written before this rule)
  is beaten by any finite value.
* **No leftovers.** Temporary directories left by a killed promoter are removed under the lock.
"""

from __future__ import annotations

import math
import os
import secrets
import threading
import time
from typing import Any

from tfk8s_airflow import nofollow
from tfk8s_airflow.exceptions import DataError, ModelMissingError

CURRENT = "current.json"
VERSIONS = "versions"
RECORD = "promotion.json"
LOCK = ".promote.lock"
#: Temporary copies: ``versions/.promote-<version>-<hex>`` (and ``.<version>.tmp-<pid>`` of earlier releases).
TMP_PREFIX = ".promote-"
_DIGEST_CHARS = 12
_RECORD_LIMIT = 1 << 20

_THREAD_LOCK = threading.Lock()


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise DataError(f"{what} is {number}, not a finite number: not promoted")
    return number


def _plain(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics as strict JSON data (non-finite numbers become null)."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        elif not isinstance(value, (str, int, float, bool, type(None))):
            raise DataError(f"metric {key!r} is a {type(value).__name__}, not a number or a string")
        out[str(key)] = value
    return out


def version_name(version: str) -> str:
    """The directory name of a version: ``[A-Za-z0-9._-]`` only, never hidden, never ``..``."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in str(version))
    if not name or name.startswith("."):
        name = "_" + name
    return name[:200]


def _read_current(serving: nofollow.SafeDir) -> dict[str, Any] | None:
    if serving.lstat(CURRENT) is None:
        return None
    doc = serving.read_json(CURRENT, _RECORD_LIMIT, strict=False)
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), str) \
            or isinstance(doc.get("value"), bool) or not isinstance(doc.get("value"), (int, float)):
        raise DataError(f"{serving.where(CURRENT)} is not a promotion record (fix: restore it, or remove it to "
                        "promote the next model as the first)")
    return doc


def current(serving_root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The current model's record (``serving/current.json``), or ``None`` before the first promotion."""
    try:
        with nofollow.SafeDir.open(serving_root) as serving:
            return _read_current(serving)
    except FileNotFoundError:
        return None


def _beats(value: float, cur: dict[str, Any], higher_is_better: bool) -> bool:
    old = float(cur["value"])
    if not math.isfinite(old):
        return True
    return value > old if higher_is_better else value < old


def _sweep(versions: nofollow.SafeDir) -> int:
    """Remove temporary copies of earlier promoters (the caller holds the lock: none is running)."""
    removed = 0
    for name, _st in versions.entries():
        if name.startswith(TMP_PREFIX) or (name.startswith(".") and ".tmp-" in name):
            versions.rmtree(name)
            removed += 1
    return removed


def _digest_of(versions: nofollow.SafeDir, name: str) -> str | None:
    """The content digest recorded in ``versions/<name>/promotion.json`` (None: absent or unknown)."""
    if versions.lstat(name) is None:
        return None
    try:
        doc = versions.read_json(f"{name}/{RECORD}", _RECORD_LIMIT)
    except (FileNotFoundError, DataError):
        return ""
    return str(doc.get("digest") or "") if isinstance(doc, dict) else ""


def _directory(versions: nofollow.SafeDir, version: str, digest: str) -> tuple[str, bool]:
    """Where a model of ``digest`` lives: ``(name, already there)``. ``versions/<version>`` when it
    is free or holds the same content, else ``versions/<version>+<digest>``."""
    for name in (version, f"{version}+{digest[:_DIGEST_CHARS]}"):
        found = _digest_of(versions, name)
        if found is None:
            return name, False
        if found == digest:
            return name, True
    raise DataError(f"{versions.where(version)}+{digest[:_DIGEST_CHARS]} holds other content than its name says "
                    "(fix: remove that directory)")


def promote(model_dir: str | os.PathLike[str], serving_root: str | os.PathLike[str], version: str,
            metrics: dict[str, Any], metric: str = "accuracy", higher_is_better: bool = True) -> dict[str, Any]:
    """Promote when ``metrics[metric]`` beats the current model; returns what happened."""
    if metric not in metrics:
        raise DataError(f"metrics have no {metric!r}: {sorted(metrics)}")
    value = _finite(metrics[metric], f"metric {metric!r}")
    clean = _plain(metrics)
    name = version_name(version)
    try:
        src = nofollow.SafeDir.open(model_dir)
    except FileNotFoundError:
        raise ModelMissingError(f"nothing to promote: {model_dir} is missing") from None
    with src, _THREAD_LOCK, nofollow.SafeDir.open(serving_root, create=True) as serving, serving.lock(LOCK):
        if src.is_empty():
            raise ModelMissingError(f"nothing to promote: {model_dir} is empty")
        with serving.subdir(VERSIONS, create=True) as versions:
            _sweep(versions)
            cur = _read_current(serving)
            tmp = f"{TMP_PREFIX}{name[:64]}-{secrets.token_hex(4)}"
            try:
                copied = nofollow.copytree(src, versions, tmp)
                return _decide(serving, versions, tmp, copied, cur, name, value, clean, metric,
                               higher_is_better, os.fspath(model_dir))
            finally:
                versions.rmtree(tmp)


def _decide(serving: nofollow.SafeDir, versions: nofollow.SafeDir, tmp: str, copied: nofollow.CopyStats,
            cur: dict[str, Any] | None, name: str, value: float, metrics: dict[str, Any], metric: str,
            higher_is_better: bool, source: str) -> dict[str, Any]:
    digest = copied.digest
    if cur and cur.get("version") == name and cur.get("digest") == digest:
        return {"promoted": True, "already": True, "version": name, "value": cur["value"], "path": cur["path"],
                "previous": cur.get("previous"), "reason": "this version is already the current model"}
    if cur is not None and not _beats(value, cur, higher_is_better):
        return {"promoted": False, "version": name, "value": value, "current": cur,
                "reason": f"{metric} {value:.4f} does not beat the current model {cur['version']} "
                          f"({float(cur['value']):.4f})"}
    directory, present = _directory(versions, name, digest)
    if not present:
        versions.write_json_atomic(f"{tmp}/{RECORD}", {"version": name, "metrics": metrics, "source": source,
                                                       "time": time.time(), "digest": digest,
                                                       "files": copied.files, "bytes": copied.bytes})
        versions.rename_noreplace(tmp, directory)
    path = f"{versions.path}/{directory}"
    record = {"version": name, "metric": metric, "value": value, "path": path, "metrics": metrics,
              "promoted_at": time.time(), "previous": cur["version"] if cur else None, "digest": digest}
    serving.write_json_atomic(CURRENT, record)
    if cur is None:
        reason = "first model"
    elif not math.isfinite(float(cur["value"])):
        reason = f"the current model {cur['version']} has no finite {metric}"
    else:
        reason = f"beats {cur['version']} ({float(cur['value']):.4f})"
    return {"promoted": True, "version": name, "value": value, "path": path, "previous": record["previous"],
            "reason": reason}
