"""The checksum fan-out of GlusterFS staging without a cluster: the plan, the pod side's rules (run here, on a
local directory standing in for the volume), the checks of the records, and the manifest it ends with."""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import DataError
from tfk8s_airflow.pod import stagesum
from tfk8s_airflow.pod.stagecopy import PartError
from tfk8s_airflow.staging import fanout, sumfanout
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.listing import FileEntry
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local
from tfk8s_airflow.staging.stage import list_volume, stage_volume

MiB = 1 << 20
log = logging.getLogger(__name__)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 600 * MiB), min_size=1, max_size=40), pods=st.integers(1, 8))
def test_checksum_plan_keeps_files_whole_and_balanced(sizes, pods):
    files = [FileEntry(f"/v/in/f{i}", f"f{i}", s) for i, s in enumerate(sizes)]
    plan = fanout.plan_parts(files, pods, whole_files=True)
    assert plan == fanout.plan_parts(files, pods, whole_files=True)
    items = [it for part in plan for it in part]
    assert sorted(it.index for it in items) == list(range(len(files)))  # every file once
    assert all(it.offset == 0 and it.length == files[it.index].size for it in items)  # whole
    loads = [sum(it.length for it in part) for part in plan]
    assert max(loads) - min(loads) <= max(sizes)


@pytest.fixture
def volume(tmp_path):
    return GlusterVolume(tmp_path, require_mounted=False)


def make_input(root: Path) -> None:
    for i, size in enumerate([3 * MiB + 5, 0, 1, 70_000, 200_000]):
        path = root / f"d{i % 2}" / f"part-{i}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    os.link(root / "d0/part-0", root / "d1/hard")


def run_pods(state, volume) -> None:
    """Each part's program, as its pod runs it (in-process, on the same directory)."""
    for spec in sumfanout.pod_specs(state, volume):
        os.environ["TFK8S_COPY_PART"] = json.dumps(spec)
        try:
            assert stagesum.main() == 0
        finally:
            del os.environ["TFK8S_COPY_PART"]


def begin(volume, root, pods=3, key="k1"):
    listing = list_volume(volume, str(root))
    return sumfanout.begin(volume, listing, 2, pods=pods, algorithm="sha256", key=key, logger=log), listing


def test_records_make_the_local_manifest(volume, tmp_path):
    root = tmp_path / "in"
    make_input(root)
    local = stage_volume(volume, str(root), 2, manifest_path=str(tmp_path / "local.json"))
    state, _ = begin(volume, root)
    run_pods(state, volume)
    outcome = sumfanout.judge(state, volume, range(len(state["plan"])))
    assert not outcome.failed and not outcome.checksum_errors and len(outcome.done) == 3
    result = sumfanout.finish(volume, state, outcome.done, log, 1.0)
    assert result == dict(local, manifest=str(root / MANIFEST_NAME))
    ours, theirs = read_local(root / MANIFEST_NAME), read_local(tmp_path / "local.json")
    ours["created"] = theirs["created"] = None
    assert ours == theirs
    assert not (tmp_path / ".in.tfk8s-parts-k1").exists()  # the records are gone


def test_a_missing_or_short_record_retries_its_part(volume, tmp_path):
    root = tmp_path / "in"
    make_input(root)
    state, _ = begin(volume, root)
    run_pods(state, volume)
    records = tmp_path / ".in.tfk8s-parts-k1"
    (records / "part-1.json").unlink()  # the pod was killed before it wrote its record
    doc = json.loads((records / "part-2.json").read_text())
    doc["items"] = doc["items"][:-1]
    (records / "part-2.json").write_text(json.dumps(doc))
    outcome = sumfanout.judge(state, volume, [0, 1, 2])
    assert sorted(outcome.done) == [0] and sorted(outcome.failed) == [1, 2] and not outcome.checksum_errors
    assert "without a record" in outcome.failed[1] and "lists" in outcome.failed[2]


def test_record_checks(volume, tmp_path):
    root = tmp_path / "in"
    make_input(root)
    state, _ = begin(volume, root, pods=1)
    run_pods(state, volume)
    files, plan = sumfanout.state_files(state), fanout.state_plan(state)
    record = json.loads((tmp_path / ".in.tfk8s-parts-k1" / "part-0.json").read_text())

    def check(rec):
        return sumfanout.check_record(0, rec, plan[0], files, state["pod_paths"], "sha256")

    assert check(record) is None
    assert check(dict(record, part=1)) == "the record is not this part's"
    assert "not 'sha256'" in check(dict(record, algorithm="md5"))
    first = record["items"][0]
    swapped = dict(record, items=[dict(first, path=record["items"][1]["path"])] + record["items"][1:])
    assert "missing from the record" in check(swapped)
    bad = dict(record, items=[dict(first, checksum=dict(first["checksum"], bytes="xyz"))] + record["items"][1:])
    assert "no valid sha256 digest" in check(bad)
    for field, value in (("size", first["size"] + 1), ("mtime", first["mtime"] + 1)):
        changed = dict(record, items=[dict(first, **{field: value})] + record["items"][1:])
        with pytest.raises(DataError, match=f"{files[plan[0][0].index].path} changed since the listing"):
            check(changed)


def test_a_file_changed_after_the_listing_fails_in_the_pod(volume, tmp_path):
    root = tmp_path / "in"
    make_input(root)
    state, _ = begin(volume, root, pods=1)
    victim = root / "d1/part-3"
    victim.write_bytes(os.urandom(70_000))  # same size, new mtime
    os.utime(victim, (1, 1))
    spec = sumfanout.pod_specs(state, volume)[0]
    with pytest.raises(PartError, match=f"{victim} changed since the listing") as err:
        stagesum.sum_part(spec)
    assert err.value.kind == "changed"
    os.environ["TFK8S_COPY_PART"] = json.dumps(spec)
    try:
        assert stagesum.main() == 1
    finally:
        del os.environ["TFK8S_COPY_PART"]
    outcome = sumfanout.judge(state, volume, [0])  # fails at once: no new pod reads another file
    assert not outcome.failed and str(victim) in outcome.checksum_errors[0]
    with pytest.raises(DataError, match=f"{victim} changed since the listing"):
        sumfanout.unchanged(volume, sumfanout.state_files(state))


@pytest.mark.parametrize("swap", ["symlink", "fifo", "dir-link", "gone"])
def test_the_pod_refuses_what_is_not_the_listed_regular_file(volume, tmp_path, swap):
    root = tmp_path / "in"
    make_input(root)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/part-2").write_bytes(b"x")
    state, _ = begin(volume, root, pods=1)
    victim = root / "d0/part-2"
    if swap == "symlink":
        victim.unlink()
        victim.symlink_to(tmp_path / "elsewhere/part-2")
    elif swap == "fifo":
        victim.unlink()
        os.mkfifo(victim)
    elif swap == "dir-link":
        (root / "d0").rename(root / "d0-moved")
        (root / "d0").symlink_to(root / "d0-moved")
    else:
        victim.unlink()
    with pytest.raises(PartError, match="refused|gone since the listing") as err:
        stagesum.sum_part(sumfanout.pod_specs(state, volume)[0])
    assert err.value.kind == "changed"


def test_a_retried_pod_resumes_from_its_journal(volume, tmp_path, capsys):
    root = tmp_path / "in"
    make_input(root)
    state, _ = begin(volume, root, pods=1)
    spec = sumfanout.pod_specs(state, volume)[0]
    first = stagesum.sum_part(spec)
    again = stagesum.sum_part(spec)  # the journal lists every file: nothing is read again
    assert "resuming, 6 of 6 file(s)" in capsys.readouterr().out
    assert again["items"] == first["items"]


def test_the_pod_digest_is_the_local_pass_digest(volume, tmp_path):
    data = os.urandom(5 * MiB + 3)
    (tmp_path / "in").mkdir()
    (tmp_path / "in/f").write_bytes(data)
    for algorithm in ("sha256", "md5"):
        local = stage_volume(volume, str(tmp_path / "in"), 1, checksum=algorithm)
        doc = read_local(local["manifest"])
        assert doc["files"][0]["checksum"] == stagesum.digest_doc(algorithm, hashlib.new(algorithm, data))


def test_the_progress_line_counts_files_for_checksum_pods():
    from tfk8s_airflow.triggers.staging import CopyPodsTrigger, progress_text

    line = progress_text(50 * MiB, 100 * MiB, 3, 9, 10.0, 2, "files")
    assert line == "staging progress: 3/9 files, 50.0/100.0 MiB (50%), 5.0 MiB/s, ETA 10s, 2 pod(s) running"
    trigger = CopyPodsTrigger(namespace="ns", key="k", pods={"0": "p"}, part_bytes={"0": 1}, part_items={"0": 1},
                              kubernetes_conn_id=None, started=0.0, unit="files")
    name, kwargs = trigger.serialize()
    assert kwargs["unit"] == "files" and CopyPodsTrigger(**kwargs).unit == "files"
    assert CopyPodsTrigger(**{k: v for k, v in kwargs.items() if k != "unit"}).unit == "items"  # an older event


def test_the_operator_refuses_bad_arguments_when_the_dag_is_parsed():
    from tfk8s_airflow.exceptions import SpecError
    from tfk8s_airflow.operators.staging import GlusterFSStageOperator

    with pytest.raises(SpecError, match="copy_executor"):
        GlusterFSStageOperator(task_id="s", input_path="in", copy_executor="pods")
    with pytest.raises(SpecError, match="checksum"):
        GlusterFSStageOperator(task_id="s", input_path="in", checksum="crc99")
    op = GlusterFSStageOperator(task_id="s", input_path="in", copy_executor="kubernetes", copy_pods=6)
    assert (op.copy_executor, op.copy_pods) == ("kubernetes", 6)


def test_the_volume_mount_itself_is_not_staged_through_pods(volume, tmp_path):
    from tfk8s_airflow.exceptions import SpecError

    (tmp_path / "f").write_bytes(b"data")
    listing = list_volume(volume, str(tmp_path))
    with pytest.raises(SpecError, match="input_path"):
        sumfanout.begin(volume, listing, 1, pods=2, algorithm="sha256", key="k", logger=log)
