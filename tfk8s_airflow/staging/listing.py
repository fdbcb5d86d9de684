"""What both data backends share: a listed file, glob splitting, Hadoop's hidden-file rule.

Why shared: the HDFS and GlusterFS stagers must agree on which files a partition holds
(``/data/clicks/dt=2026-01-0*`` and ``pattern="part-*"`` mean the same on both), otherwise
a partition copied to the cache and the same partition listed on the volume would shard
differently. No Airflow and no I/O here.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FileEntry", "has_magic", "split_glob", "is_hidden", "name_matches", "relative_to"]

_MAGIC = frozenset("*?[")


@dataclass(frozen=True)
class FileEntry:
    """One input file. ``path`` is absolute in its filesystem; ``relpath`` is relative to
    the input's root (the part of the input path before any glob), which is also its path
    under a cache directory. ``checksum`` is a WebHDFS-style dict (``algorithm``, ``bytes``,
    ``length``) or ``None`` when not computed."""

    path: str
    relpath: str
    size: int
    mtime: float | None = None
    block_size: int | None = None
    checksum: dict[str, Any] | None = field(default=None, compare=False)


def has_magic(segment: str) -> bool:
    """Whether a path segment holds glob characters (``*``, ``?``, ``[``)."""
    return any(ch in _MAGIC for ch in segment)


def split_glob(path: str) -> tuple[str, list[str]]:
    """``/data/clicks/dt=2026-*/part-*`` -> (``/data/clicks``, [``dt=2026-*``, ``part-*``]):
    the literal root and the glob segments below it (each matched against one level)."""
    norm = posixpath.normpath(path) if path else path
    parts = [p for p in norm.split("/") if p]
    for i, part in enumerate(parts):
        if has_magic(part):
            return "/" + "/".join(parts[:i]), parts[i:]
    return "/" + "/".join(parts), []


def is_hidden(name: str) -> bool:
    """Hadoop's rule (FileInputFormat): names starting with ``_`` or ``.`` are not data
    (``_SUCCESS``, ``_temporary``, ``.crc`` files, our manifest and partial files)."""
    return name.startswith(("_", "."))


def name_matches(name: str, pattern: str | None) -> bool:
    """File-name filter (``fnmatch``, case-sensitive); ``None`` or ``""`` keeps every file."""
    return not pattern or fnmatch.fnmatchcase(name, pattern)


def relative_to(path: str, root: str) -> str:
    """``path`` relative to ``root`` (both absolute, posix)."""
    rel = posixpath.relpath(path, root)
    if rel == "." or rel.startswith("../") or rel == "..":
        return posixpath.basename(path)
    return rel
