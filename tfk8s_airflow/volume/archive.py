"""The archive of a job's replica logs: where teardown writes them and how they are read back.

The rule ``<root>/<job>/<pod>.log`` is written here once; teardown writes by it and the TF jobs
view reads by it. Why the reading is careful: the archive lives on the shared volume, where
training pods (untrusted code) may also write. A reader therefore opens the job directory and
the file relative to the root's descriptor with ``O_NOFOLLOW`` (a symlink planted in place of
either is refused, never followed), accepts only a regular file, and reads a bounded number of
bytes: the head and the tail of a larger file, with a line saying what was left out.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tfk8s_airflow.exceptions import DataError

#: Bytes of one archived log a reader returns at most (its head and its tail beyond this).
DEFAULT_READ_LIMIT = 2 * 1024 * 1024


def archive_path(root: str | os.PathLike[str], job: str, pod: str) -> Path:
    """Where teardown archives one replica's log."""
    return Path(root) / job / f"{pod}.log"


def archive_root_of(path: str, job: str, pod: str) -> str | None:
    """The root a path written by :func:`archive_path` was written under, or None if it is not one."""
    p = Path(path)
    if p.name != f"{pod}.log" or p.parent.name != job or not p.is_absolute():
        return None
    return str(p.parent.parent)


def _is_name(part: str) -> bool:
    return bool(part) and part not in (".", "..") and "/" not in part and "\0" not in part


@dataclass(frozen=True)
class ArchivedLog:
    text: str
    size: int  # the file's size in bytes
    truncated: bool  # its middle was left out


def read_archived_log(root: str, job: str, pod: str, limit: int = DEFAULT_READ_LIMIT) -> ArchivedLog:
    """One replica's archived log; raises :class:`FileNotFoundError` when it is not there.

    Refuses (``DataError``) a job or pod name that is not a single path segment, a symlink or
    anything but a directory at ``<root>/<job>``, and anything but a regular file at its
    ``<pod>.log``.
    """
    if not (_is_name(job) and _is_name(pod)):
        raise DataError(f"not an archived log name: {job!r}/{pod!r}")
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            dir_fd = os.open(job, nofollow | os.O_DIRECTORY, dir_fd=root_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise DataError(f"{job} under the archive is not a directory (a symlink is never followed)") from None
            raise
        try:
            try:
                fd = os.open(f"{pod}.log", nofollow | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise DataError(f"{job}/{pod}.log is a symlink: refused") from None
                raise
        finally:
            os.close(dir_fd)
    finally:
        os.close(root_fd)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"{job}/{pod}.log is not a regular file: refused")
        if info.st_size <= limit:
            data, truncated = fh.read(limit), False
        else:
            half = limit // 2
            head = fh.read(half)
            fh.seek(info.st_size - half)
            tail = fh.read(half)
            gap = info.st_size - len(head) - len(tail)
            data = head + f"\n[... {gap} bytes omitted ...]\n".encode() + tail
            truncated = True
    return ArchivedLog(text=data.decode("utf-8", "replace"), size=info.st_size, truncated=truncated)
