"""HDFS -> GlusterFS staging throughput: the stager's copy vs HdfsCLI vs the raw paths.

    .venv/bin/python benchmarks/staging.py                      # 512 MB in 64 MB files + 500 small files
    .venv/bin/python benchmarks/staging.py --big-files 32 --small-files 2000   # the 2 GB / 2,000 setup

Needs the devstack HDFS and GlusterFS (``devstack/up hdfs gluster``). For each data set
(large files, many small files) it measures, each in its own process so peak RSS is its own:

* ``webhdfs read``  : raw WebHDFS OPEN streams with plain urllib3, bytes discarded (the
  read ceiling);
* ``gluster write`` : raw writes of the same byte counts onto the mount, fsynced (the write ceiling);
* ``hdfscli``       : ``hdfscli download --threads N`` (HdfsCLI's own CLI) into the volume;
* ``raw copy``      : the two together, nothing else: each OPEN stream written to a file on
  the mount and fsynced (what a copy costs this machine before any bookkeeping);
* ``stager copy``   : :func:`tfk8s_airflow.staging.stage.stage_hdfs` with its defaults
  (``verify="stream"``: every file's HDFS checksum computed from the stream, lengths
  checked, fsynced, written in a hidden directory renamed into place, manifest written);
* ``stager hdfs``   : the same with ``verify="hdfs"`` (each copied file's checksum also
  compared with HDFS's ``GETFILECHECKSUM``: one more request per file);
* ``stager rerun``  : the default again with everything present (HDFS's checksum looked up
  and the local file's recomputed, per file);
* ``pods N``        : with ``--pods 1,2,4``, the copy as a fan-out of N copy pods
  (``copy_executor="kubernetes"``: :mod:`tfk8s_airflow.staging.fanout` on the Airflow side,
  :mod:`tfk8s_airflow.pod.stagecopy` in pods on the devstack's real node, in the training image,
  reading WebHDFS at the host's name and writing the GlusterFS mount); needs ``devstack/up k8s
  node`` too (``TFK8S_TRAINING_IMAGE`` and the registry's auth file from ``devstack/env node``).
  The Airflow side (list, plan, create the pods, wait polling once a second as the trigger does,
  read the records, verify, publish, manifest) runs in the measured process.

``--gluster-sums 1,2,4`` measures :class:`GlusterFSStageOperator`'s checksum pass instead (no HDFS
needed): the same data sets written once onto the GlusterFS mount, then ``sums local``
(:func:`tfk8s_airflow.staging.stage.stage_volume`, sha256 on ``--parallelism`` threads of the task's
process) against ``sums pods N`` (``copy_executor="kubernetes"``: :mod:`tfk8s_airflow.staging.sumfanout`
on the Airflow side, :mod:`tfk8s_airflow.pod.stagesum` in N pods on the real node), each with the Airflow
side's CPU and peak RSS, the median of ``--rounds``, interleaved.

With ``--pods`` every copier also prints a JSON line ``{"set", "method", "pods", "mib_s",
"airflow_cpu_s", "airflow_peak_rss_mib"}``: ``airflow_cpu_s`` is the CPU (user + system, all
threads) the task's process spent in the staging call itself (interpreter start and imports
excluded, the same for every method), ``airflow_peak_rss_mib`` the process's peak RSS.

All copies use the same parallelism and are timed the same way, as the wall time of their
process (interpreter start and imports included); the raw paths time their loop only.
Every method runs ``--rounds`` times, interleaved with the others, after a warm-up read
(the first requests after a NameNode start run several times slower while its JIT warms
up); the median is reported. Ratios: stager / hdfscli and stager / the slower raw path.
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

def _raw(args, write: bool) -> dict:
    """OPEN streams with the leanest client (urllib3, following the redirects itself), in
    1 MiB reads; the bytes discarded, or written to a file on the mount and fsynced."""
    import urllib3

    client = _client(args.url, args.user)
    names = [n for n, _ in client.list(args.src, status=True)]
    dest = Path(args.dest)
    if write:
        dest.mkdir(parents=True, exist_ok=True)
    pool = urllib3.PoolManager(maxsize=args.parallelism * 2)
    total = 0
    lock = threading.Lock()

    def one(name: str) -> None:
        nonlocal total
        r = pool.request("GET", f"{args.url}/webhdfs/v1{args.src}/{name}?op=OPEN&"
                         f"user.name={args.user}", preload_content=False)
        n = 0
        with open(dest / name if write else os.devnull, "wb", buffering=0) as fh:
            while chunk := r.read(MiB):
                if write:
                    view = memoryview(chunk)
                    while view:
                        view = view[fh.write(view):]
                n += len(chunk)
            if write:
                os.fsync(fh.fileno())
        r.release_conn()
        with lock:
            total += n

    t = time.monotonic()
    with ThreadPoolExecutor(args.parallelism) as threads:
        list(threads.map(one, names))
    return {"bytes": total, "seconds": time.monotonic() - t}


def m_read(args) -> dict:
    """The read ceiling: bytes discarded."""
    return _raw(args, write=False)


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


def m_rawcopy(args) -> dict:
    """The copy ceiling: each stream written to the mount and fsynced, nothing else."""
    return _raw(args, write=True)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def m_stager(args) -> dict:
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.stage import stage_hdfs
    from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

    hdfs = WebHdfs(WebHdfsConfig(urls=(args.url,), user=args.user, timeout=60))
    t, cpu = time.monotonic(), _cpu()
    res = stage_hdfs(hdfs, args.src, 4, volume=GlusterVolume(args.mount), cache_dir=args.dest,
                     parallelism=args.parallelism,
                     verify="hdfs" if args.measure == "stager-hdfs" else "stream")
    return {"bytes": res["bytes"], "seconds": time.monotonic() - t, "copied": res["copied"],
            "airflow_cpu_s": _cpu() - cpu}


def m_pods(args) -> dict:
    """The Airflow side of a pod copy, synchronously (the operator defers instead of polling)."""
    import logging
    from urllib.parse import urlsplit

    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from tfk8s_airflow.k8s import copypods
    from tfk8s_airflow.staging import fanout
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

    k8s_config.load_kube_config()
    api = k8s.CoreV1Api()
    # Pods reach the host at its name (the real node's CoreDNS resolves it to the bridge address).
    parts = urlsplit(args.url)
    url = f"{parts.scheme}://{args.host_name}:{parts.port or 9870}"
    hdfs = WebHdfs(WebHdfsConfig(urls=(url,), user=args.user, timeout=60))
    volume = GlusterVolume(args.mount)
    settings = fanout.CopySettings(image=_image(), namespace=args.namespace, pods=args.pods,
                                   cpu=args.pod_cpu, pod_template=_NODE_PODS)
    log = logging.getLogger("bench")
    t, cpu = time.monotonic(), _cpu()
    key = f"bench{os.getpid()}"
    state = fanout.begin(hdfs, volume, args.src, 4, cache_dir=args.dest, manifest_path=None, pattern=None,
                         include_hidden=False, parallelism=args.parallelism, pods=args.pods, key=key, logger=log)
    state["started"] = time.time()
    specs = fanout.state_specs(state, volume, hdfs.config, 4 << 20)
    pods = [fanout.copy_pod(copypods.pod_name(key, k, 0), {copypods.LABEL_STAGING: key}, spec, settings,
                            str(volume.mount), str(volume.pod_mount), ({}, {}))
            for k, spec in enumerate(specs)]
    copypods.create(api, pods)
    _wait_pods(api, args.namespace, key, {p["metadata"]["name"] for p in pods})
    outcome = fanout.judge(state, volume, list(range(len(specs))))
    if outcome.failed or outcome.checksum_errors:
        raise SystemExit(f"pod copy failed: {outcome.failed} {outcome.checksum_errors}")
    res = fanout.finish(hdfs, volume, state, outcome.done, log, time.monotonic() - t)
    copypods.delete_all(api, args.namespace, key)
    return {"bytes": res["bytes"], "seconds": time.monotonic() - t, "copied": res["copied"],
            "airflow_cpu_s": _cpu() - cpu, "engine": sorted(outcome.engines)}


def m_sums_local(args) -> dict:
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.stage import stage_volume

    t, cpu = time.monotonic(), _cpu()
    res = stage_volume(GlusterVolume(args.mount), args.src, 4, parallelism=args.parallelism)
    return {"bytes": res["bytes"], "seconds": time.monotonic() - t, "airflow_cpu_s": _cpu() - cpu}


def m_sums_pods(args) -> dict:
    """The Airflow side of a checksum fan-out, synchronously (the operator defers instead of polling)."""
    import logging

    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from tfk8s_airflow.k8s import copypods
    from tfk8s_airflow.staging import fanout, sumfanout
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.stage import list_volume

    k8s_config.load_kube_config()
    api = k8s.CoreV1Api()
    volume = GlusterVolume(args.mount)
    settings = fanout.CopySettings(image=_image(), namespace=args.namespace, pods=args.pods,
                                   cpu=args.pod_cpu, pod_template=_NODE_PODS)
    log = logging.getLogger("bench")
    t, cpu = time.monotonic(), _cpu()
    key = f"bench{os.getpid()}"
    state = sumfanout.begin(volume, list_volume(volume, args.src), 4, pods=args.pods, algorithm="sha256", key=key,
                            logger=log)
    pods = [fanout.copy_pod(copypods.pod_name(key, k, 0), {copypods.LABEL_STAGING: key}, spec, settings,
                            str(volume.mount), str(volume.pod_mount), ({}, {}), program=sumfanout.PROGRAM)
            for k, spec in enumerate(sumfanout.pod_specs(state, volume))]
    copypods.create(api, pods)
    _wait_pods(api, args.namespace, key, {p["metadata"]["name"] for p in pods})
    outcome = sumfanout.judge(state, volume, list(range(len(pods))))
    if outcome.failed or outcome.checksum_errors:
        raise SystemExit(f"checksum pods failed: {outcome.failed} {outcome.checksum_errors}")
    res = sumfanout.finish(volume, state, outcome.done, log, time.monotonic() - t)
    copypods.delete_all(api, args.namespace, key)
    return {"bytes": res["bytes"], "seconds": time.monotonic() - t, "airflow_cpu_s": _cpu() - cpu}


#: The devstack's real node: its label and the toleration of its taint.
_NODE_PODS = {"nodeSelector": {"tfk8s.io/real-node": "true"},
              "tolerations": [{"key": "tfk8s.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]}


def _image() -> str:
    image = os.environ.get("TFK8S_TRAINING_IMAGE")
    if not image:
        raise SystemExit('TFK8S_TRAINING_IMAGE is not set: eval "$(devstack/env node)" first')
    return image


def _wait_pods(api, namespace: str, key: str, names: set[str]) -> None:
    from tfk8s_airflow.k8s import copypods

    while True:  # one LIST a second, as the trigger polls
        phases = {p.metadata.name: p.status.phase for p in
                  api.list_namespaced_pod(namespace, label_selector=f"{copypods.LABEL_STAGING}={key}").items}
        if all(phases.get(n) in ("Succeeded", "Failed") for n in names):
            return
        time.sleep(1.0)


MEASURES = {"read": m_read, "write": m_write, "rawcopy": m_rawcopy, "stager": m_stager,
            "stager-hdfs": m_stager, "pods": m_pods, "sums-local": m_sums_local, "sums-pods": m_sums_pods}


def _vm_hwm_mib() -> float:
    """This process's own peak RSS (``VmHWM``; ``ru_maxrss`` on Linux keeps the parent's across fork and exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_main(args) -> None:
    out = MEASURES[args.measure](args)
    out["peak_rss_mib"] = _vm_hwm_mib()
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


def measure(kind: str, args, src: str, dest: Path, pods: int = 0) -> dict:
    cmd = [sys.executable, __file__, "--measure", kind, "--url", args.url, "--user", args.user,
           "--src", src, "--dest", str(dest), "--mount", args.mount,
           "--parallelism", str(args.parallelism), "--namespace", args.namespace or "",
           "--host-name", args.host_name, "--pod-count", str(pods), "--pod-cpu", args.pod_cpu]
    data, wall, _ = run_child(cmd)
    assert data is not None  # its peak_rss_mib is its own VmHWM
    if kind.startswith(("stager", "sums")) or kind == "pods":
        data["seconds"] = wall  # like hdfscli's: the whole process, start-up included
    return data


def measure_hdfscli(args, src: str, dest: Path, cfg: Path, nbytes: int) -> dict:
    env = {**os.environ, "HDFSCLI_CONFIG": str(cfg)}
    hdfscli = str(Path(sys.executable).with_name("hdfscli"))
    cmd = [hdfscli, "download", "-f", "--alias", "bench", "--threads", str(args.parallelism),
           src, str(dest)]
    _, wall, rss = run_child(cmd, env)
    return {"bytes": nbytes, "seconds": wall, "peak_rss_mib": rss}


def _median_run(runs: list[dict]) -> dict:
    """The run with the median time (its own peak RSS), plus its MiB/s."""
    run = dict(sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2])
    run["mib_s"] = run["bytes"] / MiB / run["seconds"]
    return run


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
    p.add_argument("--rounds", type=int, default=3,
                   help="measure every method this many times, interleaved; report the median (3)")
    p.add_argument("--pods", default="", help="also copy through N copy pods, for each N of a list "
                   "such as 1,2,4 (needs the devstack's k8s and real node)")
    p.add_argument("--pod-cpu", default="250m",
                   help="each pod's CPU request ([tfk8s] staging_pod_cpu; default 250m, so that 4 pods fit the "
                   "devstack's 2-CPU real node at once: at 1 CPU the third and fourth would wait)")
    p.add_argument("--host-name", default=os.environ.get("TFK8S_NODE_HOST_NAME") or os.uname().nodename,
                   help="the host's name as pods resolve it (the real node's CoreDNS maps it to the host address)")
    p.add_argument("--methods", default="", help="only the methods whose names start with one of these "
                   "(comma-separated, e.g. 'raw copy,hdfscli,stager copy,pods')")
    p.add_argument("--gluster-sums", default="", help="measure GlusterFSStageOperator's checksum pass instead: "
                   "locally and through N checksum pods, for each N of a list such as 1,2,4")
    p.add_argument("--namespace", default="", help=argparse.SUPPRESS)
    p.add_argument("--pod-count", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--measure", choices=sorted(MEASURES), help=argparse.SUPPRESS)
    p.add_argument("--src", help=argparse.SUPPRESS)
    p.add_argument("--dest", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        args.pods = args.pod_count
        child_main(args)
        return
    if args.gluster_sums:
        gluster_sums(args, [int(n) for n in args.gluster_sums.split(",") if n.strip()])
        return
    pod_counts = [int(n) for n in args.pods.split(",") if n.strip()]
    if pod_counts:
        args.namespace = _bench_namespace()

    from tfk8s_airflow.staging.checksums import ENGINE

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
            print(f"  {name}: warm-up read (not reported) ...", file=sys.stderr)
            measure("read", args, src, work / "unused")  # the JVM's JIT, HDFS's caches
            runs: dict[str, list[dict]] = {}
            for rnd in range(1, args.rounds + 1):
                for label, fn in [
                    ("webhdfs read", lambda: measure("read", args, src, work / "unused")),
                    ("gluster write", lambda: measure("write", args, src, work / f"{name}-raw")),
                    ("raw copy", lambda: measure("rawcopy", args, src, work / f"{name}-raw")),
                    ("hdfscli download", lambda: measure_hdfscli(
                        args, src, work / f"{name}-hdfscli", cfg, nbytes)),
                    ("stager copy", lambda: measure("stager", args, src, work / f"{name}-stager")),
                    ("stager rerun", lambda: measure("stager", args, src,
                                                     work / f"{name}-stager")),
                    ("stager hdfs", lambda: measure("stager-hdfs", args, src,
                                                    work / f"{name}-hdfs")),
                    *[(f"pods {n}", lambda n=n: measure("pods", args, src, work / f"{name}-pods{n}", n))
                      for n in pod_counts],
                ]:
                    wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
                    if wanted and not label.startswith(tuple(wanted)) and label != "webhdfs read" \
                            and label != "gluster write":
                        continue
                    print(f"  {name} round {rnd}/{args.rounds}: {label} ...", file=sys.stderr)
                    os.sync()  # start each measurement without the previous one's dirty pages
                    time.sleep(1)
                    runs.setdefault(label, []).append(fn())
                    for d in (work / f"{name}-raw", work / f"{name}-hdfscli",
                              work / f"{name}-hdfs", *[work / f"{name}-pods{n}" for n in pod_counts]):
                        shutil.rmtree(d, ignore_errors=True)
                    if label == "stager rerun":
                        shutil.rmtree(work / f"{name}-stager", ignore_errors=True)
            results = {label: _median_run(rs) for label, rs in runs.items()}
            for label in ("raw copy", "hdfscli download"):  # the ratios' bases, measured or not
                results.setdefault(label, {"bytes": nbytes, "seconds": float("nan"), "mib_s": float("nan"),
                                           "peak_rss_mib": float("nan")})
            slower_raw = min(results["webhdfs read"]["mib_s"], results["gluster write"]["mib_s"])
            rows.append((name, count, size, nbytes, results, slower_raw))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        if pod_counts:
            _drop_namespace(args.namespace)

    print(f"\nHDFS -> GlusterFS, parallelism {args.parallelism}, CRC32C engine {ENGINE}, "
          f"median of {args.rounds} interleaved round(s) after a warm-up read")
    print(f"{'data set':<26}{'method':<18}{'MiB/s':>9}{'seconds':>9}{'peak RSS MiB':>14}"
          f"{'vs hdfscli':>12}{'vs slower raw':>15}{'vs raw copy':>13}")
    for name, count, size, _nbytes, results, slower_raw in rows:
        desc = f"{name}: {count} x {size / MiB:.2f} MiB"
        base = results["hdfscli download"]["mib_s"]
        raw_copy = results["raw copy"]["mib_s"]
        for label, r in results.items():
            ours = label.startswith(("stager", "pods"))
            vs_cli = f"{r['mib_s'] / base:.2f}x" if ours else ""
            vs_raw = f"{r['mib_s'] / slower_raw:.0%}" if ours else ""
            copier = label.startswith(("stager", "hdfscli", "pods"))
            vs_copy = f"{r['mib_s'] / raw_copy:.0%}" if copier else ""
            print(f"{desc:<26}{label:<18}{r['mib_s']:>9.1f}{r['seconds']:>9.2f}"
                  f"{r['peak_rss_mib']:>14.1f}{vs_cli:>12}{vs_raw:>15}{vs_copy:>13}")
            desc = ""
    print("\nstager copy: verify='stream' (the default); stager hdfs: verify='hdfs'; stager rerun:"
          "\nthe default with every file already present (checksums looked up and recomputed);"
          "\npods N: copy_executor='kubernetes' with N copy pods (every file compared with HDFS's checksum).")
    if pod_counts:
        print()
        for name, _count, _size, _nbytes, results, _slower in rows:
            for label, r in results.items():
                if label.startswith(("stager copy", "pods")):
                    print(json.dumps({"set": name, "method": "pods" if label.startswith("pods") else "local",
                                      "pods": int(label.split()[1]) if label.startswith("pods") else 0,
                                      "mib_s": round(r["mib_s"], 1), "airflow_cpu_s": round(r["airflow_cpu_s"], 3),
                                      "airflow_peak_rss_mib": round(r["peak_rss_mib"], 1)}))


def gluster_sums(args, pod_counts: list[int]) -> None:
    """The checksum pass of files already on the volume: in the task's process vs N checksum pods."""
    args.namespace = _bench_namespace()
    work = Path(args.mount) / "tfk8s-bench-sums"
    shutil.rmtree(work, ignore_errors=True)
    rows = []
    try:
        for name, count, size in (("large", args.big_files, args.big_mb * MiB),
                                  ("small", args.small_files, args.small_kb * 1024)):
            if count <= 0:
                continue
            src = work / name
            src.mkdir(parents=True)
            print(f"preparing {name}: {count} x {size / MiB:.2f} MiB on the volume ...", file=sys.stderr)
            for i in range(count):
                (src / f"part-{i:05d}").write_bytes(os.urandom(size))
            os.sync()
            runs: dict[str, list[dict]] = {}
            for rnd in range(1, args.rounds + 1):
                for label, kind, n in [("sums local", "sums-local", 0),
                                       *[(f"sums pods {n}", "sums-pods", n) for n in pod_counts]]:
                    print(f"  {name} round {rnd}/{args.rounds}: {label} ...", file=sys.stderr)
                    time.sleep(1)
                    runs.setdefault(label, []).append(measure(kind, args, str(src), work / "unused", n))
            rows.append((name, count, size, {label: _median_run(rs) for label, rs in runs.items()}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        _drop_namespace(args.namespace)
    print(f"\nGlusterFS checksum pass (sha256), parallelism {args.parallelism} locally, median of {args.rounds} "
          "interleaved round(s)")
    print(f"{'data set':<26}{'method':<16}{'MiB/s':>9}{'seconds':>9}{'vs local':>10}{'Airflow CPU s':>15}"
          f"{'Airflow RSS MiB':>17}")
    for name, count, size, results in rows:
        desc = f"{name}: {count} x {size / MiB:.2f} MiB"
        base = results["sums local"]["mib_s"]
        for label, r in results.items():
            print(f"{desc:<26}{label:<16}{r['mib_s']:>9.1f}{r['seconds']:>9.2f}{r['mib_s'] / base:>9.2f}x"
                  f"{r['airflow_cpu_s']:>15.2f}{r['peak_rss_mib']:>17.1f}")
            desc = ""


def _bench_namespace() -> str:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    k8s_config.load_kube_config()
    name = f"tfk8s-bench-{os.getpid()}"
    core = k8s.CoreV1Api()
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    for _ in range(60):  # the ServiceAccount admission wants the default account first
        try:
            core.read_namespaced_service_account("default", name)
            break
        except k8s.exceptions.ApiException:
            time.sleep(0.5)
    auth = os.environ.get("TFK8S_REGISTRY_AUTH_FILE")
    if auth:  # the registry's pull secret, named by the namespace's default ServiceAccount
        import base64

        with open(auth, "rb") as f:
            data = base64.b64encode(f.read()).decode()
        core.create_namespaced_secret(name, k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name="tfk8s-registry"), type="kubernetes.io/dockerconfigjson",
            data={".dockerconfigjson": data}))
        core.patch_namespaced_service_account("default", name, {"imagePullSecrets": [{"name": "tfk8s-registry"}]})
    return name


def _drop_namespace(name: str) -> None:
    from kubernetes import client as k8s

    core = k8s.CoreV1Api()
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    core.delete_namespace(name)


if __name__ == "__main__":
    main()
