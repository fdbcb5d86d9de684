"""The checksum pod of a GlusterFS staging fan-out: the digests of one part's files on the mounted volume.

Runs inside a staging pod (``python -m tfk8s_airflow.pod.stagesum``) that
:class:`tfk8s_airflow.operators.staging.GlusterFSStageOperator` creates with
``copy_executor="kubernetes"``: the data is already on the volume, so what the pods take off the
Airflow worker is the checksum pass over every byte (:mod:`tfk8s_airflow.staging.sumfanout` plans
the parts and reads what this writes). The standard library only, like the rest of the pod side.

What one pod does with its part (``TFK8S_COPY_PART``, JSON; see :func:`main`):

* **Reads** each of its files (whole files: a digest of byte ranges does not compose into the
  file's) from the volume as the pod mounts it, every directory below the mount opened without
  following a link and the file itself too (``O_NOFOLLOW``); anything but a regular file (a link,
  a FIFO, a device, a directory) is refused. A hard link is read (data the DAG named under a
  second name), as the local checksum pass does.
* **Checks the file did not change since the listing**: its size and modification time, before and
  after the read, against the plan's; a difference fails the part at once (``kind: changed``)
  naming the file. The Airflow side checks them again when it writes the manifest.
* **Digests** with :mod:`hashlib` (``sha256`` by default, ``md5``), in ``4 MiB`` reads, ``streams``
  files at a time (memory: about ``streams * 4 MiB``): :func:`digest_doc` is the manifest's
  checksum entry, the one rule for the local pass and the pods.
* **Resumes and reports** as the copy pods do (:mod:`tfk8s_airflow.pod.stagecopy`): a journal line
  per digested file (``part-<n>.<plan id>.journal``; a retried pod of the part skips those), progress
  lines on stdout for the trigger, and the part's record ``part-<n>.json`` at the end (every file's
  digest with the size and modification time it read), written to a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from typing import Any, BinaryIO

from tfk8s_airflow.exceptions import PathSafetyError
from tfk8s_airflow.pod.stagecopy import (
    PartError,
    PartProgress,
    journal_line,
    open_dir,
    open_journal,
    read_journal,
    run_part,
)
from tfk8s_airflow.threads import run_all

__all__ = ["main", "sum_part", "digest_doc", "READ_CHUNK"]

#: Bytes per read of a file being digested (the local pass reads the same).
READ_CHUNK = 4 << 20


def digest_doc(algorithm: str, digest: Any) -> dict[str, Any]:
    """A manifest's checksum entry for a finished :mod:`hashlib` digest of ``algorithm``."""
    return {"algorithm": algorithm.upper(), "bytes": digest.hexdigest(), "length": digest.digest_size}


def _changed(item: dict[str, Any], st: os.stat_result, when: str) -> str | None:
    if st.st_size != int(item["size"]):
        return f"{item['path']} changed since the listing ({when}: {st.st_size} bytes, listed {item['size']})"
    if item.get("mtime") is not None and st.st_mtime != float(item["mtime"]):
        return (f"{item['path']} changed since the listing ({when}: modified at {st.st_mtime}, "
                f"listed {item['mtime']})")
    return None


def _open_listed(root: str, item: dict[str, Any]) -> BinaryIO:
    """The listed file ``root/<rel>`` for reading: no link followed on the way or at the end, a
    regular file only (checked before it is opened, so a FIFO put there never blocks; a hard link
    is read)."""
    path = str(item["path"])
    try:
        with open_dir(root) as d:
            return d.open_read(str(item["rel"]), single_link=False)
    except FileNotFoundError:
        raise PartError(f"{path} is gone since the listing", "changed") from None
    except PathSafetyError as exc:
        raise PartError(f"{exc}: refused (not the regular file listed)", "changed") from None
    except PartError as exc:  # the volume's mount itself
        raise PartError(f"opening {path}: {exc}") from None
    except OSError as exc:
        raise PartError(f"opening {path}: {exc}") from None


def _sum_item(i: int, item: dict[str, Any], root: str, algorithm: str, progress: PartProgress) -> dict[str, Any]:
    """The digest of one listed file, with the size and modification time it was read at."""
    fh = _open_listed(root, item)
    try:
        before = os.fstat(fh.fileno())
        why = _changed(item, before, "before the read")
        if why:
            raise PartError(why, "changed")
        digest = hashlib.new(algorithm)
        got = 0
        while chunk := fh.read(READ_CHUNK):
            digest.update(chunk)
            got += len(chunk)
            progress.add(len(chunk))
        after = os.fstat(fh.fileno())
        why = _changed(item, after, "after the read") or (
            None if got == after.st_size else f"{item['path']} changed while it was read ({got} bytes read)")
        if why:
            raise PartError(why, "changed")
    except OSError as exc:
        raise PartError(f"reading {item['path']}: {exc}") from None
    finally:
        fh.close()
    return {"i": i, "path": item["path"], "size": after.st_size, "mtime": after.st_mtime,
            "checksum": digest_doc(algorithm, digest)}


def sum_part(spec: dict[str, Any]) -> dict[str, Any]:
    """Digest every file of ``spec``; the part's record (raises :class:`PartError` on failure)."""
    started = time.monotonic()
    part, root, records = int(spec["part"]), str(spec["root"]), str(spec["records"])
    algorithm = str(spec["algorithm"])
    if algorithm not in hashlib.algorithms_available:
        raise PartError(f"this image's Python has no {algorithm!r} digest", "refused")
    items = list(spec["items"])
    journal_path = os.path.join(records, f"part-{part}.{spec.get('plan_id', '')}.journal")
    done = {i: rec for i, rec in read_journal(journal_path).items()
            if 0 <= i < len(items) and isinstance(rec, dict) and rec.get("path") == items[i]["path"]}
    if done:
        print(f"part {part}: resuming, {len(done)} of {len(items)} file(s) digested by an earlier attempt",
              flush=True)
    progress = PartProgress(part, sum(int(it["size"]) for it in items), len(items))
    results: list[dict[str, Any] | None] = [None] * len(items)
    lock = threading.Lock()
    with open_journal(journal_path) as journal:
        def one(i: int) -> None:
            if i in done:
                results[i] = done[i]
                progress.add(int(items[i]["size"]), 1)
                return
            rec = _sum_item(i, items[i], root, algorithm, progress)
            with lock:
                journal_line(journal, rec)
            results[i] = rec
            progress.add(0, 1)

        run_all(one, range(len(items)), int(spec.get("streams", 4)), "sum")
    progress.add(0, force=True)
    return {"part": part, "ok": True, "items": results, "algorithm": algorithm,
            "bytes": sum(int(it["size"]) for it in items), "seconds": round(time.monotonic() - started, 3)}


def main(argv: list[str] | None = None) -> int:
    """``TFK8S_COPY_PART`` (JSON): ``part``, ``root`` (the volume's mount in the pod), ``records``,
    ``algorithm``, ``plan_id``, ``streams`` (files read at once, default 4) and ``items`` (each
    ``path`` as the pods see it, ``rel`` below ``root``, ``size``, ``mtime``)."""
    return run_part("checksum", sum_part, lambda r: f"{len(r['items'])} file(s), {r['bytes']} bytes digested "
                                                f"({r['algorithm']}) in {r['seconds']}s")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
