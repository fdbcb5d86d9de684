"""Acceptance: a real GlusterFS volume mounted over FUSE (issue 3)."""
from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

# serial: it bounds the time of devstack/up gluster.
pytestmark = [pytest.mark.gluster, pytest.mark.serial]


def _fs_type(path) -> str:
    out = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "-M", str(path)],
                         capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def test_mount_is_the_glusterfs_volume(gluster_volume):
    assert _fs_type(gluster_volume.mount) == (
        f"fuse.glusterfs {gluster_volume.server}:/{gluster_volume.volume}")
    assert os.environ["TFK8S_GLUSTER_MOUNT"] == str(gluster_volume.mount)


def test_file_written_through_the_mount_is_on_the_brick(gluster_volume, gluster_dir):
    data = os.urandom(4 * 1024 * 1024 + 3)
    target = gluster_dir / "shard-00000.tfrecord"
    with open(target, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())

    on_brick = gluster_volume.brick_path(target)
    assert on_brick.is_file()
    assert hashlib.sha256(on_brick.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    # Gluster's own bookkeeping proves the file went through the volume, not around it.
    assert len(os.getxattr(on_brick, "trusted.gfid")) == 16
    assert target.read_bytes() == data


def test_rename_publishes_atomically(gluster_volume, gluster_dir):
    partial = gluster_dir / ".part-0.tmp"
    final = gluster_dir / "part-0"
    partial.write_bytes(b"complete")
    os.replace(partial, final)
    assert sorted(p.name for p in gluster_dir.iterdir()) == ["part-0"]
    assert final.read_bytes() == b"complete"
    assert gluster_volume.brick_path(final).read_bytes() == b"complete"
    assert not gluster_volume.brick_path(partial).exists()


def test_env_exports_and_fast_idempotent_up(gluster_volume):
    import time

    from tests.fixtures.data import DEVSTACK

    out = subprocess.run([str(DEVSTACK / "env"), "gluster"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    assert f"export TFK8S_GLUSTER_MOUNT={gluster_volume.mount}" in out.splitlines()
    assert f"export TFK8S_GLUSTER_BRICK={gluster_volume.brick}" in out.splitlines()
    started = time.monotonic()
    subprocess.run([str(DEVSTACK / "up"), "gluster"], check=True, capture_output=True, timeout=60)
    assert time.monotonic() - started < 5
