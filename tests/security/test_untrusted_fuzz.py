"""Fuzz campaign over what the Airflow side and the copy pods read from writable objects.

The job's Service annotations (``tfk8s.io/verdict``, recovery's ``tfk8s.io/attempts``), the staging
pods' records on the shared volume (``part-<n>.json``) and their journals are written by whoever may
write Services in the namespace or write the volume. Hypothesis drives each reader with raw text:
valid documents mutated at a random place, arbitrary JSON, brackets nested thousands deep inside
and outside strings, documents cut short, bytes that are not UTF-8, numbers of hundreds of digits.
Every reader answers or refuses with its documented error, and nothing else escapes: the verdict
and a part's records are ignored or fail their part; the attempts annotation raises ``ValueError``
(which the watch turns into "no recovery"); a journal line that does not hold is not resumed; and
a complete set of records is published only when it agrees with the checksum HDFS gave. Here that
checksum is a fixed value (no HDFS request per example: the real comparison is
tests/staging/test_forged_records.py). Bounded examples, derandomized: ~30 s. Hypothesis raises the
recursion limit while it runs a test, so the nesting that ended a watch is also tried outside it.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.hdfschecksum import checksums_match, compose
from tfk8s_airflow.job.run.records import JobRecord, ReplicaRef
from tfk8s_airflow.job.run.recovery_policy import RecoveryPolicy
from tfk8s_airflow.job.run.recoverystate import read_attempts, read_recreated
from tfk8s_airflow.job.run.verdict import VERDICT_ANNOTATION, VERDICT_REASON_MAX, read_verdict
from tfk8s_airflow.pod import stagecopy
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.staging.listing import FileEntry

FUZZ = settings(max_examples=150, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))
MiB = 1 << 20

RECORD = JobRecord(job="j", namespace="ns", service="j", configmap="j-shards", selector="tfk8s.io/job=j",
                   policy={}, replicas=(ReplicaRef("ps-0", "ps", 0, "j-ps-0", True),
                                        ReplicaRef("worker-0", "worker", 0, "j-worker-0", True)),
                   created_at=0.0, recovery=RecoveryPolicy.from_dict({"oom_memory_factor": 2.0}))

scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from([10**400, -(2**63), 2**64]),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                   st.sampled_from(["\x1b[31m", "\u202e", "\x00", "\ud800", "ps-0", "worker-0", "succeeded", "MD5"]))
value = st.recursive(scalar, lambda c: st.one_of(st.lists(c, max_size=4),
                                                 st.dictionaries(st.text(max_size=8), c, max_size=4)), max_leaves=12)


@st.composite
def mutated(draw: Any, doc: Any) -> Any:
    """``doc`` with one place (a key of an object, an item of a list, or the whole) replaced by a hostile value."""
    if draw(st.integers(0, 5)) == 0 or not isinstance(doc, (dict, list)) or not doc:
        return draw(st.one_of(value, nested()))
    if isinstance(doc, dict):
        key = draw(st.sampled_from(sorted(doc)))
        out: Any = dict(doc)
        out[key] = draw(mutated(doc[key]))
        return out
    i = draw(st.integers(0, len(doc) - 1))
    return [*doc[:i], draw(mutated(doc[i])), *doc[i + 1:]]


def nested() -> st.SearchStrategy[Any]:
    """Arrays or objects nested 30 to 3,000 levels (json.loads raised RecursionError at ~1,000)."""
    def build(depth: int, kind: str) -> Any:
        inner: Any = 0
        for _ in range(depth):
            inner = [inner] if kind == "list" else {"a": inner}
        return inner
    return st.builds(build, st.integers(30, 3000), st.sampled_from(["list", "dict"]))


_MARK = "\x00deep\x00"


@st.composite
def raw_text(draw: Any, good: Any) -> str | bytes:
    """The text of a mutated ``good`` document, or something that only looks like one."""
    doc = draw(mutated(good))
    try:
        text = json.dumps(doc, allow_nan=True)
    except (RecursionError, ValueError):
        text = "[" * 5000 + "]" * 5000
    how = draw(st.sampled_from(["as is", "deep", "deep", "cut", "open", "in a string", "bytes", "garbage"]))
    if how == "deep" and isinstance(good, dict):  # one value of the good document nested 1,000 to 15,000 deep
        depth, kind = draw(st.integers(1000, 15_000)), draw(st.sampled_from(["[]", "[]", "{}"]))
        deep = ("[" * depth + "0" + "]" * depth) if kind == "[]" else ('{"a":' * depth + "0" + "}" * depth)
        marked = dict(good)
        marked[draw(st.sampled_from(sorted(good)))] = _MARK
        return json.dumps(marked).replace(json.dumps(_MARK), deep)
    if how == "cut":
        return text[:draw(st.integers(0, len(text)))]
    if how == "open":
        return "[" * draw(st.integers(1, 5000)) + text
    if how == "in a string":
        return json.dumps({"state": "failed", "reason": "[" * draw(st.integers(1, 3000)) + "\x1b]0;x\x07"})
    if how == "bytes":
        return text.encode("utf-8", "surrogatepass")[:-1] + draw(st.binary(min_size=1, max_size=8))
    if how == "garbage":
        return draw(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
    return text


GOOD_VERDICT = {"state": "failed", "reason": "worker-0 exited 1", "by": "watch", "at": 1.5,
                "failure_class": "code", "failed_replica": "worker-0"}
GOOD_ATTEMPTS = {"attempts": [{"number": 2, "failure_class": "oom", "reason": "r", "at": 1.0, "action": "replace",
                               "replicas": ["worker-0"]}],
                 "overrides": {"worker-0": {"memory": 2e9, "avoid_nodes": ["n1"]}},
                 "pods": [{"uid": "u", "name": "j-worker-0-2", "replica": "worker-0", "attempt": 2}]}


@FUZZ
@given(verdict=raw_text(GOOD_VERDICT), attempts=raw_text(GOOD_ATTEMPTS))
def test_service_annotations_are_read_or_ignored(verdict, attempts):
    got = read_verdict({VERDICT_ANNOTATION: verdict})
    if got is not None:
        assert got["state"] in ("succeeded", "failed", "ended")
        assert len(got["reason"]) <= VERDICT_REASON_MAX and got["reason"].isprintable()
        assert got["by"].isprintable()
    for reader in (read_attempts, read_recreated):
        # ValueError is documented: the watch reads it as "no recovery", never ends with it
        with contextlib.suppress(ValueError):
            reader(attempts if isinstance(attempts, str) else attempts.decode("utf-8", "replace"), RECORD)


def test_a_ten_mib_or_deeply_nested_verdict_is_ignored():
    """The API server refuses an annotation of 10 MiB (tests/security/test_verdict_hostile_k8s.py); the
    reader ignores it all the same (its size is refused before anything is parsed), and one nested 1,900
    levels within the size bound. Outside Hypothesis, which raises the recursion limit while it runs a
    test: there ``json.loads`` took 1,900 levels that raise ``RecursionError`` in a watch."""
    for raw in ('{"state": "succeeded", "reason": "' + "x" * (10 * MiB) + '"}', "[" * (10 * MiB),
                ("[" * (5 * MiB) + "]" * (5 * MiB)).encode(),
                '{"state": "succeeded", "reason": ' + "[" * 1900 + "]" * 1900 + "}"):
        assert read_verdict({VERDICT_ANNOTATION: raw}) is None


# ------------------------------------------------------------------------------ records and journals
FILES = [FileEntry("/in/a", "a", 3 * MiB, None, MiB), FileEntry("/in/b", "b", 1000, None, MiB),
         FileEntry("/in/c", "c", 0, None, MiB)]
PLAN = fanout.plan_parts(FILES, 2)  # "a" split across both parts, "b" and "c" whole
CHECKSUM = {"algorithm": "MD5-of-0MD5-of-512CRC32C", "bytes": "0" * 56, "length": 28}
MD5 = "0123456789abcdef" * 2
#: What HDFS says of each file: the split file "a" is what its good records' MD5s compose to; the whole
#: files "b" and "c" are not what their records say, so a record's word alone never publishes them.
HDFS = {"/in/a": compose([MD5] * 3, 3 * MiB, MiB, 512), "/in/b": dict(CHECKSUM, bytes="1" * 56),
        "/in/c": dict(CHECKSUM, bytes="2" * 56)}


def good_record(part: int) -> dict[str, Any]:
    items = []
    for n, item in enumerate(PLAN[part]):
        if (item.offset, item.length) == (0, FILES[item.index].size):
            items.append({"i": n, "md5s": [MD5], "checksum": CHECKSUM})
        else:
            items.append({"i": n, "md5s": [MD5] * -(-item.length // MiB)})
    return {"part": part, "ok": True, "items": items, "copied_bytes": 10, "seconds": 0.1, "engine": "native"}


def state_for(dest: Path) -> dict[str, Any]:
    return {"dest": str(dest), "key": "fz", "files": [[f.path, f.relpath, f.size, f.block_size] for f in FILES],
            "plan": [[[it.index, it.offset, it.length, it.present] for it in items] for items in PLAN]}


@FUZZ
@given(records=st.tuples(raw_text(good_record(0)), raw_text(good_record(1))))
@example(records=(json.dumps(good_record(0)), json.dumps(good_record(1))))
@example(records=('"\\u001b]0;owned\\u0007\\u202e"', '{"ok": false, "error": "\\u001b[2J", "kind": "checksum"}'))
def test_part_records_fail_their_part_or_are_checked_against_hdfs(tmp_path_factory, records):
    assert len(PLAN) == 2 and any(it.length != FILES[it.index].size for items in PLAN for it in items)
    root = tmp_path_factory.mktemp("records")
    dest = root / "cache"
    state = state_for(dest)
    where = fanout.records_dir(dest, "fz")
    where.mkdir()
    for part, raw in enumerate(records):
        (where / f"part-{part}.json").write_bytes(raw if isinstance(raw, bytes) else raw.encode("utf-8", "replace"))
    outcome = fanout.judge(state, SimpleNamespace(mount=root), [0, 1])
    assert set(outcome.done) | set(outcome.failed) == {0, 1} or outcome.checksum_errors
    for why in [*outcome.failed.values(), *outcome.checksum_errors]:
        assert isinstance(why, str) and why.isprintable()
    if set(outcome.done) == {0, 1}:  # complete and well-formed: HDFS's checksum decides
        try:
            entries = fanout.verify(PLAN, outcome.done, FILES, HDFS.__getitem__)
        except StagingError as exc:
            assert "checksum mismatch copying /in/" in str(exc)
        else:
            assert all(checksums_match(e.checksum, HDFS[e.path]) for e in entries)


@FUZZ
@given(lines=st.lists(st.one_of(raw_text({"i": 0, "md5s": [MD5, MD5]}), raw_text({"i": 1, "md5s": [MD5]})),
                      max_size=6))
def test_journal_lines_are_resumed_only_when_they_hold(tmp_path_factory, lines):
    root = tmp_path_factory.mktemp("journal")
    path = root / "part-0.plan.journal"
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode("utf-8", "replace") for x in lines))
    try:
        done = stagecopy.read_journal(str(path))
    except stagecopy.PartError:
        return  # documented: the journal file itself is refused (not a regular file)
    # Items of the part's offset 0..: split pieces of a file (never a whole file: no HDFS request here).
    items = [{"src": "/in/a", "rel": "a", "offset": 0, "length": 2 * MiB, "size": 3 * MiB, "block_size": MiB,
              "bytes_per_crc": 512},
             {"src": "/in/a", "rel": "a", "offset": 2 * MiB, "length": MiB, "size": 3 * MiB, "block_size": MiB,
              "bytes_per_crc": 512}]
    for i, rec in done.items():
        if stagecopy.journaled(rec, i, items, None):  # type: ignore[arg-type] - split items ask HDFS nothing
            assert rec["md5s"] == [MD5] * (2 if i == 0 else 1) and "checksum" not in rec


def test_a_record_larger_than_its_plan_allows_is_refused_unparsed(tmp_path):
    """A part's record is read within a bound its plan sets (~34 KiB for part 0 here), not 64 MiB: the
    Python objects of a JSON document take ~25 times its bytes, so a 64 MiB record cost ~1.5 GiB in the
    worker. A well-formed record padded to 4 MiB fails its part, unread."""
    dest = tmp_path / "cache"
    where = fanout.records_dir(dest, "fz")
    where.mkdir()
    padded = dict(good_record(0), padding=["x" * 1000] * 4096)
    (where / "part-0.json").write_text(json.dumps(padded))
    limit = fanout.record_limit(PLAN[0], FILES)
    assert limit < 64 * 1024 < len(json.dumps(padded))
    outcome = fanout.judge(state_for(dest), SimpleNamespace(mount=tmp_path), [0])
    assert not outcome.done and f"is larger than {limit} bytes" in outcome.failed[0], outcome
    (where / "part-0.json").write_text(json.dumps(good_record(0)))  # the same record as a pod writes it
    assert set(fanout.judge(state_for(dest), SimpleNamespace(mount=tmp_path), [0]).done) == {0}
