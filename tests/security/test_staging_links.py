"""Links a pod planted on the volume, met by staging's copy from HDFS.

Staging writes the HDFS copy onto the volume the pods also write: a link where it writes a
file, its lock or its staging directory made the worker write (or create) through it, e.g.
HDFS bytes into a DAG file. Real GlusterFS mount, real HDFS (the devstack's MiniDFSCluster).
"""
from __future__ import annotations

import os

import pytest

from tfk8s_airflow.exceptions import PathSafetyError
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.hdfscopy import lock_path, staging_dir
from tfk8s_airflow.staging.manifest import MANIFEST_NAME
from tfk8s_airflow.staging.stage import stage_hdfs
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.gluster, pytest.mark.hdfs]

VICTIM = "# a DAG file\n"


@pytest.fixture
def partition(hdfs_server, hdfs_dir):
    client = hdfs_server.client()
    for i in range(3):
        client.write(f"{hdfs_dir}/p/part-{i:05d}", data=os.urandom(1000 + i), overwrite=True)
    client.write(f"{hdfs_dir}/p/_SUCCESS", data=b"", overwrite=True)
    hdfs = WebHdfs(WebHdfsConfig(urls=(hdfs_server.url,), user=hdfs_server.user, timeout=10))
    return hdfs, f"{hdfs_dir}/p", client


def _stage(partition, gluster_dir, cache):
    hdfs, path, _ = partition
    return stage_hdfs(hdfs, path, 1, volume=GlusterVolume(gluster_dir.parent.parent), cache_dir=str(cache))


def test_staging_writes_through_no_link_planted_on_the_volume(partition, gluster_dir, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    victim = dags / "retrain.py"
    victim.write_text(VICTIM)

    # A first copy was interrupted; a pod turned a name in its hidden directory into a link.
    cache = gluster_dir / "c1"
    staging_dir(cache).mkdir()
    (staging_dir(cache) / "part-00001").symlink_to(victim)
    res = _stage(partition, gluster_dir, cache)
    assert res["files"] == 3 and victim.read_bytes() == VICTIM.encode()
    _, path, client = partition
    with client.read(f"{path}/part-00001") as reader:
        assert (cache / "part-00001").read_bytes() == reader.read()
    assert not (cache / "part-00001").is_symlink()

    # The lock beside the cache directory is a link to a file that does not exist yet.
    cache = gluster_dir / "c2"
    lock_path(cache).symlink_to(dags / "planted_dag.py")
    with pytest.raises(PathSafetyError, match=r"tfk8s-lock is a symbolic link"):
        _stage(partition, gluster_dir, cache)

    # The staging directory of a first copy is a link to a directory outside.
    cache = gluster_dir / "c3"
    staging_dir(cache).symlink_to(dags)
    with pytest.raises(PathSafetyError, match=r"tfk8s-partial is a symbolic link"):
        _stage(partition, gluster_dir, cache)

    assert sorted(p.name for p in dags.iterdir()) == ["retrain.py"] and victim.read_bytes() == VICTIM.encode()
    assert not (gluster_dir / "c2" / MANIFEST_NAME).exists() and not (gluster_dir / "c3").exists()
