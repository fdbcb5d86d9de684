"""Replica logs archived on the volume: ``<log dir>/<job>/<pod>.log``, written and read back.

Why a module: the log directory is usually the host path of the job's ``logs`` volume, so
the pods write into it too, and a pod can plant anything at the name the worker is about
to write (a link to a DAG file, a FIFO, a hard link to another file of the volume). Every
write here goes through :mod:`tfk8s_airflow.nofollow`: the job's directory is walked
without following links, a whole archive replaces its name atomically, and an append goes
only into a regular file of one link. A log that could not be read never replaces an
archive that holds one: the placeholder is written only where nothing is archived yet.
Reading (the TF jobs view) goes through the same module: a regular file of one link, the
head and the tail of a large one.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from tfk8s_airflow import nofollow
from tfk8s_airflow.exceptions import PathSafetyError

__all__ = ["log_path", "archive_path", "archive_root_of", "archive_tail", "append_log", "start_log",
           "open_log_dir", "streamed_size", "read_archived_log", "ArchivedLog", "Outcome"]

#: Bytes of one archived log a reader returns at most (its head and its tail beyond this).
DEFAULT_READ_LIMIT = 2 * 1024 * 1024

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
    with nofollow.SafeDir.open(log_dir, create=True, follow=False) as d:  # the configured directory: made on first use
        if available:
            d.write_atomic(rel, data, make_parents=True)
            return "written"
        return "placeholder" if d.create_exclusive(rel, data, make_parents=True) else "kept"


def append_log(log_dir: str | os.PathLike[str], job: str, pod: str, data: bytes) -> int:
    """Append ``data`` to ``<log_dir>/<job>/<pod>.log`` (created when missing); returns its size.

    The file must be a regular file of one link; see :meth:`tfk8s_airflow.nofollow.SafeDir.append`.
    """
    rel = log_path(job, pod)
    with nofollow.SafeDir.open(log_dir, create=True, follow=False) as d:
        return d.append(rel, data, make_parents=True)


def open_log_dir(log_dir: str | os.PathLike[str]) -> None:
    """Make the job's log directory when missing (as teardown does) and check it is a directory;
    raises ``OSError`` or :class:`PathSafetyError` when it cannot be."""
    with nofollow.SafeDir.open(log_dir, create=True, follow=False):
        pass


def start_log(log_dir: str | os.PathLike[str], job: str, pod: str, data: bytes = b"") -> None:
    """Begin a streamed log: ``<log_dir>/<job>/<pod>.log`` replaced atomically by ``data``.

    Whatever was at the name before (a pod's planted file, a link, an older run's archive) is
    replaced, never written through; the stream then appends with :func:`append_log`.
    """
    rel = log_path(job, pod)
    with nofollow.SafeDir.open(log_dir, create=True, follow=False) as d:
        d.write_atomic(rel, data, make_parents=True)


def streamed_size(log_dir: str | os.PathLike[str], job: str, pod: str) -> int | None:
    """The size of a replica's log file when it is a non-empty regular file of one link, else None.

    Teardown keeps such a file (the replica trigger streamed the whole log into it) instead of
    replacing it with a tail. A link or anything else in the way is reported as None: teardown
    then writes the tail, which replaces the name without following it.
    """
    rel = log_path(job, pod)
    try:
        with nofollow.SafeDir.open(log_dir, follow=False) as d:
            st = d.lstat(rel)
    except (PathSafetyError, FileNotFoundError, NotADirectoryError):
        return None
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size == 0:
        return None
    return st.st_size


def archive_path(log_dir: str | os.PathLike[str], job: str, pod: str) -> Path:
    """The absolute path of one replica's archive (what teardown reports)."""
    return Path(log_dir) / log_path(job, pod)


def archive_root_of(path: str, job: str, pod: str) -> str | None:
    """The log directory a path of :func:`archive_path` was written under, or None if it is not one."""
    p = Path(path)
    if p.name != f"{pod}.log" or p.parent.name != job or not p.is_absolute():
        return None
    return str(p.parent.parent)


@dataclass(frozen=True)
class ArchivedLog:
    text: str
    size: int  # the file's size in bytes
    truncated: bool  # its middle was left out


def read_archived_log(log_dir: str | os.PathLike[str], job: str, pod: str,
                      limit: int = DEFAULT_READ_LIMIT) -> ArchivedLog:
    """One replica's archive; :class:`FileNotFoundError` when there is none.

    Refuses (:class:`PathSafetyError`) a name that is not one path component, a link or anything
    but a directory at ``<job>``, and anything but a regular file of one link at ``<pod>.log``.
    """
    rel = log_path(job, pod)
    with nofollow.SafeDir.open(log_dir, follow=False) as d, d.open_read(rel) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= limit:
            return ArchivedLog(_read(fh, limit).decode("utf-8", "replace"), size, False)
        half = limit // 2
        head = _read(fh, half)
        fh.seek(size - half)
        tail = _read(fh, half)
    gap = size - len(head) - len(tail)
    data = head + f"\n[... {gap} bytes omitted ...]\n".encode() + tail
    return ArchivedLog(data.decode("utf-8", "replace"), size, True)


def _read(fh: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes (an unbuffered file may return fewer per read)."""
    parts, left = [], n
    while left > 0:
        chunk = fh.read(left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
