"""HDFS staging on the devstack: listing, manifest, shards, the verified resumable copy onto
GlusterFS, and each failure's specific error (with no manifest left behind)."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfk8s_airflow.exceptions import DataError, HdfsUnavailableError, PathSafetyError, SpecError, StagingError
from tfk8s_airflow.hdfschecksum import checksums_match
from tfk8s_airflow.staging.checksums import file_checksum
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.hdfscopy import PARTIAL_SUFFIX, staging_dir
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local
from tfk8s_airflow.staging.stage import stage_hdfs
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.hdfs, pytest.mark.gluster]
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def webhdfs(server, timeout: float = 10.0, urls=None) -> WebHdfs:
    return WebHdfs(WebHdfsConfig(urls=tuple(urls or [server.url]), user=server.user,
                                 timeout=timeout))


def write_partition(client, base: str, sizes: list[int], seed: int = 7,
                    small_blocks: int = 0) -> dict[str, int]:
    """Files of the given sizes (random bytes) under base/, some nested, some written with a
    1 MiB block size so multi-block checksums are exercised; plus a _SUCCESS marker."""
    rng = random.Random(seed)
    out = {}
    for i, size in enumerate(sizes):
        path = f"{base}/{'sub/' if i % 5 == 4 else ''}part-{i:05d}"
        kwargs = {"blocksize": MiB} if i < small_blocks else {}
        client.write(path, data=rng.randbytes(size), overwrite=True, **kwargs)
        out[path] = size
    client.write(f"{base}/_SUCCESS", data=b"", overwrite=True)
    return out


def uneven_sizes(n: int, seed: int = 3) -> list[int]:
    rng = random.Random(seed)
    sizes = [int(rng.paretovariate(1.2) * 20_000) for _ in range(n)]
    return [min(s, 3 * MiB) for s in sizes[:-2]] + [0, 3 * MiB + 123]


def no_partials(root: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(PARTIAL_SUFFIX)]


def test_uneven_partition_staged_and_copied_byte_identical(hdfs_server, hdfs_dir, gluster_dir):
    client = hdfs_server.client()
    part = f"{hdfs_dir}/clicks/dt=2026-01-01"
    written = write_partition(client, part, uneven_sizes(45), small_blocks=3)
    hdfs = webhdfs(hdfs_server)
    volume = GlusterVolume(gluster_dir.parent.parent)
    cache = gluster_dir / "cache"

    result = stage_hdfs(hdfs, f"{hdfs_dir}/clicks/dt=2026-01-*", 4, volume=volume,
                        cache_dir=str(cache), parallelism=3)

    manifest = read_local(result["manifest"])
    assert result["manifest"] == str(cache / MANIFEST_NAME)
    assert manifest["total_files"] == len(written) == result["files"] == result["copied"]
    listed = {f["source"]: f for f in manifest["files"]}
    assert set(listed) == set(written)  # every file, _SUCCESS excluded
    for src, entry in listed.items():
        assert entry["size"] == written[src]
        assert checksums_match(entry["checksum"], client.checksum(src))
        local = Path(entry["path"])
        assert local == cache / "dt=2026-01-01" / Path(src).relative_to(part)
        assert local.stat().st_size == written[src]
        # byte-identical: HDFS's own checksum recomputed from the bytes on the volume
        status = client.status(src)
        assert checksums_match(file_checksum(local, block_size=status["blockSize"]),
                               client.checksum(src))
    sample = sorted(written)[5]
    with client.read(sample) as reader:
        assert Path(listed[sample]["path"]).read_bytes() == reader.read()
    # shards: every file exactly once, byte totals within the stated bound
    shard_paths = [p for paths in result["shards"].values() for p in paths]
    assert sorted(shard_paths) == sorted(f["path"] for f in manifest["files"])
    loads = result["shard_bytes"].values()
    assert max(loads) - min(loads) <= result["imbalance_bound"] == max(written.values())
    assert manifest["shards"] == result["shards"]
    assert not no_partials(cache)

    mtimes = {p: os.stat(p).st_mtime_ns for p in shard_paths}
    again = stage_hdfs(hdfs, f"{hdfs_dir}/clicks/dt=2026-01-*", 4, volume=volume,
                       cache_dir=str(cache), parallelism=3)
    assert again["copied"] == 0 and again["skipped"] == len(written)
    assert again["shards"] == result["shards"]  # deterministic
    assert {p: os.stat(p).st_mtime_ns for p in shard_paths} == mtimes  # nothing rewritten


def test_changed_file_in_cache_is_copied_again(hdfs_server, hdfs_dir, gluster_dir):
    client = hdfs_server.client()
    write_partition(client, f"{hdfs_dir}/p", [1000, 2000, 3000])
    hdfs, volume = webhdfs(hdfs_server), GlusterVolume(gluster_dir.parent.parent)
    cache = gluster_dir / "c"
    stage_hdfs(hdfs, f"{hdfs_dir}/p", 2, volume=volume, cache_dir=str(cache))
    victim = cache / "part-00001"
    victim.write_bytes(b"x" * 2000)  # same size, different bytes: the checksum catches it
    res = stage_hdfs(hdfs, f"{hdfs_dir}/p", 2, volume=volume, cache_dir=str(cache))
    assert res["copied"] == 1 and res["skipped"] == 2
    with client.read(f"{hdfs_dir}/p/part-00001") as reader:
        assert victim.read_bytes() == reader.read()


CHILD = textwrap.dedent("""
    import sys, time
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig
    from tfk8s_airflow.staging.stage import stage_hdfs

    class SlowHdfs(WebHdfs):  # slow the stream down so the test can kill it midway
        def open_chunks(self, path, chunk_size=1 << 20, offset=0):
            inner = super().open_chunks(path, chunk_size=chunk_size, offset=offset)
            class Slow:
                def __enter__(s):
                    chunks = inner.__enter__()
                    def gen():
                        for c in chunks:
                            time.sleep(0.15)
                            yield c
                    return gen()
                def __exit__(s, *a):
                    return inner.__exit__(*a)
            return Slow()

    url, user, src, mount, cache = sys.argv[1:6]
    hdfs = SlowHdfs(WebHdfsConfig(urls=(url,), user=user, timeout=10))
    stage_hdfs(hdfs, src, 3, volume=GlusterVolume(mount), cache_dir=cache, parallelism=2,
               chunk_size=256 * 1024)
""")


@pytest.mark.parametrize("first_copy", [True, False], ids=["first-copy", "into-filled-cache"])
def test_interrupted_copy_restarts_and_completes_without_partials(hdfs_server, hdfs_dir,
                                                                  gluster_dir, first_copy):
    """A first copy is written in a hidden staging directory that becomes the cache only
    when complete; a copy into a cache that already holds files writes each file under a
    partial name. Either way a kill leaves nothing half-written under a final name, and a
    rerun resumes (keeps what was complete) and finishes."""
    client = hdfs_server.client()
    written = write_partition(client, f"{hdfs_dir}/big", [2 * MiB + i * 1000 for i in range(10)])
    mount, cache = gluster_dir.parent.parent, gluster_dir / "cache"
    if not first_copy:
        cache.mkdir()
        (cache / "README").write_text("kept\n")
    where = staging_dir(cache) if first_copy else cache
    child = subprocess.Popen([sys.executable, "-c", CHILD, hdfs_server.url, hdfs_server.user,
                              f"{hdfs_dir}/big", str(mount), str(cache)], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120

    sizes = {path.rsplit("/", 1)[1]: size for path, size in written.items()}

    def complete() -> list[Path]:  # files at their full size (a killed one is cut short)
        return [p for p in where.rglob("part-*") if p.stat().st_size == sizes.get(p.name)]

    while time.monotonic() < deadline and child.poll() is None:
        if len(complete()) >= 2:
            break
        time.sleep(0.05)
    assert child.poll() is None, child.stdout.read().decode()[-3000:]
    child.send_signal(signal.SIGKILL)  # kill the copy midway
    child.wait(30)
    child.stdout.close()
    assert 2 <= len(complete()) < len(written)
    if first_copy:
        assert not cache.exists()  # nothing of an incomplete first copy is visible
    else:
        finals = [p for p in cache.rglob("part-*") if not p.name.endswith(PARTIAL_SUFFIX)]
        assert 2 <= len(finals) < len(written)
        assert no_partials(cache), "a partial file should be left by the kill"
        for path in finals:  # whatever carries a final name is whole
            assert path.stat().st_size == sizes[path.name]
    assert not (cache / MANIFEST_NAME).exists()  # incomplete data never has a manifest

    result = stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/big", 3,
                        volume=GlusterVolume(mount), cache_dir=str(cache), parallelism=2)
    assert result["skipped"] >= 2 and result["copied"] == len(written) - result["skipped"]
    assert not no_partials(cache) and not staging_dir(cache).exists()
    assert (cache / "README").exists() != first_copy
    manifest = read_local(cache / MANIFEST_NAME)
    assert len(manifest["files"]) == len(written)
    for entry in manifest["files"]:
        assert checksums_match(file_checksum(entry["path"]), client.checksum(entry["source"]))


def test_missing_partition(hdfs_server, hdfs_dir, gluster_dir):
    with pytest.raises(DataError, match=r"HDFS input does not exist: .*/clicks/dt=2026-02-30"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/clicks/dt=2026-02-30", 2,
                   volume=GlusterVolume(gluster_dir.parent.parent), cache_dir=str(gluster_dir))
    assert not (gluster_dir / MANIFEST_NAME).exists()


def test_empty_partition(hdfs_server, hdfs_dir, gluster_dir):
    client = hdfs_server.client()
    client.makedirs(f"{hdfs_dir}/empty/sub")
    client.write(f"{hdfs_dir}/empty/_SUCCESS", data=b"")
    with pytest.raises(DataError, match=r"is empty: no data files"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/empty", 2,
                   volume=GlusterVolume(gluster_dir.parent.parent), cache_dir=str(gluster_dir))
    with pytest.raises(DataError, match=r"is empty: no data files matching '\*.tfrecord'"):
        write_partition(client, f"{hdfs_dir}/csv", [10])
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/csv", 2, pattern="*.tfrecord",
                   manifest_path=f"hdfs://{hdfs_dir}/m.json")
    assert not (gluster_dir / MANIFEST_NAME).exists()
    assert client.status(f"{hdfs_dir}/m.json", strict=False) is None


def test_permission_denied_carries_the_hdfs_message(hdfs_server, hdfs_dir, gluster_dir):
    root = hdfs_server.superclient()
    root.makedirs(f"{hdfs_dir}/secret/dt=1")
    root.write(f"{hdfs_dir}/secret/dt=1/part-0", data=b"x" * 100)
    root.set_permission(f"{hdfs_dir}/secret", "700")
    with pytest.raises(DataError, match=r"permission denied by HDFS .* as user tfk8s: "
                                        r"Permission denied: user=tfk8s"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/secret/dt=1", 2,
                   volume=GlusterVolume(gluster_dir.parent.parent), cache_dir=str(gluster_dir))
    assert not (gluster_dir / MANIFEST_NAME).exists()


@pytest.mark.parametrize("kwargs,match", [
    ({"cache_dir": "/etc/tfk8s-cache"}, "outside the allowed roots"),
    ({"cache_dir": "{mount}/tfk8s-tests/../../etc"}, "'..' segment"),
    ({"input_path": "{hdfs_dir}/../../data"}, "'..' segment"),
    ({"cache_dir": "{gluster_dir}/link/x"}, "outside the volume"),
])
def test_path_traversal_refused_before_anything(hdfs_server, hdfs_dir, gluster_dir, kwargs, match):
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [10])
    (gluster_dir / "link").symlink_to("/tmp")
    mount = gluster_dir.parent.parent
    args = {"input_path": f"{hdfs_dir}/p", "cache_dir": str(gluster_dir / "c")}
    args.update({k: v.format(mount=mount, hdfs_dir=hdfs_dir, gluster_dir=gluster_dir)
                 for k, v in kwargs.items()})
    volume = GlusterVolume(mount, roots=[gluster_dir.relative_to(mount)])
    with pytest.raises(PathSafetyError, match=match):
        stage_hdfs(webhdfs(hdfs_server), args.pop("input_path"), 2, volume=volume, **args)
    assert not list(gluster_dir.rglob(MANIFEST_NAME))


@pytest.mark.serial  # it stops the NameNode every HDFS test uses
def test_namenode_down_names_the_urls_tried(hdfs_server, hdfs_dir, gluster_dir):
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [10])
    dead = "http://127.0.0.1:9"
    hdfs = webhdfs(hdfs_server, timeout=3, urls=[dead, hdfs_server.url])
    with hdfs_server.stopped():
        started = time.monotonic()
        with pytest.raises(HdfsUnavailableError) as err:
            stage_hdfs(hdfs, f"{hdfs_dir}/p", 2, volume=GlusterVolume(gluster_dir.parent.parent),
                       cache_dir=str(gluster_dir))
        assert time.monotonic() - started < 30  # bounded: no endless probing
    assert dead in str(err.value) and hdfs_server.url in str(err.value)
    assert "no WebHDFS NameNode answered" in str(err.value)
    assert not (gluster_dir / MANIFEST_NAME).exists()


def test_ha_first_namenode_dead_second_serves(hdfs_server, hdfs_dir):
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [10, 20])

    class Conn:  # what Airflow's Connection offers
        host, port, login = "127.0.0.1", 9, hdfs_server.user
        extra_dejson = {"namenodes": [hdfs_server.url.split("://")[1]], "timeout": 5}

    cfg = WebHdfsConfig.from_connection(Conn())
    assert cfg.urls == ("http://127.0.0.1:9", hdfs_server.url)
    res = stage_hdfs(WebHdfs(cfg), f"{hdfs_dir}/p", 1, manifest_path=f"hdfs://{hdfs_dir}/m.json")
    doc = json.loads(WebHdfs(cfg).read_bytes(f"{hdfs_dir}/m.json"))
    assert res["files"] == 2 and doc["shards"] == {"worker-0": [f"{hdfs_dir}/p/part-00001",
                                                                f"{hdfs_dir}/p/part-00000"]}


def test_manifest_required_without_cache(hdfs_server, hdfs_dir):
    with pytest.raises(SpecError, match="manifest_path"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 2)


def test_a_local_manifest_path_is_confined_like_cache_dir(hdfs_server, hdfs_dir, gluster_dir, tmp_path):
    """Without a cache, a local manifest_path (a form's value) may only name a file on the volume under its
    roots: a worker file outside it, or a link planted on the volume, is refused before anything is written."""
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [10, 20])
    victim = tmp_path / "airflow.cfg"
    victim.write_text("[core]\n")
    with pytest.raises(PathSafetyError, match="manifest_path"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 1, manifest_path=str(victim))  # no volume given
    (gluster_dir / "planted").symlink_to(tmp_path)
    with pytest.raises(PathSafetyError, match="manifest_path"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 1, manifest_path=str(gluster_dir / "planted" / "airflow.cfg"))
    assert victim.read_text() == "[core]\n"
    res = stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 1, manifest_path=str(gluster_dir / "m.json"))
    assert res["files"] == 2 and read_local(gluster_dir / "m.json")["files"]


def test_a_name_hdfs_takes_is_staged_and_updated_though_its_partial_name_would_be_too_long(
        hdfs_server, hdfs_dir, gluster_dir):
    """HDFS takes a 250-byte name. Updated in place, a file is written as ``.<name>.tfk8s-partial`` first:
    265 bytes, more than a file name may have, which was a raw OSError (ENAMETOOLONG). Such a file's
    partial name is now a digest of its name; both the first copy and the update arrive whole."""
    client = hdfs_server.client()
    long_name = "x" * 250
    client.write(f"{hdfs_dir}/p/{long_name}", data=b"first", overwrite=True)
    client.write(f"{hdfs_dir}/p/short", data=b"def", overwrite=True)
    volume, cache = GlusterVolume(gluster_dir.parent.parent), gluster_dir / "c"
    stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 1, volume=volume, cache_dir=str(cache))
    assert (cache / long_name).read_bytes() == b"first"
    client.write(f"{hdfs_dir}/p/{long_name}", data=b"second, longer", overwrite=True)
    res = stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 1, volume=volume, cache_dir=str(cache))
    assert res["copied"] == 1 and (cache / long_name).read_bytes() == b"second, longer"
    assert sorted(p.name for p in cache.iterdir()) == sorted([long_name, "short", MANIFEST_NAME])


def test_verify_off_records_the_streamed_checksum(hdfs_server, hdfs_dir, gluster_dir):
    client = hdfs_server.client()
    written = write_partition(client, f"{hdfs_dir}/p", [0, 700, 3 * MiB + 1], small_blocks=3)
    res = stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 2,
                     volume=GlusterVolume(gluster_dir.parent.parent),
                     cache_dir=str(gluster_dir / "c"), verify=False)
    assert res["copied"] == len(written)
    for entry in read_local(res["manifest"])["files"]:  # what HDFS would have reported
        assert checksums_match(entry["checksum"], client.checksum(entry["source"]))


class CountingHdfs(WebHdfs):
    """Counts checksum lookups (and whether each named the DataNode of its read)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lookups: list[str | None] = []

    def checksum(self, path, datanode=None):
        self.lookups.append(datanode)
        return super().checksum(path, datanode)


class CorruptingHdfs(CountingHdfs):
    """A transfer that flips one byte of every file. A boundary fake: a real DataNode
    cannot be made to corrupt bytes after its own CRC check."""

    def open_chunks(self, path, chunk_size=1 << 20, offset=0):
        inner = super().open_chunks(path, chunk_size=chunk_size, offset=offset)

        class Flip:
            def __enter__(s):
                chunks = inner.__enter__()

                def gen():
                    first = True
                    for c in chunks:
                        yield (bytes([c[0] ^ 1]) + c[1:]) if first and c else c
                        first = False
                return gen()

            def __exit__(s, *a):
                return inner.__exit__(*a)
        return Flip()


def counting(server, cls=CountingHdfs):
    return cls(WebHdfsConfig(urls=(server.url,), user=server.user, timeout=10))


@pytest.mark.parametrize("level,first,rerun", [("stream", 0, 4), ("hdfs", 4, 4), ("size", 0, 0)])
def test_verify_levels_lookups(hdfs_server, hdfs_dir, gluster_dir, level, first, rerun):
    """What each level asks HDFS: ``stream`` only for files already cached, ``hdfs`` for
    every copied file too (of the DataNode that served its read), ``size`` never."""
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [10, 70_000, 300_000, 1])
    volume, cache = GlusterVolume(gluster_dir.parent.parent), str(gluster_dir / "c")
    hdfs = counting(hdfs_server)
    assert stage_hdfs(hdfs, f"{hdfs_dir}/p", 2, volume=volume, cache_dir=cache,
                      verify=level)["copied"] == 4
    assert len(hdfs.lookups) == first and all(hdfs.lookups)  # each named its DataNode
    hdfs = counting(hdfs_server)
    assert stage_hdfs(hdfs, f"{hdfs_dir}/p", 2, volume=volume, cache_dir=cache,
                      verify=level)["skipped"] == 4
    assert len(hdfs.lookups) == rerun


def test_verify_hdfs_catches_a_corrupted_transfer(hdfs_server, hdfs_dir, gluster_dir):
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [5000])
    cache = gluster_dir / "c"
    with pytest.raises(StagingError, match="checksum mismatch copying .*part-00000"):
        stage_hdfs(counting(hdfs_server, CorruptingHdfs), f"{hdfs_dir}/p", 1,
                   volume=GlusterVolume(gluster_dir.parent.parent), cache_dir=str(cache),
                   verify="hdfs")
    assert not cache.exists() and not list(gluster_dir.rglob("part-*"))


def test_verify_stream_corruption_is_caught_by_the_next_run(hdfs_server, hdfs_dir, gluster_dir):
    """The trade of ``stream``: a transfer corrupted past TCP's checks is recorded as
    received, and the next run, comparing the cache with HDFS, copies that file again."""
    client = hdfs_server.client()
    write_partition(client, f"{hdfs_dir}/p", [5000, 6000])
    volume, cache = GlusterVolume(gluster_dir.parent.parent), str(gluster_dir / "c")
    stage_hdfs(counting(hdfs_server, CorruptingHdfs), f"{hdfs_dir}/p", 1, volume=volume,
               cache_dir=cache, verify="stream")
    res = stage_hdfs(counting(hdfs_server), f"{hdfs_dir}/p", 1, volume=volume, cache_dir=cache)
    assert res["copied"] == 2 and res["skipped"] == 0
    for entry in read_local(res["manifest"])["files"]:
        with client.read(entry["source"]) as reader:
            assert Path(entry["path"]).read_bytes() == reader.read()


@pytest.mark.parametrize("bad", ["crc", "", 1, None])
def test_bad_verify_value_fails_first(hdfs_server, hdfs_dir, gluster_dir, bad):
    from tfk8s_airflow.operators.staging import HdfsStageOperator

    with pytest.raises(SpecError, match=r"verify.*'hdfs', 'stream', 'size'"):
        HdfsStageOperator(task_id="stage", input_path="/data", verify=bad)
    with pytest.raises(SpecError, match=r"verify"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/nowhere", 1,
                   volume=GlusterVolume(gluster_dir.parent.parent),
                   cache_dir=str(gluster_dir / "c"), verify=bad)
    assert not (gluster_dir / "c").exists()


def test_symlink_in_the_cache_cannot_lead_the_copy_out(hdfs_server, hdfs_dir, gluster_dir,
                                                       tmp_path):
    """A cache that already holds files may hold a link: a subdirectory the copy needs
    that is a link is refused (never followed) before any file is written through it."""
    write_partition(hdfs_server.client(), f"{hdfs_dir}/p", [10, 20, 30, 40, 50])  # 5th: sub/
    cache = gluster_dir / "c"
    cache.mkdir()
    (cache / "README").write_text("kept\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (cache / "sub").symlink_to(outside)
    with pytest.raises(PathSafetyError, match=r"c/sub is a symbolic link \(to .*elsewhere\)"):
        stage_hdfs(webhdfs(hdfs_server), f"{hdfs_dir}/p", 2,
                   volume=GlusterVolume(gluster_dir.parent.parent), cache_dir=str(cache))
    assert not list(outside.iterdir()) and not (cache / MANIFEST_NAME).exists()
