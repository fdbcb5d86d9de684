"""Replica logs archived on the volume: ``<log dir>/<job>/<pod>.log``.

Why a module: the log directory is usually the host path of the job's ``logs`` volume, so
the pods write into it too, and a pod can plant anything at the name the worker is about
to write (a link to a DAG file, a FIFO, a hard link to another file of the volume). Every
write here goes through :mod:`tfk8s_airflow.volume.safe`: the job's directory is walked
without following links, a whole archive replaces its name atomically, and an append goes
only into a regular file of one link. A log that could not be read never replaces an
archive that holds one: the placeholder is written only where nothing is archived yet.
"""

from __future__ import annotations

import os
from typing import Literal

from tfk8s_airflow.exceptions import PathSafetyError
from tfk8s_airflow.volume import safe

__all__ = ["log_path", "archive_tail", "append_log", "Outcome"]

#: What :func:`archive_tail` did: replaced the archive, wrote a placeholder where none was,
#: or kept the archive that was there (the log was unavailable).
Outcome = Literal["written", "placeholder", "kept"]


def _component(value: str, what: str) -> str:
    text = str(value)
    if not text or "/" in text or "\0" in text or text.startswith(".") or len(text) > 253:
        raise PathSafetyError(f"{what} {text!r} cannot name a log file (one path component, not hidden)")
    return text


def log_path(job: str, pod: str) -> str:
    """``<job>/<pod>.log``, relative to the log directory; both must be plain names."""
    return f"{_component(job, 'job')}/{_component(pod, 'pod')}.log"


def archive_tail(log_dir: str | os.PathLike[str], job: str, pod: str, text: str, *,
                 available: bool = True) -> Outcome:
    """Archive a replica's log tail as ``<log_dir>/<job>/<pod>.log``.

    ``available``: the log was read (and is not empty). Then the archive is replaced atomically
    with ``text``. Otherwise ``text`` (a placeholder saying why, or nothing) is written only if
    no archive exists, so a retried teardown, after the pods' logs are gone, keeps what the
    first try archived.
    Raises :class:`PathSafetyError` when something other than a directory or a file is in the
    way (a link, a FIFO); the caller logs it and goes on.
    """
    rel = log_path(job, pod)
    data = text.encode("utf-8", "replace")
    with safe.SafeDir.open(log_dir, create=True) as d:  # the configured directory: made on first use
        if available:
            d.write_atomic(rel, data, make_parents=True)
            return "written"
        return "placeholder" if d.create_exclusive(rel, data, make_parents=True) else "kept"


def append_log(log_dir: str | os.PathLike[str], job: str, pod: str, data: bytes) -> int:
    """Append ``data`` to ``<log_dir>/<job>/<pod>.log`` (created when missing); returns its size.

    The file must be a regular file of one link; see :meth:`tfk8s_airflow.volume.safe.SafeDir.append`.
    """
    rel = log_path(job, pod)
    with safe.SafeDir.open(log_dir, create=True) as d:
        return d.append(rel, data, make_parents=True)
