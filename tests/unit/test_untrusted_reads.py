"""Every annotation, progress line, record and journal read from an object someone else may write goes
through one bounded reader (tfk8s_airflow.untrusted): a value nested ~1,000 levels deep, a huge one or
garbage is ignored (or refused with the reader's own error), never a RecursionError that ends the job's
shared watch, teardown, the staging trigger or a copy pod (docs/security.md, issue 37).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfk8s_airflow import untrusted
from tfk8s_airflow.exceptions import DataError, RecordError, UntrustedJSONError
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.progress import read_progress
from tfk8s_airflow.job.run.records import JobRecord, JobSummary
from tfk8s_airflow.job.run.recoverystate import read_attempts
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.run.verdict import VERDICT_ANNOTATION, VERDICT_REASON_MAX, read_verdict, summary_verdict
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.pod.stagecopy import PROGRESS_PREFIX as COPY_PROGRESS
from tfk8s_airflow.pod.stagecopy import read_journal
from tfk8s_airflow.pod.trainer.state import read_json as read_trainer_state
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.triggers.staging import _last_progress

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000
DEEP_VERDICT = '{"state": "failed", "reason": ' + DEEP + "}"


def _record() -> JobRecord:
    spec = parse_spec({"name": "w", "image": "i:1", "ps": 1, "worker": 2, "oom_memory_factor": 2})
    names = JobNames.for_run(spec, "manual__1", "train", "dag")
    return job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec),
                      has_shards=False, kubernetes_conn_id="kubernetes_default", poll_interval=1.0)


_RECORD = _record()


# ------------------------------------------------------------------ finding 1, each reader
@pytest.mark.parametrize("raw", [DEEP, DEEP_VERDICT])
def test_a_verdict_annotation_nested_a_thousand_levels_deep_is_ignored_not_raised(raw, caplog):
    with caplog.at_level(logging.WARNING):
        assert read_verdict({VERDICT_ANNOTATION: raw}) is None
    assert "nests more than" in caplog.text


def test_the_verdicts_reason_is_cleaned_before_it_becomes_the_jobs_failure_reason():
    hostile = "OOM\x1b[2J\x1b]0;pwned\x07 on\u202enode\r\nfake line\x00" + "x" * 900
    raw = json.dumps({"state": "failed", "reason": hostile, "by": "me\x1b[31m\n" + "b" * 100})
    got = read_verdict({VERDICT_ANNOTATION: raw})
    assert got is not None and got["state"] == "failed"
    assert all(c.isprintable() for c in got["reason"] + got["by"]), got
    assert got["reason"].startswith("OOM[2J]0;pwned onnode  fake line") and len(got["reason"]) <= VERDICT_REASON_MAX
    assert len(got["by"]) <= 64
    # A well-formed verdict reads back as before.
    ok = json.dumps({"state": "failed", "reason": "worker-1 exited 137 (OOMKilled)", "by": "watch"})
    assert read_verdict({VERDICT_ANNOTATION: ok})["reason"] == "worker-1 exited 137 (OOMKilled)"


def test_a_summary_nested_too_deep_is_no_verdict():
    assert summary_verdict('{"state": "failed", "replicas": ' + DEEP + "}") is None


def test_a_training_progress_line_nested_deep_is_skipped():
    log = f"tfk8s.progress {{\"step\": 5}}\ntfk8s.progress {DEEP[:2000]}\n"
    doc, problem = read_progress(log)
    assert doc == {"step": 5} and problem


@pytest.mark.parametrize("line", [DEEP, '{"bytes": ' + DEEP + "}", '{"bytes": "x", "items": 1e400}',
                                  '{"bytes": [], "items": {}}', "{" * 100_000])
def test_a_copy_pods_progress_line_nested_deep_or_garbage_never_raises_in_the_trigger(line):
    got = _last_progress(f"{COPY_PROGRESS}{{\"bytes\": 10, \"items\": 1}}\n{COPY_PROGRESS}{line}\n")
    assert got is None or (isinstance(got["bytes"], int) and isinstance(got["items"], int))
    assert _last_progress(f'{COPY_PROGRESS}{{"bytes": 10, "items": 1}}\n') == {"bytes": 10, "items": 1}


def test_a_journal_line_nested_deep_ends_what_is_resumed(tmp_path):
    journal = tmp_path / "part-0.p.journal"
    journal.write_text(json.dumps({"i": 0, "md5s": ["a" * 32]}) + "\n" + DEEP + "\n" +
                       json.dumps({"i": 2, "md5s": []}) + "\n")
    assert list(read_journal(str(journal))) == [0]
    journal.write_bytes(json.dumps({"i": 0}).encode() + b"\n" + b'{"i": 1, "rel": "\xff"}\n')
    assert list(read_journal(str(journal))) == [0]  # not UTF-8: a line not trusted, not a traceback


def test_a_part_record_nested_deep_is_an_unreadable_record_not_a_traceback(tmp_path):
    dest = tmp_path / "cache" / "data"
    records = fanout.records_dir(dest, "k1")
    records.mkdir(parents=True)
    (records / "part-0.json").write_text('{"part": 0, "items": ' + DEEP + "}")
    (records / "part-1.json").write_text(json.dumps({"part": 1, "ok": True}))
    got = fanout.read_records(dest, "k1", tmp_path, [0, 1])
    assert got[0]["ok"] is False and "nests more than" in got[0]["error"]
    assert got[1] == {"part": 1, "ok": True}


def test_a_json_file_on_the_volume_nested_deep_is_a_data_error(tmp_path):
    (tmp_path / "doc.json").write_text(DEEP_OBJECT)
    with SafeDir.open(tmp_path) as d, pytest.raises(DataError, match="nests more than"):
        d.read_json("doc.json")


@pytest.mark.parametrize("raw", [DEEP, DEEP_OBJECT])
def test_a_record_given_as_json_text_nested_deep_is_a_record_error(raw):
    with pytest.raises(RecordError):
        JobRecord.from_xcom(raw)
    with pytest.raises(RecordError):
        JobSummary.from_xcom(raw)


def test_the_attempts_annotation_nested_deep_is_a_value_error():
    with pytest.raises(ValueError):
        read_attempts('{"attempts": ' + DEEP + "}", _record())


# ------------------------------------------------------------------ the readers, fuzzed
_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                     max_size=4),
                        max_leaves=20)
_HOSTILE = st.one_of(
    st.text(max_size=400),
    st.text(alphabet='[]{}",:\\0123 abn', max_size=4000),
    st.integers(min_value=0, max_value=50_000).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=0, max_value=50_000).map(lambda n: '{"a":' * n),
    st.integers(min_value=0, max_value=50_000).map(lambda n: '"\\' * n),
    st.integers(min_value=1, max_value=8).map(lambda n: "9" * (1000 * n)),
    st.sampled_from(["NaN", "-Infinity", "1e400", '{"state": "failed", "reason": NaN}', "\ud800", "\x00"]),
    _JSONISH.map(json.dumps),
    st.builds(lambda n, doc: "[" * n + json.dumps(doc) + "]" * n, st.integers(0, 3000), _JSONISH),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_HOSTILE)
def test_no_exception_escapes_the_annotation_and_progress_readers(raw):
    got = read_verdict({VERDICT_ANNOTATION: raw})
    assert got is None or got["state"] in ("succeeded", "failed", "ended")
    summary_verdict(raw)
    read_progress(f"tfk8s.progress {raw}\n")
    got = _last_progress(f"{COPY_PROGRESS}{raw}\n")
    assert got is None or set(got) == {"bytes", "items"}
    with contextlib.suppress(ValueError):  # its documented refusal
        read_attempts(raw, _RECORD)
    for reader in (JobRecord.from_xcom, JobSummary.from_xcom):
        with contextlib.suppress(RecordError):
            reader(raw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_HOSTILE | st.binary(max_size=2000).map(lambda b: b.decode("latin-1")))
def test_no_exception_escapes_the_volume_readers(tmp_path, raw):
    dest = tmp_path / "cache" / "data"
    records = fanout.records_dir(dest, "k1")
    records.mkdir(parents=True, exist_ok=True)
    (records / "part-0.json").write_bytes(raw.encode("utf-8", "surrogatepass"))
    got = fanout.read_records(dest, "k1", tmp_path, [0])
    assert 0 in got
    journal = records / "part-0.p.journal"
    journal.write_bytes(raw.encode("utf-8", "surrogatepass") + b"\n")
    assert isinstance(read_journal(str(journal)), dict)
    with SafeDir.open(records) as d, contextlib.suppress(DataError):
        d.read_json("part-0.json")
    read_trainer_state(str(records / "part-0.json"), {})
    os.unlink(journal)


def test_a_huge_value_is_refused_by_its_size_before_it_is_parsed(caplog):
    with caplog.at_level(logging.WARNING):
        assert read_verdict({VERDICT_ANNOTATION: json.dumps({"state": "failed", "reason": "x" * 10_000})}) is None
    assert "larger than" in caplog.text


def _depth(doc) -> int:
    if isinstance(doc, list):
        return 1 + max(map(_depth, doc), default=0)
    if isinstance(doc, dict):
        return 1 + max(map(_depth, doc.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(_JSONISH, st.integers(min_value=0, max_value=40))
def test_the_bounded_reader_reads_well_formed_json_as_json_loads_does_and_only_refuses_too_deep(doc, wrap):
    text = "[" * wrap + json.dumps(doc) + "]" * wrap
    expected = json.loads(text)
    if _depth(expected) <= untrusted.MAX_DEPTH:
        assert json.dumps(untrusted.loads(text, max_bytes=1 << 20)) == json.dumps(expected)
    else:
        with pytest.raises(UntrustedJSONError, match="nests more than"):
            untrusted.loads(text, max_bytes=1 << 20)


def test_the_trainers_state_file_nested_deep_reads_as_absent(tmp_path):
    (tmp_path / "train_state.json").write_text(DEEP_OBJECT)
    assert read_trainer_state(str(tmp_path / "train_state.json"), {"fresh": True}) == {"fresh": True}
