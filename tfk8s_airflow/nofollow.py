"""File operations that follow no link: the Airflow worker's on the shared volume, and the staging pods'.

Why a module of its own: the pods run code nobody reviewed, and they write to the same
GlusterFS volume the worker reads and writes (logs, models, the staging cache). Whatever
a pod left there (a symbolic link, a hard link, a FIFO, a device node, a tree a thousand
levels deep) must never make the worker write somewhere else, read something else, or
hang. Every file operation of the worker on the volume goes through here, and so does every
file operation of the staging copy and checksum pods (:mod:`tfk8s_airflow.pod.stagecopy`,
:mod:`tfk8s_airflow.pod.stagesum`, which read and write the same volume); each rule is
written once:

* **A trusted root, then nothing followed.** A :class:`SafeDir` starts at a directory the
  worker's own configuration names (the log directory, the serving root, the volume's
  mount). Everything below it is walked one component at a time, each opened relative to
  its parent's descriptor with ``O_NOFOLLOW`` (and ``O_DIRECTORY`` for directories): a
  symbolic link in any component is refused (:class:`PathSafetyError`), never followed,
  and a component swapped for a link between two calls cannot redirect the next one.
* **Only regular files and directories.** FIFOs, devices and sockets are refused before
  they are opened; files are opened with ``O_NONBLOCK`` and checked again with ``fstat``
  (the same inode, a regular file), so nothing blocks and no device is touched.
* **Whole files are replaced, never written through.** :meth:`SafeDir.write_atomic`
  writes a new file under a temporary name in the same directory (``O_CREAT | O_EXCL |
  O_NOFOLLOW``), fsyncs it and renames it over the final name: whatever a pod put at that
  name (a link, a hard link to another file, a FIFO) is replaced, its target untouched.
* **In-place writes need a file of one link.** :meth:`SafeDir.append` (a log growing over
  time) and :meth:`SafeDir.open_write` (a copy pod writing a file at offsets, a journal)
  refuse a file with more than one hard link, which could be another file of the volume
  under a second name.
* **Bounded reads.** :meth:`SafeDir.read_bytes` reads at most ``limit`` bytes of a small
  document and refuses a larger one.
* **Copies refuse links.** :func:`copytree` copies regular files and directories only and
  refuses symbolic links, hard links and special files, bounded in depth, files and bytes.

The rules protect the worker from the pods, not the pods from each other: a pod writes
what it can reach, and which host paths a job may mount is the deployment's policy. The
path of a trusted root itself is the worker's configuration and is opened as given.
Standard library and the ground floor only (``exceptions``, ``pathrules``, ``untrusted``), no
Airflow: the staging engine, the volume helpers and the pod side use it.

Decisions where the staging pods' own copy of these rules differed: a ``.`` component is
dropped, not refused (it names the same directory), and ``..`` is refused as everywhere else;
a refusal is a :class:`PathSafetyError` naming the path and what is there, which the pods
turn into the part's failure of the kind they always reported (``io`` for a copy, ``changed``
for a checksum pass); the pods' reads of their own journals now refuse a FIFO or a device
planted at the journal's name before opening it (they opened it and could block), and a
journal of more than one hard link; and a part's record is replaced through
:meth:`SafeDir.write_atomic`'s unique temporary name rather than a fixed one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tfk8s_airflow import untrusted
from tfk8s_airflow.exceptions import DataError, PathSafetyError, UntrustedJSONError
from tfk8s_airflow.pathrules import has_parent_segment

__all__ = ["SafeDir", "CopyStats", "copytree", "split_under", "read_bytes", "read_json", "write_atomic",
           "append", "DEFAULT_READ_LIMIT", "TEMP_SUFFIX"]

#: Largest small document (a JSON record, a termination message's file) read whole by default.
DEFAULT_READ_LIMIT = 1 << 20
#: Temporary names end with this (and start with '.': hidden by Hadoop's rule, never data).
TEMP_SUFFIX = ".tfk8s-tmp"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_COPY_CHUNK = 1 << 20
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    """The components of a relative path; '' and '.' are dropped, '..' and absolute paths refused."""
    text = os.fspath(rel)
    if text.startswith("/") or "\\" in text or has_parent_segment(text) or "\0" in text:
        raise PathSafetyError(f"{text!r} is not a plain relative path (no leading '/', no '..', no '\\')")
    return [p for p in text.split("/") if p not in ("", ".")]


def split_under(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """``path`` relative to ``root``, lexically (no link is resolved); PathSafetyError outside it."""
    text, base = os.path.normpath(os.fspath(path)), os.path.normpath(os.fspath(root))
    if has_parent_segment(os.fspath(path)):
        raise PathSafetyError(f"{os.fspath(path)!r} contains a '..' segment")
    if text == base:
        return ""
    if not text.startswith(base.rstrip("/") + "/"):
        raise PathSafetyError(f"{text} is not under {base}")
    return text[len(base.rstrip("/")) + 1:]


def _refused(where: str, exc: OSError, dir_fd: int | None = None, name: str | None = None
             ) -> PathSafetyError | None:
    """The PathSafetyError for an ``open`` refused because of what is at ``where`` (``name`` in
    ``dir_fd``, looked at again to say what it is); ``None`` for other errors."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
        return None
    st = None
    if dir_fd is not None and name is not None:
        with contextlib.suppress(OSError):
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if exc.errno == errno.ELOOP or (st is not None and stat.S_ISLNK(st.st_mode)):
        target = ""
        if dir_fd is not None and name is not None:
            with contextlib.suppress(OSError):
                target = f" (to {os.readlink(name, dir_fd=dir_fd)})"
        return PathSafetyError(f"{where} is a symbolic link{target}; links on the volume are never "
                               "followed (remove it)")
    if st is not None:
        return PathSafetyError(f"{where} is {_kind(st.st_mode)} where a "
                               f"{'directory' if exc.errno == errno.ENOTDIR else 'regular file'} should be")
    return PathSafetyError(f"{where}: {exc.strerror} (a link or a special file in the path)")


@dataclass
class CopyStats:
    """What :func:`copytree` copied, and a digest of it (paths, kinds, modes, sizes, bytes)."""

    files: int = 0
    dirs: int = 0
    bytes: int = 0
    digest: str = ""


class SafeDir:
    """An open directory: every operation is relative to it and follows no link below it.

    Open the trusted root with :meth:`open` (or :meth:`open_under`), then walk down with
    :meth:`subdir`. Use as a context manager, or :meth:`close` it.
    """

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False, mode: int = 0o755,
             follow: bool = True) -> SafeDir:
        """A trusted directory, opened as the worker's configuration names it (``create``: mkdir -p).

        ``follow=False``: its last component must be the directory itself, not a symbolic link to one
        (for a root that lies on a volume the pods write, such as the job's log directory).
        """
        text = os.fspath(path)
        if create:
            os.makedirs(text, mode=mode, exist_ok=True)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        try:  # (without a trailing slash, which would follow a link whatever the flags)
            fd = os.open(text if follow else (text.rstrip("/") or "/"), flags)
        except OSError as exc:
            # O_DIRECTORY | O_NOFOLLOW on a link: ENOTDIR (Linux) or ELOOP
            link = not follow and exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(text.rstrip("/"))
            if exc.errno == errno.ENOTDIR and not link:
                raise PathSafetyError(f"{text} is not a directory") from None
            if link:
                raise PathSafetyError(f"{text} is a symbolic link: refused, not followed (fix: remove the link "
                                      "and let the directory be made again)") from None
            raise
        return cls(fd, text.rstrip("/") or "/")

    @classmethod
    def open_under(cls, root: str | os.PathLike[str], path: str | os.PathLike[str], *,
                   create: bool = False, mode: int = 0o755) -> SafeDir:
        """``path``, a directory under the trusted ``root``: the part below ``root`` is walked
        without following links."""
        rel = split_under(path, root)
        with cls.open(root, create=create, mode=mode) as base:
            return base.subdir(rel, create=create, mode=mode)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SafeDir({self.path!r})"

    def where(self, rel: str | os.PathLike[str] = "") -> str:
        """The path of ``rel`` for messages (not checked: messages name what was refused too)."""
        text = "/".join(p for p in os.fspath(rel).split("/") if p not in ("", "."))
        return f"{self.path}/{text}" if text else self.path

    # ------------------------------------------------------------ directories
    def _open_child_dir(self, fd: int, name: str, where: str, create: bool, mode: int) -> int:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, mode, dir_fd=fd)
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise (_refused(where, exc, fd, name) or exc) from None

    def _walk_to(self, parts: list[str], create: bool, mode: int) -> int:
        """A new descriptor of the directory ``parts`` below this one."""
        fd = os.dup(self.fd)
        done: list[str] = []
        try:
            for name in parts:
                done.append(name)
                child = self._open_child_dir(fd, name, self.where("/".join(done)), create, mode)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def subdir(self, rel: str | os.PathLike[str], *, create: bool = False, mode: int = 0o755) -> SafeDir:
        """The directory ``rel`` below this one (``create``: made where missing), no link followed."""
        parts = _parts(rel)
        return SafeDir(self._walk_to(parts, create, mode), self.where("/".join(parts)))

    @contextlib.contextmanager
    def _parent(self, rel: str | os.PathLike[str], create: bool = False) -> Iterator[tuple[int, str]]:
        """(descriptor of ``rel``'s directory, ``rel``'s last component), closed afterwards."""
        parts = _parts(rel)
        if not parts:
            raise PathSafetyError(f"{self.path}: a file name is needed, got {os.fspath(rel)!r}")
        fd = self._walk_to(parts[:-1], create, 0o755)
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def lstat(self, rel: str | os.PathLike[str]) -> os.stat_result | None:
        """What is at ``rel`` (a link is not followed); ``None`` when nothing is."""
        try:
            with self._parent(rel) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def entries(self, rel: str | os.PathLike[str] = "") -> list[tuple[str, os.stat_result]]:
        """The entries of directory ``rel``, sorted by name, each with its ``lstat``."""
        with self.subdir(rel) as d, os.scandir(d.fd) as it:
            return sorted((e.name, e.stat(follow_symlinks=False)) for e in it)

    def is_empty(self, rel: str | os.PathLike[str] = "") -> bool:
        """Whether directory ``rel`` is missing or has no entries."""
        try:
            with self.subdir(rel) as d, os.scandir(d.fd) as it:
                return next(it, None) is None
        except FileNotFoundError:
            return True

    def walk(self, max_depth: int = 64) -> Iterator[tuple[str, list[str], list[tuple[str, os.stat_result]]]]:
        """``(relative dir, subdirectories, non-directories with their lstat)``, top down; links
        and special files are reported, never entered or followed."""
        yield from self._walk(self, "", max_depth)

    def _walk(self, d: SafeDir, rel: str, depth: int
              ) -> Iterator[tuple[str, list[str], list[tuple[str, os.stat_result]]]]:
        if depth < 0:
            raise PathSafetyError(f"{d.path} is nested deeper than allowed")
        dirs: list[tuple[str, os.stat_result]] = []
        others: list[tuple[str, os.stat_result]] = []
        with os.scandir(d.fd) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                (dirs if stat.S_ISDIR(st.st_mode) else others).append((e.name, st))
        dirs.sort()
        others.sort()
        yield rel, [n for n, _ in dirs], others
        for name, _ in dirs:
            with d.subdir(name) as sub:
                yield from self._walk(sub, f"{rel}/{name}" if rel else name, depth - 1)

    # --------------------------------------------------------------- reading
    def open_read(self, rel: str | os.PathLike[str], *, single_link: bool = True) -> BinaryIO:
        """A regular file (of one link, unless ``single_link`` is false), opened for reading
        (unbuffered); refuses anything else."""
        with self._parent(rel) as (fd, name):
            return _open_regular(fd, name, self.where(rel), single_link)

    def read_bytes(self, rel: str | os.PathLike[str], limit: int = DEFAULT_READ_LIMIT) -> bytes:
        """The whole of a small regular file; :class:`DataError` when it holds more than ``limit`` bytes."""
        with self.open_read(rel) as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise DataError(f"{self.where(rel)} is larger than {limit} bytes; not read")
        return data

    def read_json(self, rel: str | os.PathLike[str], limit: int = DEFAULT_READ_LIMIT, *, strict: bool = True) -> Any:
        """A small JSON document; :class:`DataError` when it is not one (``strict``: NaN and
        Infinity refused too), or nests deeper than :data:`tfk8s_airflow.untrusted.MAX_DEPTH`."""
        data = self.read_bytes(rel, limit)
        try:  # through the shared bounded reader: a document nested too deep is refused before it is parsed
            return untrusted.loads(data, max_bytes=limit, strict=strict, what=self.where(rel))
        except UntrustedJSONError as exc:
            raise DataError(str(exc)) from None

    # --------------------------------------------------------------- writing
    def open_new(self, rel: str | os.PathLike[str], mode: int = 0o644, *, make_parents: bool = False) -> BinaryIO:
        """A file created at ``rel``, which must not exist (``O_EXCL``), open for writing (unbuffered)."""
        with self._parent(rel, make_parents) as (fd, name):
            return _create(fd, name, mode, self.where(rel))

    def write_atomic(self, rel: str | os.PathLike[str], data: bytes, mode: int = 0o644, *,
                     make_parents: bool = False, durable: bool = True) -> None:
        """Replace ``rel`` with a file holding ``data``: a temporary file in the same directory,
        fsync (``durable``), rename. What was at ``rel`` (a file, a link, a FIFO) is replaced,
        never written through; a directory there is an error."""
        with self._parent(rel, make_parents) as (fd, name):
            tmp = f".{name[:64]}.{secrets.token_hex(6)}{TEMP_SUFFIX}"
            fh = _create(fd, tmp, mode, self.where(rel))
            try:
                with fh:
                    _write_all(fh, data)
                    if durable:
                        os.fsync(fh.fileno())
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                raise
            if durable:
                with contextlib.suppress(OSError):
                    os.fsync(fd)

    def write_json_atomic(self, rel: str | os.PathLike[str], doc: Any, **kwargs: Any) -> None:
        """:meth:`write_atomic` of ``doc`` as strict JSON (NaN and infinities are an error)."""
        text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"
        self.write_atomic(rel, text.encode("utf-8"), **kwargs)

    def create_exclusive(self, rel: str | os.PathLike[str], data: bytes, mode: int = 0o644, *,
                         make_parents: bool = False) -> bool:
        """Write ``data`` to a new file ``rel``; ``False`` (nothing written) when anything is there."""
        try:
            fh = self.open_new(rel, mode, make_parents=make_parents)
        except FileExistsError:
            return False
        with fh:
            _write_all(fh, data)
        return True

    def open_write(self, rel: str | os.PathLike[str], mode: int = 0o644, *, make_parents: bool = False,
                   append: bool = False) -> BinaryIO:
        """The regular file ``rel`` (created when missing, never truncated) open for writing, unbuffered:
        at offsets (``os.pwrite`` on its ``fileno()``: the staging copy pods), or at its end (``append``).

        Refuses a link, a special file and a file with more than one hard link (another file of
        the volume under a second name), so the bytes only ever land in this name's own file.
        """
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_APPEND if append else 0)
        with self._parent(rel, make_parents) as (fd, name):
            where = self.where(rel)
            try:
                ffd = os.open(name, flags, mode, dir_fd=fd)
            except OSError as exc:
                raise (_refused(where, exc, fd, name) or exc) from None
        try:
            _check_regular(os.fstat(ffd), where, single_link=True)
            _clear_nonblock(ffd)
            return os.fdopen(ffd, "ab" if append else "wb", buffering=0)  # a descriptor: nothing truncated
        except BaseException:
            os.close(ffd)
            raise

    def append(self, rel: str | os.PathLike[str], data: bytes, mode: int = 0o644, *,
               make_parents: bool = False) -> int:
        """Append ``data`` to the regular file ``rel`` (created when missing; :meth:`open_write`'s
        refusals); returns its new size."""
        with self.open_write(rel, mode, make_parents=make_parents, append=True) as fh:
            _write_all(fh, data)
            return os.fstat(fh.fileno()).st_size

    # ------------------------------------------------------ names and removal
    def replace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Rename ``src`` to ``dst`` (both below this directory), replacing what ``dst`` names."""
        with self._parent(src) as (sfd, sname), self._parent(dst) as (dfd, dname):
            os.replace(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)

    def rename_noreplace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Rename the directory ``src`` to ``dst``; :class:`FileExistsError` when ``dst`` is a
        non-empty directory or not a directory (``rename(2)`` replaces only an empty directory)."""
        with self._parent(src) as (sfd, sname), self._parent(dst) as (dfd, dname):
            try:
                st = os.stat(dname, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISDIR(st.st_mode):
                raise FileExistsError(errno.EEXIST, f"{self.where(dst)} exists and is {_kind(st.st_mode)}")
            try:
                os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise FileExistsError(errno.EEXIST, f"{self.where(dst)} exists") from None
                raise

    def unlink(self, rel: str | os.PathLike[str]) -> bool:
        """Remove the non-directory ``rel`` (a link itself, not its target); ``False`` when missing."""
        try:
            with self._parent(rel) as (fd, name):
                os.unlink(name, dir_fd=fd)
            return True
        except FileNotFoundError:
            return False

    def rmdir(self, rel: str | os.PathLike[str]) -> bool:
        """Remove the empty directory ``rel``; ``False`` when missing."""
        try:
            with self._parent(rel) as (fd, name):
                os.rmdir(name, dir_fd=fd)
            return True
        except FileNotFoundError:
            return False

    def rmtree(self, rel: str | os.PathLike[str]) -> bool:
        """Remove ``rel`` and everything below it, following no link; ``False`` when missing."""
        try:
            with self._parent(rel) as (fd, name):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=fd)
                    return True
                _rmtree_at(fd, name)
            return True
        except FileNotFoundError:
            return False

    @contextlib.contextmanager
    def lock(self, rel: str | os.PathLike[str], *, timeout: float | None = None, posix: bool = False
             ) -> Iterator[int]:
        """An exclusive lock on the regular file ``rel`` (created when missing, never truncated),
        released when the block ends or the process dies. ``posix``: a POSIX record lock
        (``lockf``, what GlusterFS shares between clients) instead of ``flock``. ``timeout``:
        seconds to wait, then :class:`TimeoutError` (``None``: wait as long as it takes)."""
        with self._parent(rel, True) as (fd, name):
            where = self.where(rel)
            try:
                lfd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                              0o644, dir_fd=fd)
            except OSError as exc:
                raise (_refused(where, exc, fd, name) or exc) from None
        try:
            _check_regular(os.fstat(lfd), where, single_link=False)
            take = fcntl.lockf if posix else fcntl.flock
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    take(lfd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES) or deadline is None:
                        raise
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{where} is locked by another process for more than "
                                           f"{timeout:.0f}s") from None
                    time.sleep(0.5)
            yield lfd
        finally:
            os.close(lfd)  # releases the lock


def _check_regular(st: os.stat_result, where: str, *, single_link: bool) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise PathSafetyError(f"{where} is {_kind(st.st_mode)}; only regular files are used")
    if single_link and st.st_nlink != 1:
        raise PathSafetyError(f"{where} has {st.st_nlink} hard links (another file under a second name); "
                              "not written")


def _clear_nonblock(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)


def _open_regular(dir_fd: int, name: str, where: str, single_link: bool = True) -> BinaryIO:
    """Open ``name`` in ``dir_fd`` for reading: a regular file of one link, checked before it is
    opened (no device or FIFO is ever opened) and again after (the same inode)."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    _check_regular(before, where, single_link=single_link)
    try:
        ffd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise (_refused(where, exc, dir_fd, name) or exc) from None
    try:
        after = os.fstat(ffd)
        _check_regular(after, where, single_link=single_link)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise PathSafetyError(f"{where} was replaced while it was being opened")
        _clear_nonblock(ffd)
        return os.fdopen(ffd, "rb", buffering=0)
    except BaseException:
        os.close(ffd)
        raise


def _create(dir_fd: int, name: str, mode: int, where: str) -> BinaryIO:
    try:
        ffd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                      dir_fd=dir_fd)
    except FileExistsError:
        raise
    except OSError as exc:
        raise (_refused(where, exc, dir_fd, name) or exc) from None
    try:
        os.fchmod(ffd, mode)  # the mode asked for, whatever the umask
    except BaseException:
        os.close(ffd)
        raise
    return os.fdopen(ffd, "wb", buffering=0)


def _write_all(fh: BinaryIO, data: bytes) -> None:
    """Unbuffered writes may write less than asked (a network file system, a signal)."""
    view = memoryview(data)
    while view:
        view = view[fh.write(view) or 0:]


def _rmtree_at(parent_fd: int, name: str) -> None:
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        with os.scandir(fd) as it:
            children = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        for child, is_dir in children:
            if is_dir:
                _rmtree_at(fd, child)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def copytree(src: SafeDir, dst: SafeDir, name: str, *, max_depth: int = 32, max_files: int = 100_000,
             max_bytes: int | None = None) -> CopyStats:
    """Copy the tree of ``src`` into the new directory ``dst/name`` (which must not exist).

    Only directories and regular files of one link are copied; a symbolic link, a hard link,
    a FIFO, a device or a socket anywhere is a :class:`PathSafetyError` naming it, and
    ``dst/name`` is removed again (as after any other failure). Modes are kept as
    ``0o644``/``0o755`` (executable bits only; never setuid). The digest covers every path,
    kind, mode, size and byte, in sorted order, so two trees with the same digest are the same.
    """
    digest = hashlib.sha256()
    stats = CopyStats()
    try:
        os.mkdir(name, 0o755, dir_fd=dst.fd)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{dst.where(name)} exists") from None
    try:
        with dst.subdir(name) as out:
            _copy_dir(src, out, "", digest, stats, max_depth, max_files, max_bytes)
    except BaseException:
        dst.rmtree(name)
        raise
    stats.digest = digest.hexdigest()
    return stats


def _copy_dir(src: SafeDir, out: SafeDir, rel: str, digest: Any, stats: CopyStats, depth: int,
              max_files: int, max_bytes: int | None) -> None:
    if depth < 0:
        raise PathSafetyError(f"{src.path} is nested deeper than allowed; not copied")
    with os.scandir(src.fd) as it:
        entries = sorted((e.name, e.stat(follow_symlinks=False)) for e in it)
    for name, st in entries:
        where = src.where(name)
        path = f"{rel}/{name}" if rel else name
        if stats.files + stats.dirs >= max_files:
            raise PathSafetyError(f"{src.path} holds more than {max_files} entries; not copied")
        if stat.S_ISDIR(st.st_mode):
            stats.dirs += 1
            digest.update(f"d {path}\0".encode("utf-8", "surrogateescape"))
            os.mkdir(name, 0o755, dir_fd=out.fd)
            with src.subdir(name) as sub_src, out.subdir(name) as sub_out:
                _copy_dir(sub_src, sub_out, path, digest, stats, depth - 1, max_files, max_bytes)
            continue
        _check_regular(st, where, single_link=True)
        stats.files += 1
        perm = 0o755 if st.st_mode & 0o100 else 0o644
        digest.update(f"f {path} {perm:o} {st.st_size}\0".encode("utf-8", "surrogateescape"))
        with _open_regular(src.fd, name, where) as fin, _create(out.fd, name, perm, out.where(name)) as fout:
            while chunk := fin.read(_COPY_CHUNK):
                stats.bytes += len(chunk)
                if max_bytes is not None and stats.bytes > max_bytes:
                    raise PathSafetyError(f"{src.path} holds more than {max_bytes} bytes; not copied")
                digest.update(chunk)
                _write_all(fout, chunk)
            os.fsync(fout.fileno())


# ------------------------------------------------------------------ one-shot helpers
def read_bytes(root: str | os.PathLike[str], rel: str | os.PathLike[str], limit: int = DEFAULT_READ_LIMIT) -> bytes:
    """:meth:`SafeDir.read_bytes` of ``rel`` under the trusted directory ``root``."""
    with SafeDir.open(root) as d:
        return d.read_bytes(rel, limit)


def read_json(root: str | os.PathLike[str], rel: str | os.PathLike[str], limit: int = DEFAULT_READ_LIMIT) -> Any:
    """:meth:`SafeDir.read_json` of ``rel`` under the trusted directory ``root``."""
    with SafeDir.open(root) as d:
        return d.read_json(rel, limit)


def write_atomic(root: str | os.PathLike[str], rel: str | os.PathLike[str], data: bytes, *,
                 make_parents: bool = True, mode: int = 0o644) -> Path:
    """:meth:`SafeDir.write_atomic` of ``rel`` under the trusted directory ``root``; returns the path."""
    with SafeDir.open(root) as d:
        d.write_atomic(rel, data, mode, make_parents=make_parents)
        return Path(d.where(rel))


def append(root: str | os.PathLike[str], rel: str | os.PathLike[str], data: bytes, *,
           make_parents: bool = True) -> int:
    """:meth:`SafeDir.append` to ``rel`` under the trusted directory ``root``, e.g.
    ``append(log_dir, f"{job}/{pod}.log", chunk)``; returns the file's new size."""
    with SafeDir.open(root) as d:
        return d.append(rel, data, make_parents=make_parents)
