"""Validation cannot crash: arbitrary spec documents either parse or raise SpecError.

Documents are nested mappings and lists of random scalars (unicode text, huge integers,
NaN and infinities, digit-like strings such as "²" or "--2"), shaped like a spec often
enough to reach every reader: top-level keys, role blocks and nested items are drawn from
the spec's own vocabulary as well as at random. Each example is bounded in time
(Hypothesis' deadline) and in memory (tracemalloc's peak), generously: a normal spec
parses in about a millisecond and a few hundred KiB.
"""
from __future__ import annotations

import math
import tracemalloc
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.spec import ROLE_KEYS, SPEC_KEYS, TFJobSpec

EXAMPLES = 1500
PEAK_BYTES = 64 * 2**20
WORDS = sorted({*SPEC_KEYS, *ROLE_KEYS, "name", "key", "value", "value_from", "secret_key_ref", "config_map_key_ref",
                "field_ref", "field_path", "optional", "secret_ref", "config_map_ref", "prefix", "mount_path",
                "host_path", "pvc", "secret", "config_map", "empty_dir", "read_only", "sub_path", "requests",
                "limits", "cpu", "memory", "nvidia.com/gpu", "operator", "effect", "toleration_seconds", "uri",
                "entrypoint", "sha256", "medium", "size_limit", "items", "path"})
NASTY_TEXT = ["", "²", "--2", "-", "0x10", "1e30000000", "1e-30000000", "9" * 40, "٣", "+1", ".5", "5.", "1Ei",
              "8Ei", "-1", "nan", "inf", ".inf", "NaN", "Exists", "Equal", "NoExecute", "/", "/..", "../x",
              "/mnt/tfk8s-gluster", "a/b c", "tfk8s-code", "tfk8s-shards", "/etc/tfk8s/shards", "/opt/tfk8s/code",
              "http://h/x", "https://u:p@h/x", "-c", "run.py", "\x00", "\x85", "\u2028", "\ud800"[:0],
              "default", "tf_config", "Never", "OnFailure", "ExitCode", "all_workers", "5m", "99999999999999d"]

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, 2**63 - 1, -(2**63) - 1, 2**31, 10**4000, -(10**4000)]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.inf, -math.inf, math.nan, 1e308, 5e-324]),
    st.text(max_size=20), st.sampled_from(NASTY_TEXT), st.sampled_from(WORDS),
)
keys = st.one_of(st.sampled_from(WORDS), st.text(max_size=12), st.sampled_from(NASTY_TEXT[:30]))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=6)),
    max_leaves=40,
)
role_blocks = st.one_of(documents, st.dictionaries(st.sampled_from(ROLE_KEYS), documents, max_size=6))
specs = st.one_of(
    documents,
    st.fixed_dictionaries(
        {"name": st.one_of(st.just("job"), scalars), "image": st.one_of(st.just("tfk8s/trainer:0.1"), scalars),
         "worker": role_blocks},
        optional={k: documents for k in SPEC_KEYS if k not in ("name", "image", "worker")}
        | {r: role_blocks for r in ("chief", "ps", "evaluator")},
    ),
)


def deep(n: int):
    doc: object = "x"
    for _ in range(n):
        doc = {"env": doc} if n % 2 else [doc]
    return doc


@settings(max_examples=EXAMPLES, deadline=timedelta(seconds=2), database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=st.one_of(specs, st.builds(lambda n, d: {"name": "j", "worker": 1, "image": "i:1", "args": deep(n),
                                                   "env": d}, st.integers(1, 3000), documents)))
def test_any_document_parses_or_raises_spec_error(doc):
    tracemalloc.start()
    try:
        try:
            spec = TFJobSpec.from_dict(doc)
        except SpecError as exc:
            assert exc.problems and all(p.field and p.fix for p in exc.problems), exc
            assert len(str(exc)) < 200_000
        else:
            assert TFJobSpec.from_dict(spec.to_dict()) == spec
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"peak {peak} bytes"
