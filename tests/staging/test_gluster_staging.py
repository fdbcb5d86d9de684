"""Staging files already on the GlusterFS volume; the path safety rules on the real mount."""
from __future__ import annotations

import os

import pytest

from tfk8s_airflow.exceptions import DataError, MissingInputError, PathSafetyError
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local
from tfk8s_airflow.staging.stage import stage_volume

pytestmark = pytest.mark.gluster


@pytest.fixture
def volume(gluster_dir):
    mount = gluster_dir.parent.parent
    return GlusterVolume(mount, roots=[gluster_dir.relative_to(mount)], pod_mount="/data")


def test_glob_partitions_sharded_with_pod_paths(volume, gluster_dir):
    for day in ("dt=2026-01-01", "dt=2026-01-02", "dt=2026-02-01"):
        (gluster_dir / day / "nested").mkdir(parents=True)
        for i in range(3):
            (gluster_dir / day / f"part-{i}.csv").write_bytes(b"a" * (100 + i))
        (gluster_dir / day / "nested" / "part-9.csv").write_bytes(b"b" * 50)
        (gluster_dir / day / "_SUCCESS").write_bytes(b"")
        (gluster_dir / day / ".hidden.csv").write_bytes(b"c")
    res = stage_volume(volume, f"{gluster_dir}/dt=2026-01-*", 2, pattern="*.csv")
    rel = gluster_dir.relative_to(volume.mount)
    assert res["files"] == 8
    paths = sorted(p for ps in res["shards"].values() for p in ps)
    assert all(p.startswith(f"/data/{rel}/dt=2026-01-0") for p in paths)
    assert f"/data/{rel}/dt=2026-01-02/nested/part-9.csv" in paths
    manifest = read_local(gluster_dir / MANIFEST_NAME)
    assert manifest["location"]["pod_root"] == f"/data/{rel}"
    assert {f["size"] for f in manifest["files"]} == {100, 101, 102, 50}


def test_missing_and_empty_inputs(volume, gluster_dir):
    with pytest.raises(MissingInputError, match="does not exist"):
        stage_volume(volume, f"{gluster_dir}/nope", 2)
    (gluster_dir / "empty").mkdir()
    (gluster_dir / "empty" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(DataError, match="is empty"):
        stage_volume(volume, f"{gluster_dir}/empty", 2)
    assert not list(gluster_dir.rglob(MANIFEST_NAME))


def test_path_safety_rules(volume, gluster_dir, tmp_path):
    (gluster_dir / "in").mkdir()
    (gluster_dir / "in" / "ok").write_bytes(b"1")
    outside = tmp_path / "secret"
    outside.write_text("not for training")
    cases = [
        (f"{gluster_dir}/in/../in", "'..' segment"),
        ("/etc", "outside the allowed roots"),
        (str(volume.mount), "outside the allowed roots"),  # the volume, but not a root
    ]
    for path, why in cases:
        with pytest.raises(PathSafetyError, match=why):
            stage_volume(volume, path, 1)
    os.symlink(outside, gluster_dir / "in" / "escape")  # a link found while listing
    with pytest.raises(PathSafetyError, match="outside the volume .*symbolic link"):
        stage_volume(volume, f"{gluster_dir}/in", 1)
    os.unlink(gluster_dir / "in" / "escape")
    os.symlink(tmp_path, gluster_dir / "linkdir")  # the input itself is a link out
    with pytest.raises(PathSafetyError, match="symbolic link"):
        stage_volume(volume, f"{gluster_dir}/linkdir", 1)
    os.symlink(gluster_dir / "in" / "ok", gluster_dir / "in" / "inner")  # stays inside: fine
    res = stage_volume(volume, f"{gluster_dir}/in", 1, checksum="md5")
    assert res["files"] == 1  # one file under two names is listed (and trained on) once
    assert not (tmp_path / MANIFEST_NAME).exists()


def test_volume_must_be_mounted(tmp_path):
    with pytest.raises(Exception, match="not mounted"):
        GlusterVolume(tmp_path).list_files(tmp_path)
