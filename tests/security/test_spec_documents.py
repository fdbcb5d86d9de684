"""Spec documents are bounded before any field is read: size, aliases, nesting, keys and text."""
from __future__ import annotations

import resource
import subprocess
import sys
import tracemalloc

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.run.resolve import resolve_spec
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.spec.document import MAX_DEPTH, MAX_NODES, MAX_SPEC_CHARS, load_spec_file

#: A "billion laughs" document of about 500 bytes: nine levels of nine aliases, 9^9 values.
ALIAS_BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{b}: &{b} [*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    + ["name: job", "image: tfk8s/trainer:0.1", "worker: 1", "port: *i", "args: *i", "env: {X: *i}", ""])
MINIMAL = {"name": "job", "image": "tfk8s/trainer:0.1", "worker": 1}


def _limit_memory():  # runs in the child before exec: 1 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


def test_alias_bomb_is_refused_under_a_memory_limit(tmp_path):
    assert len(ALIAS_BOMB.encode()) < 600
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    res = subprocess.run([sys.executable, "-m", "tfk8s_airflow.cli", "validate", str(bomb)], capture_output=True,
                         text=True, timeout=120, preexec_fn=_limit_memory)
    assert res.returncode == 1, res.stderr[-2000:]
    assert f"expands to more than {MAX_NODES} values" in res.stderr
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr


def test_alias_bomb_as_rendered_text_costs_little_memory():
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match="expands to more than"):
            resolve_spec(ALIAS_BOMB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak


def test_a_python_document_sharing_its_parts_is_bounded_too():
    laughs: object = ["lol"] * 9
    for _ in range(8):
        laughs = [laughs] * 9
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match=f"holds more than {MAX_NODES} values"):
            parse_spec({**MINIMAL, "port": laughs})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak


@pytest.mark.parametrize("text,message", [
    ("a: &a [*a]\nname: job\n", "recursive alias"),
    ("[" * 5000 + "]" * 5000, "not valid YAML/JSON|nests deeper"),
    ("name: job\nport: " + "9" * 5000 + "\n", "cannot be read"),
    ("x: " + "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n", f"nests deeper than {MAX_DEPTH}"),
    ("name: " + "x" * (MAX_SPEC_CHARS + 1), "more than the limit"),
])
def test_unreadable_yaml_is_a_spec_error(text, message):
    with pytest.raises(SpecError, match=message):
        resolve_spec(text)


def test_files_are_capped_and_json_nesting_is_an_error(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("name: job\n" + "# padding\n" * (MAX_SPEC_CHARS // 10 + 1))
    with pytest.raises(SpecError, match="more than the limit"):
        load_spec_file(big)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SpecError, match="deep.json"):
        load_spec_file(deep)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(SpecError, match="UTF-8"):
        load_spec_file(binary)


def test_deep_nesting_non_string_keys_and_lone_surrogates_are_field_errors():
    nested: object = "x"
    for _ in range(5000):  # copy.deepcopy alone would hit the recursion limit
        nested = [nested]
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, "args": nested})
    assert info.value.problems[0].field.startswith("args[0]")
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, "env": {True: "1"}})  # YAML's unquoted `on:`
    assert info.value.fields == ("env.True",) and "quote it" in str(info.value)
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, "args": ["ok", "\ud800"]})
    assert info.value.fields == ("args[1]",) and "Unicode" in str(info.value)


def test_messages_stay_short_whatever_the_input():
    huge = "x" * 20_000
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, "name": huge, "image": huge, huge: 1, "labels": {huge: huge},
                             "port": 10**4000, "tolerations": [{huge: 1}] * 25})
    assert len(str(info.value)) < 20_000
    assert "... and" in str(info.value)  # more problems than shown
    assert any("<an integer of" in str(p) for p in info.value.problems if p.field == "port")
