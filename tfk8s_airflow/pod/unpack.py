"""An untrusted archive unpacked into a fresh directory, member by member (the code fetcher's).

Why member by member: the archive comes from wherever the job's ``code:`` URI points. Its
members are placed by the rules of tarfile's ``data`` filter, on every interpreter and for zip
too (:class:`_Tree`): no absolute names or ``..``, no link leaving the destination, judged
against the links already placed, no member through a symlink, no device or FIFO, no
setuid/setgid or world-writable bit; the bytes unpacked and the members counted against the
fetch's limits (:mod:`tfk8s_airflow.pod.fetchlimits`). The standard library and the pod
contract only, like the fetcher (:mod:`tfk8s_airflow.pod.codefetch`).
"""

from __future__ import annotations

import os
import posixpath
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import IO

from tfk8s_airflow.pathrules import is_safe_relative
from tfk8s_airflow.pod.fetchlimits import MEMBERS, UNPACKED_BYTES, Deadline, FetchError, Limits

__all__ = ["unpack", "first_symlink"]

_READ = 1 << 20


def _lmode(path: Path) -> int | None:
    """The ``lstat`` mode of ``path`` (None: nothing there)."""
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def first_symlink(root: Path, rel: str) -> tuple[str, int | None]:
    """The first prefix of ``rel`` under ``root`` that is missing or a symlink, else ``rel``; with its mode."""
    prefix, mode = "", None
    for part in rel.split("/"):
        prefix = f"{prefix}/{part}" if prefix else part
        mode = _lmode(root / prefix)
        if mode is None or stat.S_ISLNK(mode):
            break
    return prefix, mode


def _file_mode(mode: int) -> int:
    """tarfile's ``data`` filter: no setuid/setgid/sticky bit, no group/other write, owner rw, x only if owner x."""
    mode = (mode & 0o755) | 0o600
    return mode if mode & stat.S_IXUSR else mode & ~0o111


class _Tree:
    """Archive members placed one at a time under a fresh directory, by the rules of tarfile's
    ``data`` filter, judged when each member is placed (so against the links placed before it).

    Refused: absolute names, ``..`` and backslashes; a member whose path goes through a
    symlink placed before it; a symlink whose target resolves outside the root, then or once
    the archive is unpacked; a hardlink to anything but a regular file placed before it;
    devices and FIFOs. Files keep no setuid/setgid or group/other write bit; directories are
    0755; nothing is chowned. The member count and the bytes written are capped by ``limits``.
    """

    def __init__(self, root: Path, clock: Deadline, limits: Limits) -> None:
        self.root = root.resolve()
        self.clock = clock
        self.limits = limits
        self.links: list[tuple[str, Path]] = []
        self.members = 0
        self.written = 0

    def directory(self, name: str) -> None:
        path = self._target(name)
        if path is not None and not self._free(path, name, for_directory=True):
            os.mkdir(path, 0o755)

    def file(self, name: str, mode: int, source: IO[bytes]) -> None:
        path = self._named_target(name)
        self._free(path, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(_READ):
                self.written += len(chunk)
                if self.written > self.limits.unpacked_bytes:
                    raise UNPACKED_BYTES.exceeded("the unpacked archive", self.limits.unpacked_bytes)
                out.write(chunk)
            os.fchmod(out.fileno(), _file_mode(mode))

    def symlink(self, name: str, target: str) -> None:
        path = self._named_target(name)
        if not target or target.startswith("/") or not self._inside(path.parent / target):
            raise FetchError(f"archive link {name!r} -> {target!r} leaves the destination: refused")
        self._free(path, name)
        os.symlink(target, path)
        self.links.append((name, path))

    def hardlink(self, name: str, target: str) -> None:
        path = self._named_target(name)
        if not is_safe_relative(target):
            raise FetchError(f"unsafe archive member {name!r}: a hardlink to {target!r}")
        source = posixpath.normpath(target)
        where, mode = first_symlink(self.root, source)
        if mode is not None and stat.S_ISLNK(mode) and where != source:
            raise FetchError(f"archive member {name!r} goes through the symlink {where!r} extracted before it: "
                             "refused")
        if mode is None or not stat.S_ISREG(mode) or self.root / source == path:
            raise FetchError(f"archive hardlink {name!r} -> {target!r}: not a regular file extracted before it")
        self._free(path, name)
        os.link(self.root / source, path, follow_symlinks=False)

    def finish(self) -> None:
        """Refuse the archive if a link it made now resolves outside (later links can re-aim earlier ones)."""
        for name, path in self.links:
            if not self._inside(path):
                raise FetchError(f"archive link {name!r} leaves the destination once the archive is unpacked: "
                                 "refused")

    def _inside(self, path: Path) -> bool:
        real = os.path.realpath(path)
        return os.path.commonpath([real, str(self.root)]) == str(self.root)

    def _target(self, name: str) -> Path | None:
        """Where member ``name`` goes, its directories made (none of them a symlink); None: the root."""
        self.clock.check(f"while unpacking (at member {name!r})")
        self.members += 1
        if self.members > self.limits.members:
            raise MEMBERS.exceeded("the number of archive members", self.limits.members)
        if not is_safe_relative(name):
            raise FetchError(f"unsafe archive member {name!r}: absolute, with a '..' or with a backslash")
        clean = posixpath.normpath(name)
        if clean == ".":
            return None
        path = self.root
        for part in clean.split("/")[:-1]:
            path = path / part
            mode = _lmode(path)
            if mode is None:
                os.mkdir(path, 0o755)
            elif stat.S_ISLNK(mode):
                raise FetchError(f"archive member {name!r} goes through the symlink "
                                 f"{str(path.relative_to(self.root))!r} extracted before it: refused")
            elif not stat.S_ISDIR(mode):
                raise FetchError(f"archive member {name!r} is below {str(path.relative_to(self.root))!r}, "
                                 "which is not a directory")
        return path / clean.rpartition("/")[2]

    def _named_target(self, name: str) -> Path:
        path = self._target(name)
        if path is None:
            raise FetchError(f"archive member {name!r} names the top directory, but is not a directory")
        return path

    def _free(self, path: Path, name: str, for_directory: bool = False) -> bool:
        """Clear ``path`` for member ``name``, as tar replaces an earlier member of the same name;
        True if a directory is there and may stay."""
        mode = _lmode(path)
        if mode is None:
            return False
        if stat.S_ISDIR(mode):
            if for_directory:
                return True
            raise FetchError(f"archive member {name!r} would replace a directory extracted before it: refused")
        os.unlink(path)
        return False


def _unpack_tar(archive: Path, tree: _Tree) -> None:
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            if member.isdir():
                tree.directory(member.name)
            elif member.isreg():
                source = tar.extractfile(member)
                assert source is not None  # a regular member always has data
                tree.file(member.name, member.mode, source)
            elif member.issym():
                tree.symlink(member.name, member.linkname)
            elif member.islnk():
                tree.hardlink(member.name, member.linkname)
            elif member.isdev() or member.isfifo():
                raise FetchError(f"archive member {member.name!r} is a device or FIFO: refused")
            else:
                raise FetchError(f"archive member {member.name!r} has an unknown type {member.type!r}: refused")


#: The longest symlink target a zip member may hold.
_MAX_LINK = 4096


def _unpack_zip(archive: Path, tree: _Tree) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            mode = info.external_attr >> 16 if info.create_system == 3 else 0  # 3: Unix, whose modes zip keeps
            kind = stat.S_IFMT(mode)
            if info.is_dir() or kind == stat.S_IFDIR:
                tree.directory(info.filename)
            elif kind == stat.S_IFLNK:
                with zf.open(info) as fh:
                    target = fh.read(_MAX_LINK + 1)
                if len(target) > _MAX_LINK:
                    raise FetchError(f"archive link {info.filename!r} has a target longer than {_MAX_LINK} bytes")
                tree.symlink(info.filename, os.fsdecode(target))
            elif kind in (0, stat.S_IFREG):
                with zf.open(info) as fh:
                    tree.file(info.filename, mode or 0o644, fh)
            elif kind in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK):
                raise FetchError(f"archive member {info.filename!r} is a device or FIFO: refused")
            else:
                raise FetchError(f"archive member {info.filename!r} has an unknown type {kind:o}: refused")


#: What reading a broken archive raises (besides OSErrors without an errno, such as gzip's).
_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError)


def unpack(archive: Path, dest: Path, name: str, clock: Deadline, limits: Limits) -> None:
    """Unpack ``archive`` (``name`` says which kind) into the empty directory ``dest``, member by
    member by the rules of :class:`_Tree`. Errors writing ``dest`` are left to the caller."""
    tree = _Tree(dest, clock, limits)
    try:
        (_unpack_zip if name.endswith(".zip") else _unpack_tar)(archive, tree)
        tree.finish()
    except _ARCHIVE_ERRORS + (OSError,) as exc:  # RuntimeError: an encrypted zip member
        if isinstance(exc, OSError) and exc.errno:
            raise
        raise FetchError(f"not a valid {name.rsplit('.', 1)[-1]} archive: {exc}") from None
