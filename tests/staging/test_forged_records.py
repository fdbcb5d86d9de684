"""Records on the volume are not HDFS's word: real HDFS and the real GlusterFS volume, no pods.

A staging copy through pods ends with each part's record on the shared volume (``part-<n>.json``),
which anyone who may write the volume may have written. Here the test plays the copy pods' part
by hand: it plans a 6-file partition of the devstack's HDFS with the operator's own code
(:func:`tfk8s_airflow.staging.fanout.begin`), puts each file's bytes in the staging directory and
writes each part's record, then runs the Airflow side's :func:`~tfk8s_airflow.staging.fanout.judge`
and :func:`~tfk8s_airflow.staging.fanout.finish`. Honest records publish the partition with one
``GETFILECHECKSUM`` per file; a forged whole-file record (other bytes, and the checksum of those
bytes, as a pod would have recorded them) is refused before anything is published, naming the file.
Before the fix a whole file's checksum was the record's alone: the forged copy was published.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from tests.fixtures.data import hdfs_md5_crc_checksum
from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.hdfschecksum import DEFAULT_BYTES_PER_CRC
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.manifest import MANIFEST_NAME
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.hdfs, pytest.mark.gluster, pytest.mark.timeout(180)]
MiB = 1 << 20
SIZES = [300_000, 150_000, 90_000, 40_000, 7_000, 0]
_log = logging.getLogger(__name__)


class CountingHdfs(WebHdfs):
    """The package's WebHDFS client, counting the checksum requests it makes."""

    def __init__(self, config: WebHdfsConfig) -> None:
        super().__init__(config)
        self.asked: list[str] = []

    def checksum(self, path: str, datanode: str | None = None) -> dict:
        self.asked.append(path)
        return super().checksum(path, datanode)


@pytest.fixture
def partition(hdfs_server, hdfs_dir, gluster_dir):
    client = hdfs_server.client()
    data = {}
    for i, size in enumerate(SIZES):
        name = f"sub{i % 2}/part-{i:05d}"
        data[name] = os.urandom(size)
        client.write(f"{hdfs_dir}/{name}", data=data[name], overwrite=True, blocksize=MiB)
    hdfs = CountingHdfs(WebHdfsConfig(urls=(hdfs_server.url,), user=hdfs_server.user))
    volume = GlusterVolume(gluster_dir.parent.parent)
    cache = gluster_dir / "cache"
    state = fanout.begin(hdfs, volume, hdfs_dir, 2, cache_dir=str(cache), manifest_path=None, pattern=None,
                         include_hidden=False, parallelism=2, pods=2, key="t37", logger=_log)
    return hdfs, volume, state, data, cache


def play_the_pods(state: dict, data: dict[str, bytes], forged: str | None = None) -> None:
    """What the copy pods leave: every file in the staging directory and each part's record (whole
    files: their checksum). ``forged``: that file's bytes are others of the same size, and its record
    holds their checksum."""
    files, dest = fanout.state_files(state), Path(state["dest"])
    staging, records = fanout.pods_staging_dir(dest, state["key"]), fanout.records_dir(dest, state["key"])
    for part, items in enumerate(fanout.state_plan(state)):
        recs = []
        for n, item in enumerate(items):
            entry = files[item.index]
            assert (item.offset, item.length) == (0, entry.size)  # whole files: each one part's
            body = data[entry.relpath]
            if entry.relpath == forged:  # other bytes of the same size: only a checksum tells them apart
                body = bytes(b ^ 0xFF for b in body)
            (staging / entry.relpath).parent.mkdir(parents=True, exist_ok=True)
            (staging / entry.relpath).write_bytes(body)
            checksum = hdfs_md5_crc_checksum(body, entry.block_size or MiB, DEFAULT_BYTES_PER_CRC)
            recs.append({"i": n, "md5s": [], "checksum": checksum})
        (records / f"part-{part}.json").write_text(json.dumps(
            {"part": part, "ok": True, "items": recs, "copied_bytes": 0, "seconds": 0.1, "engine": "python"}))


def judge_and_finish(hdfs, volume, state) -> dict:
    outcome = fanout.judge(state, volume, list(range(len(state["plan"]))))
    assert not outcome.failed and not outcome.checksum_errors, outcome
    return fanout.finish(hdfs, volume, state, outcome.done, _log, 1.0)


def test_honest_records_publish_with_one_hdfs_checksum_per_file(partition):
    hdfs, volume, state, data, cache = partition
    play_the_pods(state, data)
    judge_and_finish(hdfs, volume, state)
    assert sorted(hdfs.asked) == sorted(f[0] for f in state["files"])  # every file, once
    assert len(hdfs.asked) == len(SIZES)
    for rel, body in data.items():
        assert (cache / rel).read_bytes() == body
    assert (cache / MANIFEST_NAME).exists()


def test_forged_whole_file_record_is_refused_before_publish(partition):
    hdfs, volume, state, data, cache = partition
    forged = "sub1/part-00003"
    play_the_pods(state, data, forged=forged)
    with pytest.raises(StagingError, match=rf"checksum mismatch copying \S+/{forged}: HDFS .*record of part \d"):
        judge_and_finish(hdfs, volume, state)
    assert not cache.exists()  # nothing published: neither the files nor a manifest


def test_copy_pod_resumes_only_journal_lines_hdfs_confirms(partition):
    """The copy pod's side (:func:`tfk8s_airflow.pod.stagecopy.journaled`, against the real NameNode): a
    journal line planted for a whole file with another checksum, a line of a kept file, or one of the
    wrong shape is not resumed (the pod copies that item again); the pod's own line is."""
    from tfk8s_airflow.hdfschecksum import HdfsChecksum, compose, python_chunk_crcs
    from tfk8s_airflow.pod import stagecopy

    hdfs, _, state, data, _ = partition
    pod_hdfs = stagecopy.WebHdfs([hdfs.config.urls[0]], hdfs.config.user, None, 30.0)
    files = fanout.state_files(state)
    items = [fanout.Item(i, 0, f.size).spec(f) for i, f in enumerate(files)]
    i = next(n for n, f in enumerate(files) if f.size > 0)
    md5s = HdfsChecksum(items[i]["block_size"], DEFAULT_BYTES_PER_CRC, python_chunk_crcs)
    md5s.update(data[files[i].relpath])
    own = {"i": i, "md5s": md5s.block_md5s()}
    own["checksum"] = compose(own["md5s"], files[i].size, items[i]["block_size"], DEFAULT_BYTES_PER_CRC)
    assert stagecopy.journaled(own, i, items, pod_hdfs)

    other = bytes(b ^ 0xFF for b in data[files[i].relpath])
    forged = HdfsChecksum(items[i]["block_size"], DEFAULT_BYTES_PER_CRC, python_chunk_crcs)
    forged.update(other)
    planted = {"i": i, "md5s": forged.block_md5s(), "checksum": forged.result()}
    assert not stagecopy.journaled(planted, i, items, pod_hdfs)  # HDFS says otherwise: copied again
    assert not stagecopy.journaled({**own, "kept": True}, i, items, pod_hdfs)  # a kept file is checked again
    assert not stagecopy.journaled({**own, "md5s": own["md5s"] * 2}, i, items, pod_hdfs)
    assert not stagecopy.journaled({**own, "i": i + 1}, i, items, pod_hdfs)
    assert not stagecopy.journaled(own, len(items), items, pod_hdfs)


def test_a_planted_journal_line_does_not_skip_the_copy(partition):
    """The copy pod's program itself (:func:`tfk8s_airflow.pod.stagecopy.copy_part`, run in this process
    against the real NameNode and the real volume; the pod around it adds nothing to this): a line planted
    in part 0's journal for its first file, with another file's bytes' checksum, used to make the pod skip
    that file and record the planted checksum. Now the file is copied and its record holds HDFS's checksum."""
    from tfk8s_airflow.hdfschecksum import HdfsChecksum, checksums_match, python_chunk_crcs
    from tfk8s_airflow.pod import stagecopy

    hdfs, volume, state, data, _ = partition
    spec = fanout.state_specs(state, volume, hdfs.config, chunk_size=MiB)[0]
    first = spec["items"][0]
    assert (first["offset"], first["length"]) == (0, first["size"]) and first["size"] > 0
    other = HdfsChecksum(first["block_size"], DEFAULT_BYTES_PER_CRC, python_chunk_crcs)
    other.update(bytes(b ^ 0xFF for b in data[first["rel"]]))  # a line as the pod writes it, of other bytes
    journal = Path(spec["records"]) / f"part-0.{spec['plan_id']}.journal"
    journal.write_text(json.dumps({"i": 0, "md5s": other.block_md5s(), "checksum": other.result()}) + "\n")

    record = stagecopy.copy_part(spec)
    assert checksums_match(record["items"][0]["checksum"], hdfs.checksum(first["src"]))
    assert (Path(spec["staging"]) / first["rel"]).read_bytes() == data[first["rel"]]
