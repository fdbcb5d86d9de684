"""The Airflow side's CRC32C engines for HDFS's checksum: the rule is :mod:`tfk8s_airflow.hdfschecksum`.

Why this module: every byte staged on the Airflow worker goes through HDFS's
MD5-of-MD5-of-CRC32C, and for large files the CRCs were the copy's largest CPU cost. The rule
itself (:class:`~tfk8s_airflow.hdfschecksum.HdfsChecksum`, :func:`~tfk8s_airflow.hdfschecksum.compose`,
:func:`~tfk8s_airflow.hdfschecksum.checksums_match`) lives once on the ground floor, shared with
the staging copy pods; what is here is the fastest engine the worker can import, in this order:
``native`` (this package's optional C extension ``_chunkcrc``: all chunks of a buffer in one call,
the SSE4.2 crc32 instruction, the GIL released: ~11 GB/s here), ``google-crc32c`` (C, hardware
CRC32C, but one Python call per 512-byte chunk: ~0.8 GB/s), numpy (the CRC of each chunk is
independent of the others, so many chunks are folded at once, four bytes per step: ~135 MB/s),
pure Python (~7 MB/s, fine for tests and small files). All give identical results; :data:`ENGINE`
says which one is in use. The pod side has only the first and the last (the standard library).
Nothing here imports Airflow.
"""

from __future__ import annotations

import os
import struct
from typing import Any, BinaryIO

from tfk8s_airflow import hdfschecksum
from tfk8s_airflow.hdfschecksum import DEFAULT_BLOCK_SIZE, DEFAULT_BYTES_PER_CRC, HdfsChecksum

_native: Any
_gcrc: Any
_np: Any
try:  # built from _chunkcrc.c when a C compiler is there (setup.py: optional)
    from tfk8s_airflow.pod import _chunkcrc as _native
except ImportError:  # pragma: no cover - depends on the build
    _native = None

try:  # optional fast path (Apache-2.0, a small C extension)
    import google_crc32c as _gcrc
except ImportError:  # pragma: no cover - depends on the environment
    _gcrc = None

try:  # numpy comes with the TensorFlow images and the dev environment; optional here
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only where numpy is missing
    _np = None

__all__ = ["ENGINE", "chunk_crcs", "summer", "hdfs_md5_crc_checksum", "file_checksum"]


def _slicing_tables() -> list[list[int]]:
    t0 = hdfschecksum.TABLE
    tables = [t0]
    for _ in range(3):  # slicing-by-4: T[k][b] = CRC of b followed by k zero bytes
        prev = tables[-1]
        tables.append([(prev[b] >> 8) ^ t0[prev[b] & 0xFF] for b in range(256)])
    return tables


_NP_TABLES = [_np.array(t, dtype=_np.uint32) for t in _slicing_tables()] if _np is not None else None
#: Which CRC32C implementation :func:`chunk_crcs` uses.
ENGINE = ("native" if _native is not None else "google-crc32c" if _gcrc is not None
          else "numpy" if _np is not None else "python")


def chunk_crcs(data: bytes | memoryview, bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> bytes:
    """:func:`tfk8s_airflow.hdfschecksum.python_chunk_crcs` on the fastest engine importable (:data:`ENGINE`)."""
    if _native is not None:
        return bytes(_native.chunk_crcs(data, bytes_per_crc))
    n_full = len(data) // bytes_per_crc
    out = b""
    if n_full:
        full = memoryview(data)[: n_full * bytes_per_crc]
        if _gcrc is not None:
            raw = bytes(full)
            value = _gcrc.value
            out = struct.pack(f">{n_full}I", *[value(raw[i:i + bytes_per_crc])
                                               for i in range(0, len(raw), bytes_per_crc)])
        elif _NP_TABLES is not None and bytes_per_crc % 4 == 0:
            out = _np_chunk_crcs(full, n_full, bytes_per_crc)
        else:
            out = hdfschecksum.python_chunk_crcs(full, bytes_per_crc)
    tail = memoryview(data)[n_full * bytes_per_crc:]
    if len(tail):
        out += struct.pack(">I", hdfschecksum.crc32c(tail))
    return out


def _np_chunk_crcs(full: memoryview, n_chunks: int, bytes_per_crc: int) -> bytes:
    """Vectorised over chunks: each step folds 4 bytes of every chunk at once."""
    assert _NP_TABLES is not None
    t0, t1, t2, t3 = _NP_TABLES
    words = _np.frombuffer(full, dtype="<u4").reshape(n_chunks, bytes_per_crc // 4)
    cols = _np.ascontiguousarray(words.T)  # one contiguous row per step
    crc = _np.full(n_chunks, 0xFFFFFFFF, dtype=_np.uint32)
    idx = _np.empty(n_chunks, dtype=_np.uint32)
    for col in cols:
        crc ^= col
        _np.bitwise_and(crc, 0xFF, out=idx)
        acc = t3[idx]
        _np.right_shift(crc, 8, out=idx)
        idx &= 0xFF
        acc ^= t2[idx]
        _np.right_shift(crc, 16, out=idx)
        idx &= 0xFF
        acc ^= t1[idx]
        _np.right_shift(crc, 24, out=idx)
        acc ^= t0[idx]
        crc = acc
    crc ^= _np.uint32(0xFFFFFFFF)
    return crc.astype(">u4").tobytes()


def summer(block_size: int = DEFAULT_BLOCK_SIZE, bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> HdfsChecksum:
    """A :class:`~tfk8s_airflow.hdfschecksum.HdfsChecksum` on this side's fastest engine."""
    return HdfsChecksum(block_size, bytes_per_crc, engine=chunk_crcs)


def hdfs_md5_crc_checksum(data: bytes, block_size: int = DEFAULT_BLOCK_SIZE,
                          bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> dict[str, Any]:
    """What WebHDFS ``GETFILECHECKSUM`` returns for a file with these bytes."""
    s = summer(block_size, bytes_per_crc)
    s.update(data)
    return s.result()


def file_checksum(path: str | os.PathLike[str] | BinaryIO, block_size: int = DEFAULT_BLOCK_SIZE,
                  bytes_per_crc: int = DEFAULT_BYTES_PER_CRC,
                  read_size: int = 4 * 1024 * 1024) -> dict[str, Any]:
    """The HDFS checksum of a local file, read in ``read_size`` pieces (bounded memory)."""
    s = summer(block_size, bytes_per_crc)
    if hasattr(path, "read"):
        fh = path
        while chunk := fh.read(read_size):
            s.update(chunk)
        return s.result()
    with open(path, "rb", buffering=0) as fh:
        while chunk := fh.read(read_size):
            s.update(chunk)
    return s.result()
