"""Reading an archived replica log from the shared volume: regular files under the root only, bounded."""
import os

import pytest

from tfk8s_airflow.exceptions import DataError
from tfk8s_airflow.volume.logs import archive_path, archive_root_of, read_archived_log


def write(root, job, pod, text):
    path = archive_path(root, job, pod)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_archive_rule_round_trips(tmp_path):
    path = archive_path(tmp_path, "job-1", "job-1-ps-0")
    assert path == tmp_path / "job-1" / "job-1-ps-0.log"
    assert archive_root_of(str(path), "job-1", "job-1-ps-0") == str(tmp_path)
    assert archive_root_of(str(path), "job-2", "job-1-ps-0") is None
    assert archive_root_of("job-1/job-1-ps-0.log", "job-1", "job-1-ps-0") is None


def test_a_log_reads_whole_and_a_large_one_as_head_and_tail(tmp_path):
    write(tmp_path, "j", "p", "line 1\nline 2\n")
    log = read_archived_log(str(tmp_path), "j", "p")
    assert (log.text, log.size, log.truncated) == ("line 1\nline 2\n", 14, False)
    write(tmp_path, "j", "big", "a" * 1000 + "b" * 1000)
    log = read_archived_log(str(tmp_path), "j", "big", limit=100)
    assert log.truncated and log.size == 2000
    assert log.text.startswith("a" * 50) and log.text.endswith("b" * 50) and "1900 bytes omitted" in log.text


def test_symlinks_are_never_followed_neither_for_the_file_nor_the_job_directory(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    root = tmp_path / "logs"
    (root / "j").mkdir(parents=True)
    os.symlink(secret, root / "j" / "p.log")
    with pytest.raises(DataError, match="symlink"):
        read_archived_log(str(root), "j", "p")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "p.log").write_text("do not serve")
    os.symlink(outside, root / "j2")
    with pytest.raises(DataError, match="symbolic link.*never followed"):
        read_archived_log(str(root), "j2", "p")


def test_only_regular_files_and_single_segment_names(tmp_path):
    (tmp_path / "j").mkdir()
    os.mkfifo(tmp_path / "j" / "fifo.log")  # would block a reader that opened it without checking
    with pytest.raises(DataError, match="is a FIFO; only regular files"):
        read_archived_log(str(tmp_path), "j", "fifo")
    (tmp_path / "j" / "dir.log").mkdir()
    with pytest.raises((DataError, IsADirectoryError)):
        read_archived_log(str(tmp_path), "j", "dir")
    for job, pod in (("..", "p"), ("j", "../p"), ("a/b", "p"), ("", "p"), ("j", "")):
        with pytest.raises(DataError, match="cannot name a log file"):
            read_archived_log(str(tmp_path), job, pod)
    with pytest.raises(FileNotFoundError):
        read_archived_log(str(tmp_path), "j", "missing")


def test_a_streamed_log_begins_by_replacing_what_a_pod_planted_and_only_a_plain_file_counts_as_streamed(tmp_path):
    """start_log replaces whatever is at the name (a link is replaced, never written through);
    streamed_size counts only a non-empty regular file of one link, so teardown writes its tail
    over anything else."""
    from tfk8s_airflow.volume.logs import append_log, start_log, streamed_size

    (tmp_path / "j").mkdir()
    target = tmp_path / "dag.py"
    target.write_text("dags stay as they are")
    os.symlink(target, tmp_path / "j" / "p.log")
    assert streamed_size(tmp_path, "j", "p") is None
    start_log(tmp_path, "j", "p")
    assert not (tmp_path / "j" / "p.log").is_symlink() and target.read_text() == "dags stay as they are"
    assert streamed_size(tmp_path, "j", "p") is None  # empty: nothing was streamed
    assert append_log(tmp_path, "j", "p", b"first line\n") == 11
    assert streamed_size(tmp_path, "j", "p") == 11
    os.link(tmp_path / "j" / "p.log", tmp_path / "elsewhere")  # a second name: not its own file any more
    assert streamed_size(tmp_path, "j", "p") is None
    assert streamed_size(tmp_path / "missing", "j", "p") is None


def test_a_log_root_that_is_a_symbolic_link_is_refused_not_followed(tmp_path):
    """The log root lies on a volume the pods write: a pod that replaced it with a link to another
    directory (here one holding a log of the same name) gets neither its reads nor its writes followed."""
    import pytest

    from tfk8s_airflow.exceptions import PathSafetyError
    from tfk8s_airflow.volume.logs import append_log, log_path, read_archived_log, streamed_size

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "job").mkdir(parents=True)
    planted = elsewhere / log_path("job", "job-worker-0")
    planted.write_text("a log the view must not show\n")
    root = tmp_path / "logs"
    root.symlink_to(elsewhere)
    for call in (lambda: read_archived_log(root, "job", "job-worker-0"),
                 lambda: read_archived_log(f"{root}/", "job", "job-worker-0"),
                 lambda: append_log(root, "job", "job-worker-0", b"written through the link\n")):
        with pytest.raises(PathSafetyError, match="symbolic link"):
            call()
    assert streamed_size(root, "job", "job-worker-0") is None  # teardown writes its tail instead: refused too
    assert planted.read_text() == "a log the view must not show\n"
    real = tmp_path / "real"
    append_log(real, "job", "job-worker-0", b"line\n")
    assert read_archived_log(real, "job", "job-worker-0").text == "line\n"
