"""The verified HDFS to GlusterFS copy on the Airflow worker (the copy engine of staging).

Why it is shaped this way (:mod:`tfk8s_airflow.staging.stage` orchestrates it: the listing, the
shards, the manifest):

* **Parallel streams.** ``parallelism`` threads each stream one file at a time (WebHDFS
  OPEN, redirected to a DataNode) in ``chunk_size`` pieces (4 MiB); memory is about
  ``parallelism * (2 * chunk_size + 1 MiB checksum batch)`` whatever the file sizes.
* **Verified on the fly.** Each chunk is written and fed to :class:`~tfk8s_airflow.hdfschecksum.HdfsChecksum` (HDFS's
  own MD5-of-MD5-of-CRC32C, so it can be compared with ``GETFILECHECKSUM``); when the
  stream ends the file is fsynced and its length checked against the listing. What else
  is compared with HDFS is the ``verify`` level (:func:`copy_to_volume`): ``"stream"``
  (default) records the streamed checksum; ``"hdfs"`` also compares it with HDFS's,
  asked of the DataNode that served the read. The bytes are not read back from the
  volume: a second read through the FUSE client would mostly hit the page cache and prove
  little, at the price of doubling the I/O. A mismatch deletes the file and retries
  (``attempts``), then fails.
* **Never visible half-written.** A first copy (the cache directory missing or empty) is
  written into a hidden sibling directory, ``.<name>.tfk8s-partial``, renamed into place
  only when every file is there and verified: nothing of it is visible before, and it
  costs one rename instead of one per file (on GlusterFS each rename is a round trip to
  the brick: ~0.5 s per 500 files measured). Into a cache that already holds files, each
  file is written as ``.<name>.tfk8s-partial`` beside its final name and renamed when
  verified. Both partial names are hidden by Hadoop's rule, so no lister takes them for
  data.
* **Resumable.** A file already at its final name (or in the staging directory of an
  interrupted first copy) with the right size and the right checksum (computed from the
  local bytes with HDFS's algorithm) is skipped, so a rerun after a kill copies only what
  is missing, and a second run copies nothing.
* **One stager per directory.** A POSIX lock on ``.<name>.tfk8s-lock`` beside the cache
  directory (released by the kernel if the stager dies) serialises concurrent runs on the
  same partition; the lock holder removes partial files left by a killed run.
* **The manifest goes last.** An earlier manifest in the cache directory is deleted before
  any file changes and the new one written only after every file is verified.
* **Nothing on the volume is followed.** Pods write to the same volume, so every file
  operation of the copy (the lock, the survey, partial files, renames, the manifest) goes
  through :mod:`tfk8s_airflow.nofollow`: below the volume's mount each directory is
  opened without following a link, partial files are created new (``O_EXCL``, never
  opened through a name a pod planted), a file is only read back when it is a regular file
  of one link, and a rename replaces whatever stood at the final name.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import posixpath
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tfk8s_airflow.exceptions import DataError, NameTooLongError, PathSafetyError, SpecError, StagingError
from tfk8s_airflow.hdfschecksum import checksums_match, params_from_remote
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.pathrules import is_safe_relative
from tfk8s_airflow.staging.checksums import file_checksum
from tfk8s_airflow.staging.checksums import summer as hdfs_summer
from tfk8s_airflow.staging.listing import FileEntry
from tfk8s_airflow.staging.webhdfs import WebHdfs

log = logging.getLogger(__name__)


class Logger(Protocol):
    """What staging logs through: a :class:`logging.Logger` or an Airflow task's ``self.log``."""

    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: Any, *args: Any, **kw: Any) -> Any: ...

__all__ = ["CopyStats", "Logger", "copy_to_volume", "PARTIAL_SUFFIX", "DEFAULT_CHUNK", "DEFAULT_VERIFY",
           "VERIFY_LEVELS", "parse_verify", "LOCK_SUFFIX", "lock_path", "partial_name", "partial_path", "staging_dir",
           "verifiable"]

PARTIAL_SUFFIX = ".tfk8s-partial"
#: The longest file name, in bytes, of the file systems a volume is on (and of HDFS's default limit).
NAME_MAX = 255
LOCK_SUFFIX = ".tfk8s-lock"
DEFAULT_CHUNK = 4 << 20  # per stream; bigger pieces mean fewer Python-level iterations
#: How a copy is checked against HDFS (see :func:`copy_to_volume`).
VERIFY_LEVELS = ("hdfs", "stream", "size")
DEFAULT_VERIFY = "stream"
_VERIFIABLE = re.compile(r"^MD5-of-\d+MD5-of-\d+CRC32C$")


@dataclass
class CopyStats:
    """What a copy did."""

    files: int = 0
    copied: int = 0
    skipped: int = 0
    bytes_total: int = 0
    bytes_copied: int = 0
    seconds: float = 0.0
    entries: list[FileEntry] = field(default_factory=list)  # with checksums filled in

    @property
    def mib_per_s(self) -> float:
        return self.bytes_copied / 2**20 / self.seconds if self.seconds > 0 else 0.0


def parse_verify(value: Any) -> str:
    """``"hdfs"``, ``"stream"`` or ``"size"``; ``True``/``False`` mean ``"hdfs"``/``"size"``."""
    if value is True or value is False:
        return "hdfs" if value else "size"
    if isinstance(value, str) and value.strip().lower() in VERIFY_LEVELS:
        return value.strip().lower()
    raise SpecError(f"must be one of {', '.join(map(repr, VERIFY_LEVELS))} (or True for "
                    f"'hdfs', False for 'size'), got {value!r}", field="verify")


def partial_name(name: str) -> str:
    """The hidden name a file ``name`` is written under until it is verified: ``.<name>.tfk8s-partial``,
    or, when that would pass the 255 bytes a file name may have (HDFS takes names of up to 255 bytes, so
    the prefix and suffix can push a valid name over), ``.<sha256 of the name>.tfk8s-partial``."""
    hidden = f".{name}{PARTIAL_SUFFIX}"
    if len(os.fsencode(hidden)) <= NAME_MAX:
        return hidden
    return f".{hashlib.sha256(os.fsencode(name)).hexdigest()[:40]}{PARTIAL_SUFFIX}"


def partial_path(target: Path) -> Path:
    """Where ``target`` is written until it is verified."""
    return target.with_name(partial_name(target.name))


def verifiable(checksum: Mapping[str, Any] | None) -> bool:
    """Whether we can recompute this HDFS checksum locally (MD5-of-MD5-of-CRC32C, the
    HDFS default, or the zero-length file's variant)."""
    if not checksum:
        return False
    algo = str(checksum.get("algorithm", ""))
    return bool(_VERIFIABLE.match(algo)) or algo == "MD5-of-0MD5-of-0CRC32"


class _Progress:
    """Thread-safe byte/file counters that log at most every ``interval`` seconds."""

    def __init__(self, total_files: int, total_bytes: int, logger: Logger,
                 interval: float) -> None:
        self.total_files, self.total_bytes = total_files, total_bytes
        self.log, self.interval = logger, interval
        self.files = self.bytes = 0
        self.start = self._last = time.monotonic()
        self._lock = threading.Lock()

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        with self._lock:
            self.bytes += nbytes
            self.files += files
            now = time.monotonic()
            if now - self._last < self.interval and not (files and self.files == self.total_files):
                return
            self._last = now
            elapsed = max(now - self.start, 1e-6)
        self.log.info("staging progress: %d/%d files, %.1f/%.1f MiB (%.0f%%), %.1f MiB/s",
                      self.files, self.total_files, self.bytes / 2**20, self.total_bytes / 2**20,
                      100.0 * self.bytes / self.total_bytes if self.total_bytes else 100.0,
                      self.bytes / 2**20 / elapsed)


def lock_path(dest: Path) -> Path:
    """The lock serialising stagers of ``dest``: beside it, as ``dest`` may not exist yet."""
    return dest.with_name(f".{dest.name}{LOCK_SUFFIX}")


def staging_dir(dest: Path) -> Path:
    """Where a first copy into ``dest`` is written before it is renamed into place."""
    return dest.with_name(f".{dest.name}{PARTIAL_SUFFIX}")


@contextlib.contextmanager
def _dest_lock(parent: SafeDir, name: str, timeout: float) -> Iterator[None]:
    try:
        with parent.lock(name, timeout=timeout, posix=True):
            yield
    except TimeoutError:
        raise StagingError(f"another stager holds {parent.where(name)} for more than "
                           f"{timeout:.0f}s (a concurrent run on the same partition)") from None


def _survey(root: SafeDir) -> tuple[set[str], int]:
    """One walk of the copy's root: the regular files already there (relative paths), and how
    many partial files left by an interrupted run were removed. One directory listing per
    directory instead of one lookup per file to copy: every file operation on the FUSE mount
    is a round trip to the GlusterFS brick, and on a first copy every such lookup would find
    nothing. Links and special files are not taken for files (a copy replaces them)."""
    present: set[str] = set()
    removed = 0
    for rel, _dirs, entries in root.walk():
        for name, st in entries:
            path = posixpath.join(rel, name) if rel else name
            if name.endswith(PARTIAL_SUFFIX):
                if root.unlink(path):
                    removed += 1
            elif stat.S_ISREG(st.st_mode):
                present.add(path)
    return present, removed


def _write_all(out: Any, data: bytes) -> None:
    """Unbuffered writes may write less than asked (a network file system, a signal)."""
    view = memoryview(data)
    while view:
        view = view[out.write(view):]


def _with_checksum(entry: FileEntry, checksum: Mapping[str, Any] | None) -> FileEntry:
    return FileEntry(entry.path, entry.relpath, entry.size, entry.mtime, entry.block_size,
                     dict(checksum) if checksum is not None else None)


def _local_matches(hdfs: WebHdfs, where: SafeDir, name: str, entry: FileEntry,
                   verify: bool) -> FileEntry | None:
    """``entry`` (with HDFS's checksum when ``verify``) if the file ``name`` in ``where`` already
    holds its bytes, else ``None``. HDFS is asked for the checksum only when a regular file of
    the right size is there, so a first copy makes no lookup for this."""
    st = where.lstat(name)
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != entry.size:
        return None
    if not verify:
        return entry  # the size is all we are asked to compare
    if entry.checksum is None:
        entry = _with_checksum(entry, hdfs.checksum(entry.path))
    if not verifiable(entry.checksum):
        return entry  # no checksum we can recompute: the size is all we can compare
    try:
        with where.open_read(name) as fh:
            local = file_checksum(fh, block_size=entry.block_size or 128 * 2**20,
                                  bytes_per_crc=params_from_remote(entry.checksum))
    except (PathSafetyError, FileNotFoundError):
        return None  # replaced meanwhile: copied again
    return entry if checksums_match(local, entry.checksum) else None


def _open_partial(where: SafeDir, name: str) -> Any:
    """A new file ``name`` (``O_EXCL``): what stands there (a survivor that did not match, a
    link or a FIFO a pod planted) is removed first, never opened."""
    try:
        return where.open_new(name)
    except FileExistsError:
        where.unlink(name)
        return where.open_new(name)


def _copy_one(hdfs: WebHdfs, entry: FileEntry, where: SafeDir, name: str, progress: _Progress,
              chunk_size: int, fsync: bool, cancel: threading.Event, verify: bool,
              in_place: bool) -> tuple[FileEntry, Callable[[], None]]:
    """Stream one file to the volume and check it. Returns ``entry`` with its checksum
    (HDFS's when ``verify``: the streamed bytes' checksum was compared with it; else the one
    computed from the stream) and the step that completes the file: fsync, close and, when
    ``in_place`` (the target directory is visible, so the file was written under a partial
    name), rename. The caller runs that step on another thread: waiting for the disk then
    overlaps the next file's stream (an fsync per 64 MB file cost the copy ~12% inline)."""
    partial = partial_name(name) if in_place else name
    block = entry.block_size or 128 * 2**20
    expected = entry.checksum
    bytes_per_crc = params_from_remote(expected)  # HDFS's default (512) when not known yet
    summer = (hdfs_summer(block, bytes_per_crc)
              if expected is None or verifiable(expected) else None)
    written = 0
    try:
        out = _open_partial(where, partial)  # closed by the finisher pool
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise NameTooLongError(f"cannot stage {entry.path}: the volume does not take its name "
                               f"({len(os.fsencode(name))} bytes): {exc.strerror}") from None
    try:
        with hdfs.open_chunks(entry.path, chunk_size=chunk_size) as chunks:
            for chunk in chunks:
                if cancel.is_set():
                    raise StagingError("copy cancelled: another file failed")
                _write_all(out, chunk)
                if summer is not None:
                    summer.update(chunk)
                written += len(chunk)
                progress.add(len(chunk))
            size = out.tell()
            datanode = getattr(chunks, "datanode", None)
        if size != entry.size or written != entry.size:
            raise StagingError(f"size mismatch copying {entry.path}: HDFS says {entry.size} "
                               f"bytes, received {written}, on the volume {size}")
        received = summer.result() if summer is not None else None
        if expected is None and verify:
            # Asked of the DataNode that served the read: no second NameNode round trip.
            expected = hdfs.checksum(entry.path, datanode=datanode)
            if verifiable(expected) and params_from_remote(expected) != bytes_per_crc:
                # The file has another bytes-per-CRC than HDFS's default: recompute.
                with where.open_read(partial) as again:
                    received = file_checksum(again, block_size=block,
                                             bytes_per_crc=params_from_remote(expected))
        if expected is not None and verifiable(expected) \
                and not checksums_match(received, expected):
            raise StagingError(f"checksum mismatch copying {entry.path}: HDFS "
                               f"{expected}, received {received}")
    except BaseException:
        out.close()
        where.unlink(partial)
        progress.add(-written)
        raise

    def finish() -> None:
        try:
            if fsync:
                os.fsync(out.fileno())
            out.close()
            if in_place:
                where.replace(partial, name)
        except BaseException:
            out.close()
            where.unlink(partial)
            raise

    return _with_checksum(entry, expected if expected is not None else received), finish


def copy_to_volume(hdfs: WebHdfs, files: Sequence[FileEntry], dest: Path, *,
                   parallelism: int = 4, chunk_size: int = DEFAULT_CHUNK, fsync: bool = True,
                   attempts: int = 3, lock_timeout: float = 300.0,
                   progress_interval: float = 10.0, verify: Any = DEFAULT_VERIFY,
                   trusted_root: str | os.PathLike[str] | None = None,
                   logger: Logger | None = None) -> CopyStats:
    """Copy ``files`` to ``dest / entry.relpath``: parallel, resumable, verified (see the
    module docstring). ``dest`` must already be a checked path on the volume; below
    ``trusted_root`` (the volume's mount; default ``dest``'s parent) no link is followed.

    ``verify`` (see :data:`VERIFY_LEVELS`) says what is compared with HDFS:

    * ``"stream"`` (default): each copied file's HDFS checksum is computed from the bytes
      as they stream and recorded; its length must equal the listing's (the DataNode has
      checked every chunk's CRC as it read it). A file already present is kept only if its
      size and recomputed checksum equal HDFS's ``GETFILECHECKSUM``.
    * ``"hdfs"``: as ``"stream"``, and every copied file's streamed checksum is compared
      with HDFS's ``GETFILECHECKSUM`` too, asked of the DataNode that served the read (see
      :mod:`~tfk8s_airflow.staging.webhdfs_stream`): end to end across the network hop,
      at one more request per file (for many small files about a third of the copy's time).
    * ``"size"``: no lookups; a file present with the right size is kept.

    Files left by an interrupted first copy are always compared with HDFS's checksum.
    ``stats.entries`` holds the entries with their checksums, in input order."""
    level = parse_verify(verify)
    logger = logger or log
    stats = CopyStats(files=len(files), bytes_total=sum(f.size for f in files))
    results: list[FileEntry] = list(files)
    for entry in files:
        rel = Path(entry.relpath)
        if not is_safe_relative(entry.relpath):
            raise PathSafetyError(f"refusing to copy {entry.path} to {rel}: it would leave {dest}")
    started = time.monotonic()
    if trusted_root is None:
        parent = SafeDir.open(dest.parent, create=True)
    else:
        parent = SafeDir.open_under(trusted_root, dest.parent, create=True)
    dirs: dict[str, SafeDir] = {}
    try:
        with parent, _dest_lock(parent, lock_path(dest).name, lock_timeout):
            _copy_locked(hdfs, files, dest, parent, dirs, stats, results, parallelism=parallelism,
                         chunk_size=chunk_size, fsync=fsync, attempts=attempts, level=level,
                         progress_interval=progress_interval, logger=logger)
    finally:
        for d in dirs.values():
            d.close()
    stats.seconds = time.monotonic() - started
    stats.entries = results
    unverifiable = [f for f in results if f.checksum is not None and not verifiable(f.checksum)]
    if unverifiable:
        logger.warning("%d file(s) use an HDFS checksum this stager cannot recompute "
                       "(e.g. %s: %s); they were verified by size only", len(unverifiable),
                       unverifiable[0].path, unverifiable[0].checksum)
    logger.info("copied %d file(s) (%.1f MiB, %.1f MiB/s), skipped %d already present and "
                "verified", stats.copied, stats.bytes_copied / 2**20, stats.mib_per_s,
                stats.skipped)
    return stats


def _copy_locked(hdfs: WebHdfs, files: Sequence[FileEntry], dest: Path, parent: SafeDir,
                 dirs: dict[str, SafeDir], stats: CopyStats, results: list[FileEntry], *, parallelism: int,
                 chunk_size: int, fsync: bool, attempts: int, level: str, progress_interval: float,
                 logger: Logger) -> None:
    """The copy, under the destination's lock; ``dirs`` collects the open directories (the caller closes them).

    In steps: choose where the files are written and see what is there (:func:`_open_copy_root`),
    open every directory written into (:func:`_open_target_dirs`), keep or copy each file on
    ``parallelism`` threads (:class:`_FileCopier`, :func:`_run_copies`) while their fsyncs run
    on others (:class:`_Finisher`), and only when every file is complete put a first copy in
    place (:func:`_publish_first_copy`)."""
    root, fresh, present = _open_copy_root(parent, dest, dirs, logger)
    targets = [posixpath.normpath(e.relpath) for e in files]
    _open_target_dirs(root, targets, dirs)
    finisher = _Finisher(parallelism)
    copier = _FileCopier(hdfs, dirs, present, fresh, stats, results,
                         _Progress(len(files), stats.bytes_total, logger, progress_interval), finisher,
                         chunk_size=chunk_size, fsync=fsync, attempts=attempts, level=level, logger=logger)
    failed = _run_copies(copier, files, targets, parallelism)
    failed_finish = finisher.drain()  # every started file is closed (and synced) after this
    if failed is None:
        failed = failed_finish
    if failed is not None:
        raise failed.exception()  # type: ignore[misc]
    if fresh:
        _publish_first_copy(parent, dest)


def _open_copy_root(parent: SafeDir, dest: Path, dirs: dict[str, SafeDir], logger: Logger
                    ) -> tuple[SafeDir, bool, set[str]]:
    """The directory the files are written into (opened into ``dirs[""]``), whether this is a
    first copy, and the files already there.

    Why two places: a first copy (``dest`` missing or empty, and not a mount point) is written
    into the hidden staging sibling so that nothing of it is visible before it is complete
    (one rename at the end); into a cache that already holds files, each file is written
    beside its final name, and a staging directory left by a first copy interrupted before
    ``dest`` was filled by another run is removed. The survey also sweeps the partial files
    of a killed run, and what it finds is what a rerun may keep instead of copying again."""
    staging = staging_dir(dest).name
    fresh = parent.is_empty(dest.name) and not os.path.ismount(dest)
    if fresh:
        root_name = staging  # renamed into place once everything is verified
    else:
        root_name = dest.name
        parent.rmtree(staging)  # a first copy interrupted before dest was filled otherwise
    root = dirs[""] = parent.subdir(root_name, create=True)
    present, swept = _survey(root)
    if swept:
        logger.info("removed %d partial file(s) left by an interrupted run", swept)
    if fresh and present:
        logger.info("resuming an interrupted first copy: %d file(s) already in %s",
                    len(present), root.path)
    return root, fresh, present


def _open_target_dirs(root: SafeDir, targets: Sequence[str], dirs: dict[str, SafeDir]) -> None:
    """Every directory the copy writes into, opened once (and made where missing) into
    ``dirs``, before any file is written: a link among them is refused here, not halfway
    through the copy, and each file is then written relative to a descriptor no later link
    can redirect."""
    for d in sorted({posixpath.dirname(t) for t in targets}):
        if d not in dirs:
            dirs[d] = root.subdir(d, create=True)


class _Finisher:
    """Completes copied files (fsync, close, rename) on threads of its own.

    Why: waiting for the disk then overlaps the next file's stream (an fsync per 64 MB file
    cost the copy ~12% inline). The files waiting are bounded (``2 * parallelism``), as each
    holds an open file; a copy thread submitting beyond that waits for a slot."""

    def __init__(self, parallelism: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, parallelism), thread_name_prefix="stage-sync")
        self._slots = threading.BoundedSemaphore(2 * max(1, parallelism))
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()

    def submit(self, finish: Callable[[], None]) -> None:
        """Run ``finish`` on a finisher thread (waits while ``2 * parallelism`` are pending)."""
        self._slots.acquire()

        def run() -> None:
            try:
                finish()
            finally:
                self._slots.release()
        future = self._pool.submit(run)
        with self._lock:
            self._futures.append(future)

    def drain(self) -> Future[None] | None:
        """Wait for every submitted file to be completed; the first that failed, or None."""
        self._pool.shutdown(wait=True)
        return next((f for f in self._futures if f.exception() is not None), None)


class _FileCopier:
    """Brings one listed file onto the volume: keeps the copy already there when it holds the
    file's bytes, else streams it from HDFS (retried), and counts either in ``stats``.

    Shared by the copy threads: ``results[index]`` is written by one thread each, the counters
    under a lock; ``cancel`` stops the other streams once one file has failed."""

    def __init__(self, hdfs: WebHdfs, dirs: dict[str, SafeDir], present: set[str], fresh: bool,
                 stats: CopyStats, results: list[FileEntry], progress: _Progress, finisher: _Finisher, *,
                 chunk_size: int, fsync: bool, attempts: int, level: str, logger: Logger) -> None:
        self.hdfs, self.dirs, self.present, self.fresh = hdfs, dirs, present, fresh
        self.stats, self.results, self.progress, self.finisher = stats, results, progress, finisher
        self.chunk_size, self.fsync, self.attempts, self.level, self.logger = \
            chunk_size, fsync, attempts, level, logger
        self.cancel = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, index: int, entry: FileEntry, target: str) -> None:
        where, name = self.dirs[posixpath.dirname(target)], posixpath.basename(target)
        if target in self.present and self._keep(index, entry, where, name):
            return
        finish = self._copy(entry, index, where, name)
        self.finisher.submit(finish)
        with self._lock:
            self.stats.copied += 1
            self.stats.bytes_copied += entry.size
        self.progress.add(0, files=1)

    def _keep(self, index: int, entry: FileEntry, where: SafeDir, name: str) -> bool:
        """Whether the file already at ``name`` holds ``entry``'s bytes (then it is kept: a
        rerun copies only what is missing). A survivor of an interrupted first copy may be
        cut short or, after a crash, unflushed: always compared with HDFS's checksum,
        whatever ``verify`` says."""
        kept = _local_matches(self.hdfs, where, name, entry, self.level != "size" or self.fresh)
        if kept is None:
            return False
        self.results[index] = kept
        with self._lock:
            self.stats.skipped += 1
        self.progress.add(entry.size, files=1)
        return True

    def _copy(self, entry: FileEntry, index: int, where: SafeDir, name: str) -> Callable[[], None]:
        """Stream ``entry`` (:func:`_copy_one`), up to ``attempts`` times: a transient failure
        (a DataNode gone, a short read, a checksum mismatch) is retried after a backoff; a
        cancelled copy or a :class:`DataError` (the data itself is wrong: no retry helps) is
        not. Returns the step that completes the file."""
        for attempt in range(1, self.attempts + 1):
            try:
                self.results[index], finish = _copy_one(self.hdfs, entry, where, name, self.progress,
                                                        self.chunk_size, self.fsync, self.cancel,
                                                        self.level == "hdfs", in_place=not self.fresh)
                return finish
            except StagingError as exc:
                if self.cancel.is_set() or attempt == self.attempts or isinstance(exc, DataError):
                    raise
                self.logger.warning("copying %s failed (attempt %d/%d): %s; retrying",
                                    entry.path, attempt, self.attempts, exc)
                time.sleep(min(2 ** attempt, 10))
        raise StagingError(f"copying {entry.path}: attempts must be at least 1, not {self.attempts}")


def _run_copies(copier: _FileCopier, files: Sequence[FileEntry], targets: Sequence[str],
                parallelism: int) -> Future[None] | None:
    """``copier`` over every file on ``parallelism`` threads; the first failed copy, or None.

    At the first failure the files not started are cancelled and the running streams told to
    stop (at their next chunk), and all are waited for: no copy thread writes after this
    returns, so the caller may complete, remove or report without a race."""
    with ThreadPoolExecutor(max_workers=max(1, parallelism), thread_name_prefix="stage-copy") as pool:
        futures = [pool.submit(copier, i, e, t) for i, (e, t) in enumerate(zip(files, targets, strict=True))]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in done if f.exception() is not None), None)
        if failed is not None:
            copier.cancel.set()
            for fut in futures:
                fut.cancel()
            wait(futures)
    return failed


def _publish_first_copy(parent: SafeDir, dest: Path) -> None:
    """Put a complete first copy in place: one rename of the staging directory over the empty
    ``dest`` (checked empty under the lock), so a reader sees all of it or nothing."""
    parent.rmdir(dest.name)
    parent.replace(staging_dir(dest).name, dest.name)
