"""The package's HDFS checksum: engines agree, streaming equals one-shot (real HDFS: tests/staging)."""
from __future__ import annotations

import hashlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfk8s_airflow import hdfschecksum
from tfk8s_airflow.staging import checksums

#: Set by scripts/matrix when the package under test is the pure-Python wheel (no accelerator):
#: then the "native" cases prove the fallback instead (a source install must have it built).
PURE = os.environ.get("TFK8S_PURE_PYTHON") == "1"


def test_crc32c_check_value():
    assert hdfschecksum.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("engine", ["python", "numpy", "google-crc32c", "native"])
def test_engines_agree(monkeypatch, engine):
    data = os.urandom(512 * 37 + 100)
    expected = b"".join(hdfschecksum.crc32c(data[i:i + 512]).to_bytes(4, "big")
                        for i in range(0, len(data), 512))
    if engine == "native" and PURE:
        assert checksums._native is None, "the pure-Python wheel carries a C extension"
        assert checksums.ENGINE != "native"
    elif engine == "native":
        assert checksums._native is not None, ("the C extension _chunkcrc is not built: "
                                               "pip install -e . needs a C compiler")
        assert checksums.ENGINE == "native"
    else:
        monkeypatch.setattr(checksums, "_native", None)
    if engine == "python":
        monkeypatch.setattr(checksums, "_gcrc", None)
        monkeypatch.setattr(checksums, "_NP_TABLES", None)
    elif engine == "numpy":
        assert checksums._np is not None, "numpy is missing: install the dev extra"
        monkeypatch.setattr(checksums, "_gcrc", None)
    else:
        assert checksums._gcrc is not None, "google-crc32c is missing: it is a requirement"
    assert checksums.chunk_crcs(data) == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=0, max_size=3000),
       bytes_per_crc=st.sampled_from([1, 3, 4, 7, 8, 9, 512, 1000]))
def test_native_engine_equals_the_reference(data, bytes_per_crc):
    """Every length and alignment: the 8-byte steps, the byte tail, a short last chunk."""
    expected = b"".join(hdfschecksum.crc32c(data[i:i + bytes_per_crc]).to_bytes(4, "big")
                        for i in range(0, len(data), bytes_per_crc))
    if PURE:  # the engine the pure-Python wheel falls back to equals the reference
        assert checksums._native is None
        assert checksums.chunk_crcs(data, bytes_per_crc) == expected
        return
    assert checksums._native is not None
    assert checksums._native.chunk_crcs(data, bytes_per_crc) == expected
    assert checksums._native.chunk_crcs(memoryview(bytearray(data)), bytes_per_crc) == expected


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=0, max_size=5000), cuts=st.lists(st.integers(1, 1500), max_size=10),
       block=st.sampled_from([512, 1024, 1536, 128 * 1024 * 1024]))
def test_streaming_equals_one_shot(data, cuts, block):
    summer = hdfschecksum.HdfsChecksum(block_size=block)
    summer.BATCH = 700  # force many partial drains
    pos = 0
    for cut in cuts:
        summer.update(data[pos:pos + cut])
        pos += cut
    summer.update(data[pos:])
    assert summer.result() == checksums.hdfs_md5_crc_checksum(data, block_size=block)


def test_empty_file_matches_what_hdfs_reports():
    # as WebHDFS GETFILECHECKSUM returns it for a zero-length file (padded)
    remote = {"algorithm": "MD5-of-0MD5-of-0CRC32",
              "bytes": "0" * 24 + hashlib.md5(b"\0" * 32).hexdigest() + "00000000", "length": 28}
    assert hdfschecksum.checksums_match(checksums.hdfs_md5_crc_checksum(b""), remote)


def test_file_checksum_reads_in_pieces(tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 7)
    (tmp_path / "f").write_bytes(data)
    assert checksums.file_checksum(tmp_path / "f", read_size=100_000) == \
        checksums.hdfs_md5_crc_checksum(data)
    assert hdfschecksum.params_from_remote({"bytes": "00000200" + "0" * 48}) == 512
