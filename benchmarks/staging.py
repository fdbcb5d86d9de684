"""HDFS -> GlusterFS staging throughput: the stager's copy vs HdfsCLI vs the raw paths.

    .venv/bin/python benchmarks/staging.py                      # 512 MB in 64 MB files + 500 small files
    .venv/bin/python benchmarks/staging.py --big-files 32 --small-files 2000   # the 2 GB / 2,000 setup

Needs the devstack HDFS and GlusterFS (``devstack/up hdfs gluster``). For each data set
(large files, many small files) it measures, each in its own process so peak RSS is its own:

* ``webhdfs read``  : raw WebHDFS OPEN streams, bytes discarded (the read ceiling);
* ``gluster write`` : raw writes of the same byte counts onto the mount, fsynced (the write ceiling);
* ``hdfscli``       : ``hdfscli download --threads N`` (HdfsCLI's own CLI) into the volume;
* ``stager``        : :func:`tfk8s_airflow.staging.stage_hdfs` copying into the volume
  (checksums listed, every file verified, fsynced, renamed into place, manifest written);
* ``stager rerun``  : the same again with everything present (checksums recomputed locally);
* ``stager no-verify``: a fresh copy with ``verify=False`` (no GETFILECHECKSUM per file).

All copies use the same parallelism. Ratios: stager / hdfscli and stager / the slower raw path.
The HDFS data is written once under ``/tmp/tfk8s-bench`` and reused while sizes match.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MiB = 1 << 20
HDFS_BASE = "/tmp/tfk8s-bench"


def _client(url: str, user: str):
    from hdfs import InsecureClient

    return InsecureClient(url, user=user)


def ensure_dataset(url: str, user: str, name: str, count: int, size: int) -> str:
    """``count`` files of ``size`` random bytes under HDFS_BASE/name (reused when present)."""
    client = _client(url, user)
    path = f"{HDFS_BASE}/{name}"
    existing = client.list(path, status=True) if client.status(path, strict=False) else []
    if len(existing) == count and all(s["length"] == size for _, s in existing):
        return path
    client.delete(path, recursive=True)
    client.makedirs(path)
    block = os.urandom(min(size, MiB)) if size else b""

    def gen(i: int):
        prefix = i.to_bytes(8, "big")  # files differ from each other
        left = size
        first = True
        while left > 0:
            piece = (prefix + block[8:]) if first else block
            first = False
            piece = piece[:left]
            left -= len(piece)
            yield piece

    def put(i: int) -> None:
        client.write(f"{path}/part-{i:05d}", data=gen(i) if size else b"", overwrite=True)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, range(count)))
    return path


# ----------------------------------------------------------- measurements (child side)

def m_read(args) -> dict:
    client = _client(args.url, args.user)
    files = [(f"{args.src}/{n}", s["length"]) for n, s in client.list(args.src, status=True)]
    total = 0
    lock = threading.Lock()

    def one(item):
        nonlocal total
        n = 0
        with client.read(item[0], chunk_size=MiB) as chunks:
            for chunk in chunks:
                n += len(chunk)
        with lock:
            total += n

    t = time.monotonic()
    with ThreadPoolExecutor(args.parallelism) as pool:
        list(pool.map(one, files))
    return {"bytes": total, "seconds": time.monotonic() - t}


def m_write(args) -> dict:
    client = _client(args.url, args.user)
    sizes = [s["length"] for _, s in client.list(args.src, status=True)]
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    buf = os.urandom(MiB)

    def one(i: int) -> None:
        left = sizes[i]
        with open(dest / f"w-{i:05d}", "wb", buffering=0) as fh:
            while left > 0:
                n = fh.write(buf[:min(left, MiB)])
                left -= n
            os.fsync(fh.fileno())

    t = time.monotonic()
    with ThreadPoolExecutor(args.parallelism) as pool:
        list(pool.map(one, range(len(sizes))))
    return {"bytes": sum(sizes), "seconds": time.monotonic() - t}


def m_stager(args) -> dict:
    from tfk8s_airflow.backends.glusterfs import GlusterVolume
    from tfk8s_airflow.backends.webhdfs import WebHdfs, WebHdfsConfig
    from tfk8s_airflow.staging import stage_hdfs

    hdfs = WebHdfs(WebHdfsConfig(urls=(args.url,), user=args.user, timeout=60))
    t = time.monotonic()
    res = stage_hdfs(hdfs, args.src, 4, volume=GlusterVolume(args.mount), cache_dir=args.dest,
                     parallelism=args.parallelism, verify=args.measure == "stager")
    return {"bytes": res["bytes"], "seconds": time.monotonic() - t, "copied": res["copied"]}


MEASURES = {"read": m_read, "write": m_write, "stager": m_stager, "stager-noverify": m_stager}


def child_main(args) -> None:
    out = MEASURES[args.measure](args)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


# ------------------------------------------------------------------- parent side

def run_child(cmd: list[str], env: dict | None = None) -> tuple[dict | None, float, float]:
    """Run ``cmd``; returns (its JSON output or None, wall seconds, its peak RSS in MiB)."""
    t = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    lines = out.strip().splitlines()
    data = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    return data, wall, usage.ru_maxrss / 1024


def measure(kind: str, args, src: str, dest: Path) -> dict:
    cmd = [sys.executable, __file__, "--measure", kind, "--url", args.url, "--user", args.user,
           "--src", src, "--dest", str(dest), "--mount", args.mount,
           "--parallelism", str(args.parallelism)]
    data, _wall, rss = run_child(cmd)
    assert data is not None
    data["peak_rss_mib"] = rss
    return data


def measure_hdfscli(args, src: str, dest: Path, cfg: Path, nbytes: int) -> dict:
    env = {**os.environ, "HDFSCLI_CONFIG": str(cfg)}
    hdfscli = str(Path(sys.executable).with_name("hdfscli"))
    cmd = [hdfscli, "download", "-f", "--alias", "bench", "--threads", str(args.parallelism),
           src, str(dest)]
    _, wall, rss = run_child(cmd, env)
    return {"bytes": nbytes, "seconds": wall, "peak_rss_mib": rss}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("TFK8S_WEBHDFS_URL", "http://127.0.0.1:9870"))
    p.add_argument("--user", default=os.environ.get("TFK8S_HDFS_USER", "tfk8s"))
    p.add_argument("--mount", default=os.environ.get("TFK8S_GLUSTER_MOUNT", "/mnt/tfk8s-gluster"))
    p.add_argument("--big-files", type=int, default=8, help="number of large files (default 8)")
    p.add_argument("--big-mb", type=int, default=64, help="size of a large file in MB (64)")
    p.add_argument("--small-files", type=int, default=500, help="number of small files (500)")
    p.add_argument("--small-kb", type=int, default=256, help="size of a small file in KB (256)")
    p.add_argument("--parallelism", type=int, default=4)
    p.add_argument("--measure", choices=sorted(MEASURES), help=argparse.SUPPRESS)
    p.add_argument("--src", help=argparse.SUPPRESS)
    p.add_argument("--dest", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        child_main(args)
        return

    from tfk8s_airflow.checksums import ENGINE

    work = Path(args.mount) / "tfk8s-bench"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tmp = Path(tempfile.mkdtemp(prefix="tfk8s-bench-"))
    cfg = tmp / "hdfscli.cfg"
    cfg.write_text(f"[global]\ndefault.alias = bench\n\n[bench.alias]\nurl = {args.url}\n"
                   f"user = {args.user}\n")
    sets = [("large", args.big_files, args.big_mb * MiB),
            ("small", args.small_files, args.small_kb * 1024)]
    rows = []
    try:
        for name, count, size in sets:
            if count <= 0:
                continue
            print(f"preparing {name}: {count} x {size / MiB:.2f} MiB on HDFS ...", file=sys.stderr)
            src = ensure_dataset(args.url, args.user, f"{name}-{count}x{size}", count, size)
            nbytes = count * size
            results = {}
            for label, fn in [
                ("webhdfs read", lambda: measure("read", args, src, work / "unused")),
                ("gluster write", lambda: measure("write", args, src, work / f"{name}-raw")),
                ("hdfscli download", lambda: measure_hdfscli(args, src, work / f"{name}-hdfscli",
                                                             cfg, nbytes)),
                ("stager copy", lambda: measure("stager", args, src, work / f"{name}-stager")),
                ("stager rerun", lambda: measure("stager", args, src, work / f"{name}-stager")),
                ("stager no-verify", lambda: measure("stager-noverify", args, src,
                                                     work / f"{name}-noverify")),
            ]:
                print(f"  {name}: {label} ...", file=sys.stderr)
                os.sync()  # start each measurement without the previous one's dirty pages
                time.sleep(1)
                results[label] = fn()
                results[label]["mib_s"] = results[label]["bytes"] / MiB / results[label]["seconds"]
                for d in (work / f"{name}-raw", work / f"{name}-hdfscli", work / f"{name}-noverify"):
                    if label != "stager copy":
                        shutil.rmtree(d, ignore_errors=True)
            slower_raw = min(results["webhdfs read"]["mib_s"], results["gluster write"]["mib_s"])
            rows.append((name, count, size, nbytes, results, slower_raw))
            shutil.rmtree(work / f"{name}-stager", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nHDFS -> GlusterFS, parallelism {args.parallelism}, CRC32C engine {ENGINE}")
    print(f"{'data set':<26}{'method':<18}{'MiB/s':>9}{'seconds':>9}{'peak RSS MiB':>14}"
          f"{'vs hdfscli':>12}{'vs slower raw':>15}")
    for name, count, size, nbytes, results, slower_raw in rows:
        desc = f"{name}: {count} x {size / MiB:.2f} MiB"
        base = results["hdfscli download"]["mib_s"]
        for label, r in results.items():
            vs_cli = f"{r['mib_s'] / base:.2f}x" if label.startswith("stager") else ""
            vs_raw = f"{r['mib_s'] / slower_raw:.0%}" if label.startswith("stager") else ""
            print(f"{desc:<26}{label:<18}{r['mib_s']:>9.1f}{r['seconds']:>9.2f}"
                  f"{r['peak_rss_mib']:>14.1f}{vs_cli:>12}{vs_raw:>15}")
            desc = ""
    print("\nstager rerun: every file already present (checksums looked up and recomputed locally)."
          "\nstager no-verify: verify=False, sizes only, no GETFILECHECKSUM per file.")


if __name__ == "__main__":
    main()
