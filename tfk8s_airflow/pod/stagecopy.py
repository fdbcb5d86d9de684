"""The copy pod of a staging fan-out: one part of an HDFS partition onto the mounted volume, verified.

Runs inside a staging copy pod (``python -m tfk8s_airflow.pod.stagecopy``) that the staging operator
creates with ``executor="kubernetes"`` (:mod:`tfk8s_airflow.staging.fanout` plans the parts and
reads what this writes). The standard library only, like the rest of the pod side: the image the
deployment names for these pods needs Python and this package, nothing else.

What one pod does with its part (``TFK8S_COPY_PART``, JSON; see :func:`main`):

* **Reads** its items on ``streams`` threads (4: small files are latency-bound) from WebHDFS
  (``op=OPEN`` with ``offset``/``length``: a large file is split into items at HDFS block
  boundaries, so parts of one file run in several pods) and writes it at
  its offset into the hidden staging directory the Airflow side created, opening every directory
  below the volume without following a link and every file without following one (``O_NOFOLLOW``,
  a regular file of one link), so nothing a training pod planted on the shared volume redirects a
  write.
* **Verifies** as it streams: the CRC32C of every ``bytes_per_crc`` chunk and the MD5 of each
  block's CRCs, HDFS's own ``MD5-of-MD5-of-CRC32C``. An item that is a whole file is compared here
  with HDFS's ``GETFILECHECKSUM`` (one request per file, made by the pod); the block MD5s of a
  file split across pods go into the part's record, and the Airflow side composes them into the
  file checksum and compares that with HDFS's. A mismatch is retried (``attempts``) and then
  fails the part with ``checksum mismatch copying <file>``. A read that a DataNode breaks off is
  checked against the NameNode's block list: a block it marks corrupt (the DataNode's own CRC
  check failed on every replica) fails the part at once with ``checksum error reading <file>``.
  The rule is :mod:`tfk8s_airflow.hdfschecksum`, the
  Airflow side's too; its CRCs use the package's optional C accelerator
  (``tfk8s_airflow.pod._chunkcrc``, built with the package) when the image has it, and pure
  Python otherwise (about 7 MB/s: correct, slow; the record says which).
* **Resumes**: after an item is written, fsynced and verified, one line goes to the part's
  journal (``part-<n>.<plan id>.journal`` in the records directory, appended, fsynced); a retried pod of
  the same part skips what its journal lists and still holds (:func:`journaled`: a whole file's
  checksum is asked of HDFS again; a kept file is checked again; the Airflow side then compares
  every file's recorded checksum with HDFS's before it publishes anything). A file already
  complete in the destination (a re-run) is checksummed here and kept when it matches HDFS, so a
  re-run copies nothing.
* **Reports** progress lines on stdout (``tfk8s.staging {...}``, read by the trigger through the
  pod's log) and, at the end, the part's record (``part-<n>.json``: every item's result, bytes,
  seconds, the CRC engine; written to a temporary name and renamed), and exits 0; a failure
  writes the record with ``error`` (and ``kind``: ``checksum`` or ``io``) and exits 1.

HDFS identity: ``user`` (simple authentication's ``user.name``, not a secret) comes in the part;
a delegation token, when the deployment uses one, comes from the environment
(``TFK8S_HDFS_DELEGATION``, a Secret reference in the pod spec), never from the part itself.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, cast

from tfk8s_airflow import untrusted
from tfk8s_airflow.exceptions import PathSafetyError
from tfk8s_airflow.hdfschecksum import HdfsChecksum, checksums_match, compose, python_chunk_crcs
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.threads import run_all

__all__ = ["main", "copy_part", "ENGINE", "PROGRESS_LINE_MAX", "PROGRESS_PREFIX", "PartError",
           "PartProgress", "open_dir", "open_journal", "journal_line", "run_part", "read_journal", "write_record"]

PROGRESS_PREFIX = "tfk8s.staging "
#: Characters of a progress line the trigger reads (the copier's are ~150).
PROGRESS_LINE_MAX = 4096
#: Bytes of one journal line read back (an item and its block MD5s: ~40 bytes a block).
JOURNAL_LINE_MAX = 16 << 20

_native: Any
try:  # the package's own C accelerator (built with the package; optional)
    from tfk8s_airflow.pod import _chunkcrc as _native
except ImportError:  # pragma: no cover - depends on the image
    _native = None
ENGINE = "native" if _native is not None else "python"


def _chunk_crcs(data: bytes | memoryview, bytes_per_crc: int) -> bytes:
    """The CRC engine of :class:`~tfk8s_airflow.hdfschecksum.HdfsChecksum` in this pod (:data:`ENGINE`)."""
    if _native is not None:
        return bytes(_native.chunk_crcs(data, bytes_per_crc))
    return python_chunk_crcs(data, bytes_per_crc)
class PartError(Exception):
    """The part failed; ``kind`` is ``checksum`` (the bytes do not match HDFS's checksum), ``corrupt``
    (HDFS marks a block of the file corrupt: a DataNode's CRC check failed on every replica), ``refused``
    (HDFS refused the request: a missing file, a permission; no retry helps) or ``io``."""

    def __init__(self, message: str, kind: str = "io") -> None:
        super().__init__(message)
        self.kind = kind


# ----------------------------------------------------------------------------- WebHDFS
class WebHdfs:
    """OPEN (with offset and length) and GETFILECHECKSUM, NameNodes tried in order."""

    def __init__(self, urls: list[str], user: str | None, proxy_user: str | None, timeout: float) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        self.params: dict[str, str] = {}
        if user:
            self.params["user.name"] = user
        if proxy_user:
            self.params["doas"] = proxy_user
        token = os.environ.get("TFK8S_HDFS_DELEGATION", "")
        if token:
            self.params = {"delegation": token}  # a token replaces user.name
        self.timeout = timeout

    def _request(self, path: str, op: str, **extra: Any) -> Any:
        query = urllib.parse.urlencode({"op": op, **self.params, **extra})
        failures = []
        for base in list(self.urls):
            url = f"{base}/webhdfs/v1{urllib.parse.quote(path)}?{query}"
            try:
                return urllib.request.urlopen(url, timeout=self.timeout)  # follows the DataNode redirect
            except urllib.error.HTTPError as exc:
                body = exc.read(4096).decode("utf-8", "replace")
                try:
                    remote = json.loads(body)["RemoteException"]
                    name, message = remote.get("exception", ""), remote.get("message", "")
                except (ValueError, KeyError, TypeError):
                    name, message = "", body.strip()[:300]
                if name in ("StandbyException", "RetriableException"):
                    failures.append(f"{base}: {name}")
                    continue
                kind = "checksum" if "Checksum" in name or "checksum" in message.lower() else "refused"
                raise PartError(f"HDFS refused {op} of {path}: {name or exc.code}: {message}", kind) from None
            except OSError as exc:
                failures.append(f"{base}: {exc}")
        raise PartError(f"no NameNode answered {op} of {path}: {'; '.join(failures)}")

    def open(self, path: str, offset: int, length: int) -> Any:
        return self._request(path, "OPEN", offset=offset, length=length, buffersize=1 << 20)

    def corrupt_blocks(self, path: str, offset: int, length: int) -> list[str]:
        """The blocks of the range that the NameNode marks corrupt (every replica failed a DataNode's
        CRC check); [] when it cannot tell."""
        try:
            with self._request(path, "GET_BLOCK_LOCATIONS", offset=offset, length=length) as resp:
                blocks = json.loads(resp.read())["LocatedBlocks"]["locatedBlocks"]
        except (PartError, ValueError, KeyError, TypeError, OSError):
            return []
        return [f"blk_{b['block']['blockId']} (bytes {b.get('startOffset')}-"
                f"{int(b.get('startOffset', 0)) + int(b['block'].get('numBytes', 0))})"
                for b in blocks if isinstance(b, dict) and b.get("isCorrupt")]

    def checksum(self, path: str) -> dict[str, Any]:
        with self._request(path, "GETFILECHECKSUM") as resp:
            return dict(json.loads(resp.read())["FileChecksum"])


# ----------------------------------------------------------------------------- the volume
# Every file operation below the volume goes through tfk8s_airflow.nofollow (the Airflow side's rule):
# a refusal there (a link, a special file, a second hard link) is this part's failure.
def open_dir(root: str, rel: str = "", create: bool = False) -> SafeDir:
    """The directory ``root/rel``: ``root`` itself not a link, each component below it opened without
    following one (``create``: made where missing)."""
    try:
        with SafeDir.open(root, follow=False) as base:
            return base.subdir(rel, create=create)
    except PathSafetyError as exc:
        raise PartError(str(exc)) from None


def _open_target(root: str, rel: str) -> BinaryIO:
    """The file ``root/rel`` for writing at offsets (created when missing; never through a link)."""
    with open_dir(root) as d:
        try:
            return d.open_write(rel, make_parents=True)
        except PathSafetyError as exc:
            raise PartError(f"{rel} in the staging directory: {exc}") from None


def _existing_checksum(root: str, rel: str, size: int, block: int, per_crc: int) -> dict[str, Any] | None:
    """HDFS's checksum of the complete file ``root/rel`` (a re-run's kept file), or None."""
    try:
        with open_dir(root) as d, d.open_read(rel) as fh:
            if os.fstat(fh.fileno()).st_size != size:
                return None
            summer = HdfsChecksum(block, per_crc, _chunk_crcs)
            while chunk := fh.read(4 << 20):
                summer.update(chunk)
    except (OSError, PartError, PathSafetyError):
        return None
    return compose(summer.block_md5s(), size, block, per_crc)


# ----------------------------------------------------------------------------- the part
class PartProgress:
    def __init__(self, part: int, total_bytes: int, total_items: int, interval: float = 2.0) -> None:
        self.part, self.total_bytes, self.total_items, self.interval = part, total_bytes, total_items, interval
        self.bytes = self.items = 0
        self._last = 0.0
        self._lock = threading.Lock()

    def add(self, nbytes: int, items: int = 0, force: bool = False) -> None:
        with self._lock:
            self.bytes += nbytes
            self.items += items
            now = time.monotonic()
            if not (force or now - self._last >= self.interval):
                return
            self._last = now
            print(PROGRESS_PREFIX + json.dumps({"part": self.part, "bytes": self.bytes, "items": self.items,
                                                "total_bytes": self.total_bytes,
                                                "total_items": self.total_items}), flush=True)


def read_journal(path: str) -> dict[int, dict[str, Any]]:
    done: dict[int, dict[str, Any]] = {}
    try:
        with open_dir(os.path.dirname(path)) as d:
            fh = d.open_read(os.path.basename(path))
    except FileNotFoundError:
        return done
    except PathSafetyError as exc:
        raise PartError(f"the journal {path}: {exc}") from None
    # The journal is on the shared volume: each line read bounded (tfk8s_airflow.untrusted), and one
    # that is too long, too deep or not a record ends what is resumed, as a line cut short by a kill does.
    with io.BufferedReader(cast(io.RawIOBase, fh)) as buffered:  # open_read: an unbuffered FileIO
        while line := buffered.readline(JOURNAL_LINE_MAX + 1):
            try:
                rec = untrusted.loads(line, max_bytes=JOURNAL_LINE_MAX, what=f"journal {path}")
                done[int(rec["i"])] = rec
            except (ValueError, KeyError, TypeError, OverflowError):
                break  # a line cut short by a kill: what follows is not trusted
    return done


def _hex32(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def journaled(rec: Any, i: int, items: list[dict[str, Any]], hdfs: WebHdfs) -> bool:
    """Whether the journal's line ``rec`` lets item ``i`` be skipped: a line of this part's item, of a
    copy (a kept file is checked again: its bytes are the destination's, which no checksum of the journal
    proves), with one MD5 per block of the item; of a whole file, with the checksum HDFS gives for it now
    (asked here: one request). The journal is the volume's: a line that does not hold is copied again,
    and the Airflow side compares every file's recorded checksum with HDFS's before it publishes."""
    if not (isinstance(rec, dict) and rec.get("i") == i and 0 <= i < len(items)) or rec.get("kept"):
        return False
    item = items[i]
    length, block = int(item["length"]), int(item["block_size"])
    md5s = rec.get("md5s")
    if not isinstance(md5s, list) or len(md5s) != (max(1, -(-length // block)) if length else 0) \
            or not all(_hex32(m) for m in md5s):
        return False
    if int(item["offset"]) != 0 or length != int(item["size"]):
        return "checksum" not in rec
    local = compose(md5s, int(item["size"]), block, int(item["bytes_per_crc"]))
    return rec.get("checksum") == local and checksums_match(local, hdfs.checksum(item["src"]))


def _copy_item(hdfs: WebHdfs, item: dict[str, Any], staging: str, chunk: int,
               progress: PartProgress) -> list[str]:
    """Stream one item into place and return its block MD5s."""
    block, per_crc = int(item["block_size"]), int(item["bytes_per_crc"])
    offset, length = int(item["offset"]), int(item["length"])
    summer = HdfsChecksum(block, per_crc, _chunk_crcs)
    target = _open_target(staging, item["rel"])
    fd = target.fileno()
    got = 0
    try:
        with hdfs.open(item["src"], offset, length) as resp:
            buf = bytearray(chunk)
            view = memoryview(buf)
            while got < length:
                n = resp.readinto(view[:min(chunk, length - got)])
                if not n:
                    break
                piece = view[:n]
                written = 0
                while written < n:
                    written += os.pwrite(fd, piece[written:], offset + got + written)
                summer.update(piece)
                got += n
                progress.add(n)
        if got != length:
            raise PartError(f"short read copying {item['src']}: {got} of {length} bytes at offset {offset}")
        if offset + length == int(item["size"]):
            os.ftruncate(fd, int(item["size"]))
        os.fsync(fd)
    except (OSError, ValueError, http.client.HTTPException, PartError) as exc:
        if isinstance(exc, PartError) and exc.kind != "io":
            raise
        corrupt = hdfs.corrupt_blocks(item["src"], offset, length)
        if not corrupt:  # the DataNode reports a bad replica to the NameNode as it finds it
            time.sleep(1.0)
            corrupt = hdfs.corrupt_blocks(item["src"], offset, length)
        if corrupt:  # the DataNode stopped the stream at a CRC error: no replica holds good bytes
            raise PartError(f"checksum error reading {item['src']}: HDFS marks {', '.join(corrupt)} corrupt "
                            "(the DataNode's CRC check failed on every replica)", "corrupt") from None
        if isinstance(exc, PartError):
            raise
        raise PartError(f"copying {item['src']} (bytes {offset}-{offset + length}): "
                        f"{type(exc).__name__}: {exc}") from None
    finally:
        target.close()
    return summer.block_md5s()


def copy_part(spec: dict[str, Any]) -> dict[str, Any]:
    """Copy every item of ``spec``; the part's record (raises :class:`PartError` on failure)."""
    started = time.monotonic()
    hdfs = WebHdfs(list(spec["namenodes"]), spec.get("user"), spec.get("proxy_user"),
                   float(spec.get("timeout", 30)))
    staging, dest, records = spec["staging"], spec.get("dest"), spec["records"]
    part, chunk, attempts = int(spec["part"]), int(spec.get("chunk", 4 << 20)), int(spec.get("attempts", 3))
    items = spec["items"]
    # The plan's id in the name: a journal of another plan (the listing changed) is never resumed.
    journal_path = os.path.join(records, f"part-{part}.{spec.get('plan_id', '')}.journal")
    done = {i: rec for i, rec in read_journal(journal_path).items() if journaled(rec, i, items, hdfs)}
    if done:
        print(f"part {part}: resuming, {len(done)} of {len(items)} item(s) verified by an earlier attempt",
              flush=True)
    progress = PartProgress(part, sum(int(it["length"]) for it in items), len(items))
    results: list[dict[str, Any] | None] = [None] * len(items)
    copied = [0]
    lock = threading.Lock()
    with open_journal(journal_path) as journal:
        def one(i: int) -> None:
            item = items[i]
            if i in done:  # verified by an earlier attempt of this part
                results[i] = done[i]
                progress.add(int(item["length"]), 1)
                return
            rec = _verified_item(hdfs, i, item, staging, dest, chunk, attempts, progress)
            with lock:
                if not rec.get("kept"):
                    copied[0] += int(item["length"])
                journal_line(journal, rec)
            results[i] = rec
            progress.add(0, 1)

        run_all(one, range(len(items)), int(spec.get("streams", 4)), "copy")
    progress.add(0, force=True)
    return {"part": part, "ok": True, "items": results, "copied_bytes": copied[0],
            "seconds": round(time.monotonic() - started, 3), "engine": ENGINE}


def _verified_item(hdfs: WebHdfs, i: int, item: dict[str, Any], staging: str, dest: str | None, chunk: int,
                   attempts: int, progress: PartProgress) -> dict[str, Any]:
    """One item kept (a re-run's file that matches HDFS) or copied and checked, retried ``attempts`` times."""
    whole = int(item["offset"]) == 0 and int(item["length"]) == int(item["size"])
    if whole and item.get("present") and dest:
        kept = _existing_checksum(dest, item["rel"], int(item["size"]), int(item["block_size"]),
                                  int(item["bytes_per_crc"]))
        if kept is not None and checksums_match(kept, hdfs.checksum(item["src"])):
            progress.add(int(item["length"]))
            return {"i": i, "kept": True, "checksum": kept}
    for attempt in range(1, attempts + 1):
        try:
            md5s = _copy_item(hdfs, item, staging, chunk, progress)
            rec: dict[str, Any] = {"i": i, "md5s": md5s}
            if whole:
                local = compose(md5s, int(item["size"]), int(item["block_size"]), int(item["bytes_per_crc"]))
                remote = hdfs.checksum(item["src"])
                if not checksums_match(local, remote):
                    raise PartError(f"checksum mismatch copying {item['src']}: HDFS {remote}, received {local}",
                                    "checksum")
                rec["checksum"] = local
            return rec
        except PartError as exc:
            if attempt == attempts or exc.kind in ("refused", "corrupt"):
                raise
            print(f"copying {item['src']} failed (attempt {attempt}/{attempts}): {exc}; retrying",
                  file=sys.stderr, flush=True)
            time.sleep(min(2 ** attempt, 10))
    raise PartError(f"copying {item['src']}: attempts must be at least 1, not {attempts}")


def open_journal(path: str) -> BinaryIO:
    """The part's journal, open for appending (created when missing; never through a link)."""
    with open_dir(os.path.dirname(path)) as d:
        try:
            return d.open_write(os.path.basename(path), append=True)
        except PathSafetyError as exc:
            raise PartError(f"the journal {path}: {exc}") from None


def journal_line(journal: BinaryIO, rec: dict[str, Any]) -> None:
    """One verified item appended to the journal and fsynced (a retried pod skips it)."""
    view = memoryview((json.dumps(rec) + "\n").encode("utf-8"))
    while view:  # an unbuffered write may write less than asked
        view = view[journal.write(view) or 0:]
    os.fsync(journal.fileno())


def write_record(records: str, part: int, record: dict[str, Any]) -> None:
    """The part's record, through a temporary name and a rename (never through a planted link)."""
    with open_dir(records) as d:
        try:
            d.write_atomic(f"part-{part}.json", json.dumps(record).encode("utf-8"))
        except PathSafetyError as exc:
            raise PartError(f"the record of part {part}: {exc}") from None


def run_part(kind: str, work: Callable[[dict[str, Any]], dict[str, Any]], summary: Callable[[dict[str, Any]], str],
             failed: Mapping[str, Any] | None = None) -> int:
    """A staging pod's program: its part from ``TFK8S_COPY_PART`` (JSON), ``work`` done on it, and the
    part's record written either way (``failed``'s fields added to a failure's); 2 without a part."""
    raw = os.environ.get("TFK8S_COPY_PART")
    if not raw:
        print(f"TFK8S_COPY_PART is not set: this program runs in a staging {kind} pod", file=sys.stderr)
        return 2
    spec = json.loads(raw)
    part = int(spec["part"])
    try:
        record = work(spec)
    except PartError as exc:
        print(f"part {part} failed: {exc}", file=sys.stderr, flush=True)
        write_record(spec["records"], part, {"part": part, "ok": False, "error": str(exc), "kind": exc.kind,
                                              **(failed or {})})
        return 1
    write_record(spec["records"], part, record)
    print(f"part {part}: {summary(record)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``TFK8S_COPY_PART`` (JSON): ``part``, ``namenodes``, ``user``, ``proxy_user``, ``timeout``,
    ``staging``, ``dest``, ``records``, ``chunk``, ``attempts``, ``streams`` (items copied at once,
    default 4) and ``items`` (each ``src``, ``rel``,
    ``offset``, ``length``, ``size``, ``block_size``, ``bytes_per_crc``, ``present``)."""
    return run_part("copy", copy_part, lambda r: f"{len(r['items'])} item(s), {r['copied_bytes']} bytes copied in "
                                              f"{r['seconds']}s (CRC engine {ENGINE})", {"engine": ENGINE})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
