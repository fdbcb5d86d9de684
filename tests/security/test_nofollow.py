"""The worker's safe-file operations on the real GlusterFS mount, against what a pod can plant.

A training pod can write anything into the directories it mounts: a symbolic link at a name
the worker will write (or in the middle of the path), a FIFO (an open for reading blocks
forever), a device node, a hard link to another file of the volume. Each is planted here on
the devstack's FUSE-mounted volume, and every operation of
:mod:`tfk8s_airflow.nofollow` must refuse it or replace the name, never follow it, never
block, and never touch what it points at.
"""
from __future__ import annotations

import os
import stat

import pytest

from tfk8s_airflow.exceptions import DataError, PathSafetyError
from tfk8s_airflow.nofollow import SafeDir, copytree

pytestmark = [pytest.mark.gluster, pytest.mark.timeout(120)]  # a FIFO opened the wrong way would block


@pytest.fixture
def planted(gluster_dir, tmp_path):
    """``logs/`` on the volume with a pod's plantings, and the files outside they aim at."""
    outside = tmp_path / "dags"
    outside.mkdir()
    victim = outside / "victim_dag.py"
    victim.write_text("# a DAG file\n")
    logs = gluster_dir / "logs"
    (logs / "job").mkdir(parents=True)
    (logs / "job" / "link.log").symlink_to(victim)
    (logs / "jobdir").symlink_to(outside)
    os.mkfifo(logs / "job" / "fifo.log")
    os.mknod(logs / "job" / "null.log", 0o644 | stat.S_IFCHR, os.makedev(1, 3))
    other = gluster_dir / "serving.json"
    other.write_text('{"version": "good"}\n')
    os.link(other, logs / "job" / "hard.log")
    return {"logs": logs, "victim": victim, "outside": outside, "other": other}


def test_planted_links_fifos_devices_and_hard_links_are_never_followed(planted, gluster_volume):
    logs, victim, outside, other = planted["logs"], planted["victim"], planted["outside"], planted["other"]
    assert os.path.ismount(gluster_volume.mount)
    with SafeDir.open(logs) as d:
        # Appending (a log growing) refuses every planted name, including the hard link.
        for rel, why in [("job/link.log", "symbolic link"), ("jobdir/p.log", "symbolic link"),
                         ("job/fifo.log", "FIFO"), ("job/null.log", "character device"),
                         ("job/hard.log", "2 hard links")]:
            with pytest.raises(PathSafetyError, match=why):
                d.append(rel, b"secret log line\n")
            with pytest.raises(PathSafetyError):
                d.read_bytes(rel)
        # A whole-file write replaces the name: the link's target and the hard link's other
        # name keep their bytes; a link in the middle of the path is refused.
        d.write_atomic("job/link.log", b"archived\n")
        d.write_atomic("job/hard.log", b"archived\n")
        d.write_atomic("job/fifo.log", b"archived\n")
        with pytest.raises(PathSafetyError, match="jobdir is a symbolic link"):
            d.write_atomic("jobdir/p.log", b"archived\n", make_parents=True)
        with pytest.raises(PathSafetyError, match="jobdir is a symbolic link"):
            d.subdir("jobdir/sub", create=True)
        assert d.read_bytes("job/link.log") == b"archived\n"
        assert stat.S_ISREG(os.lstat(logs / "job" / "fifo.log").st_mode)
        # An exclusive create (a placeholder) never replaces anything.
        assert not d.create_exclusive("job/link.log", b"<placeholder>")
        assert d.create_exclusive("job/new.log", b"<placeholder>")
        # Bounded reads.
        d.write_atomic("big.json", b"[" + b"0," * 1000 + b"0]")
        with pytest.raises(DataError, match="larger than 100 bytes"):
            d.read_bytes("big.json", limit=100)
        # ".." and absolute paths are not paths below the root.
        for bad in ("../x", "/etc/passwd", "job/../../x"):
            with pytest.raises(PathSafetyError):
                d.write_atomic(bad, b"x")
        # A lock file planted as a link is not created through.
        (logs / ".lock").symlink_to(outside / "created-by-lock")
        with pytest.raises(PathSafetyError), d.lock(".lock"):
            pass
    assert victim.read_text() == "# a DAG file\n"
    assert other.read_text() == '{"version": "good"}\n'
    assert sorted(p.name for p in outside.iterdir()) == ["victim_dag.py"]


def test_copytree_refuses_links_and_special_files_anywhere(gluster_dir):
    src = gluster_dir / "model"
    (src / "variables").mkdir(parents=True)
    (src / "saved_model.pb").write_bytes(b"graph")
    (src / "variables" / "variables.index").write_bytes(b"index")
    dst = gluster_dir / "serving"
    dst.mkdir()
    with SafeDir.open(src) as s, SafeDir.open(dst) as d:
        stats = copytree(s, d, "v1")
        assert (stats.files, stats.dirs, stats.bytes) == (2, 1, 10)
        assert (dst / "v1" / "variables" / "variables.index").read_bytes() == b"index"
        again = copytree(s, d, "v2")
        assert again.digest == stats.digest
        for plant, why in [(lambda p: p.symlink_to("/proc/self/environ"), "symbolic link"),
                           (lambda p: os.mkfifo(p), "FIFO"),
                           (lambda p: os.link(src / "saved_model.pb", p), "2 hard links")]:
            target = src / "variables" / "planted"
            plant(target)
            with pytest.raises(PathSafetyError, match=why):
                copytree(s, d, "v3")
            assert not (dst / "v3").exists()  # nothing half-copied is left
            os.unlink(target)
        (src / "variables" / "deep").mkdir()
        with pytest.raises(PathSafetyError, match="deeper"):
            copytree(s, d, "v4", max_depth=1)
    assert sorted(p.name for p in dst.iterdir()) == ["v1", "v2"]
    assert not (dst / "v1" / "variables" / "planted").exists()
