"""The pure parts of staging through copy pods: the plan, the pod-side checksum, the settings, the
pod spec, and the checks of what a pod reports."""
from __future__ import annotations

import hashlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.hdfschecksum import HdfsChecksum, checksums_match, compose
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.pod import stagecopy
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.staging.checksums import hdfs_md5_crc_checksum
from tfk8s_airflow.staging.listing import FileEntry

MiB = 1 << 20
BLOCK = 4 * MiB


def entries(sizes, block=BLOCK):
    return [FileEntry(f"/data/p/part-{i:03d}", f"part-{i:03d}", s, None, block) for i, s in enumerate(sizes)]


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(0, 3 * BLOCK), st.integers(0, 40 * BLOCK)), min_size=1, max_size=40),
       pods=st.integers(1, 8), present=st.sets(st.integers(0, 39)))
def test_plan_covers_every_byte_once_and_cuts_only_at_block_boundaries(sizes, pods, present):
    files = entries(sizes)
    present = frozenset(i for i in present if i < len(files))
    plan = fanout.plan_parts(files, pods, present)
    assert 1 <= len(plan) <= pods and all(plan)
    assert plan == fanout.plan_parts(files, pods, present)  # deterministic
    covered: dict[int, list[tuple[int, int]]] = {}
    for items in plan:
        for it in items:
            covered.setdefault(it.index, []).append((it.offset, it.length))
            assert it.offset % BLOCK == 0  # each piece starts on a block: its block MD5s are HDFS's
    for i, f in enumerate(files):
        ranges = sorted(covered[i])
        assert ranges[0][0] == 0 and sum(n for _, n in ranges) == f.size
        assert all(a + n == b for (a, n), (b, _) in zip(ranges, ranges[1:], strict=False))
        if i in present:
            assert ranges == [(0, f.size)]  # a kept file is checked whole by one pod
    loads = [sum(it.length for it in items) for items in plan]
    largest_item = max(it.length for items in plan for it in items)
    assert max(loads) - min(loads) <= largest_item  # balanced by bytes, within the largest piece


def test_large_files_are_split_into_parallel_parts():
    plan = fanout.plan_parts(entries([64 * MiB, 1 * MiB]), 4)
    assert len(plan) == 4
    assert sorted(sum(it.length for it in items) for items in plan)[-1] <= 20 * MiB


@pytest.mark.parametrize("native", [True, False])
def test_pod_checksum_of_pieces_composes_to_hdfs(monkeypatch, native):
    if not native:
        monkeypatch.setattr(stagecopy, "_native", None)
    data = os.urandom(3 * 64 * 1024 + 700)
    block = 64 * 1024
    md5s: list[str] = []
    for start in range(0, len(data), 2 * block):  # two pieces of two blocks, then the rest
        summer = HdfsChecksum(block, 512, stagecopy._chunk_crcs)
        piece = data[start:start + 2 * block]
        for i in range(0, len(piece), 1000):  # any chunking
            summer.update(piece[i:i + 1000])
        md5s += summer.block_md5s()
    composed = compose(md5s, len(data), block, 512)
    assert checksums_match(composed, hdfs_md5_crc_checksum(data, block))
    single = HdfsChecksum(block, 512)
    single.update(data)
    assert single.result() == composed
    assert checksums_match(compose([], 0, block, 512), hdfs_md5_crc_checksum(b"", block))
    changed = bytearray(data)
    changed[5] ^= 1
    assert not checksums_match(composed, hdfs_md5_crc_checksum(bytes(changed), block))


def test_settings_from_the_deployment_and_errors_that_name_them():
    got = fanout.CopySettings.from_settings({"staging_image": "reg/tfk8s:0.2", "staging_pods": "8",
                                             "staging_threshold": "2Gi", "staging_pod_memory": "512Mi",
                                             "staging_pod_template": '{"nodeSelector": {"a": "b"}}'}.get)
    assert (got.image, got.pods, got.threshold, got.memory) == ("reg/tfk8s:0.2", 8, 2 * 2**30, "512Mi")
    assert got.pod_template == {"nodeSelector": {"a": "b"}}
    assert fanout.CopySettings.from_settings({}.get) == fanout.CopySettings()
    for name, bad in (("staging_pods", "0"), ("staging_threshold", "lots"), ("staging_pod_template", "[1]")):
        with pytest.raises(SpecError, match=rf"\[tfk8s\] {name}"):
            fanout.CopySettings.from_settings({name: bad}.get)


def test_choose_executor():
    s = fanout.CopySettings(image="img", threshold=100)
    assert fanout.choose_executor("auto", 99, s) == "local"
    assert fanout.choose_executor("auto", 100, s) == "kubernetes"
    assert fanout.choose_executor("auto", 10**9, s) == "kubernetes"  # Kerberos or not: a delegation token
    assert fanout.choose_executor("auto", 10**9, fanout.CopySettings(image="")) == "local"
    assert fanout.choose_executor("local", 10**9, s) == "local"
    with pytest.raises(SpecError, match="staging_image"):
        fanout.choose_executor("kubernetes", 1, fanout.CopySettings(image=""))
    assert fanout.choose_executor("kubernetes", 1, s) == "kubernetes"
    with pytest.raises(SpecError, match="copy_executor"):
        fanout.choose_executor("celery", 1, s)


def test_copy_pod_is_bounded_and_admitted_by_the_policy():
    policy = DeploymentPolicy(gluster_mount="/mnt/vol")
    sc = policy.pod_security(None)[:2]
    settings_ = fanout.CopySettings(image="img", memory="300Mi", pod_template={"env": [{"name": "X", "value": "1"}]})
    pod = fanout.copy_pod("p", {"l": "v"}, {"part": 0, "user": "etl"}, settings_, "/mnt/vol", "/data", sc)
    spec = pod["spec"]
    (c,) = spec["containers"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert c["resources"]["limits"] == {"memory": "300Mi"} and c["command"][-1] == "tfk8s_airflow.pod.stagecopy"
    assert [e["name"] for e in c["env"]] == ["TFK8S_COPY_PART", "PYTHONUNBUFFERED", "X"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert policy._template({"spec": spec}, "staging", lambda p: p) == []
    outside = fanout.copy_pod("p", {}, {}, settings_, "/etc", "/data", sc)
    problems = policy._template({"spec": outside["spec"]}, "staging", lambda p: p)
    assert problems and "outside the allowed host paths" in problems[0].message


def _record(plan, files, part, **changes):
    items = []
    for i, it in enumerate(plan[part]):
        blocks = max(1, -(-it.length // BLOCK)) if it.length else 0
        items.append({"i": i, "md5s": [hashlib.md5(bytes([i, b])).hexdigest() for b in range(blocks)]})
    return {"part": part, "ok": True, "items": items, **changes}


def test_a_record_must_match_its_part():
    files = entries([9 * MiB, 1 * MiB, 100])
    plan = fanout.plan_parts(files, 2)
    good = _record(plan, files, 0)
    assert fanout.check_record(0, good, plan[0], files) is None
    assert "not this part" in fanout.check_record(1, good, plan[1], files)
    short = dict(good, items=good["items"][:-1])
    assert "items" in fanout.check_record(0, short, plan[0], files)
    bad_md5 = dict(good, items=[dict(good["items"][0], md5s=["zz"])] + good["items"][1:])
    assert "block MD5s" in fanout.check_record(0, bad_md5, plan[0], files)
    bad_checksum = dict(good, items=[{"i": 0, "checksum": {"algorithm": 1}}] + good["items"][1:])
    assert "checksum" in fanout.check_record(0, bad_checksum, plan[0], files)


def test_progress_line_for_the_task_log():
    from tfk8s_airflow.triggers.staging import _last_progress, progress_text

    log = "x\n" + stagecopy.PROGRESS_PREFIX + '{"bytes": 5, "items": 1}\nnoise\n'
    assert _last_progress(log) == {"bytes": 5, "items": 1}
    assert _last_progress("nothing") is None
    text = progress_text(50 * MiB, 100 * MiB, 10, 20, 10.0, 4)
    assert text == ("staging progress: 10/20 items, 50.0/100.0 MiB (50%), 5.0 MiB/s, ETA 10s, "
                    "4 pod(s) running")


def _staged(tmp_path, key, sizes):
    """A pod copy of ``sizes`` verified in its staging directory (what the pods leave), prepared under tmp_path."""
    files = [FileEntry(f"/data/p/part-{i}", f"sub/part-{i}", s, None, BLOCK) for i, s in enumerate(sizes)]
    dest = tmp_path / "cache"
    prepared = fanout.prepare(files, dest, key, tmp_path)
    stage = fanout.pods_staging_dir(dest, key)
    (stage / "sub").mkdir()
    for f in files:
        (stage / f.relpath).write_bytes(b"x" * f.size)
    return prepared, files, dest


def test_a_fresh_cache_appears_with_its_manifest_in_one_rename(tmp_path, monkeypatch):
    """No moment shows the published files without their manifest: it is in the staging directory
    when that is renamed to the cache."""
    prepared, files, dest = _staged(tmp_path, "k1", [3, 5])
    seen = []
    real_replace = fanout.SafeDir.replace

    def replace(self, src, dst):  # what the published name holds the moment it appears
        out = real_replace(self, src, dst)
        seen.append(sorted(os.listdir(dest)))
        return out

    monkeypatch.setattr(fanout.SafeDir, "replace", replace)
    assert fanout.publish(prepared, files, frozenset(), tmp_path, ("_tfk8s_manifest.json", {"files": 2})) is True
    assert seen == [["_tfk8s_manifest.json", "sub"]]
    assert (dest / "_tfk8s_manifest.json").read_text().startswith("{")
    assert not fanout.pods_staging_dir(dest, "k1").exists() and not fanout.records_dir(dest, "k1").exists()


def test_into_a_cache_that_holds_files_the_manifest_is_left_to_be_written_last(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "other").write_bytes(b"kept")
    prepared, files, dest = _staged(tmp_path, "k2", [4])
    assert fanout.publish(prepared, files, frozenset(), tmp_path, ("_tfk8s_manifest.json", {"files": 1})) is False
    assert sorted(os.listdir(dest)) == ["other", "sub"]
