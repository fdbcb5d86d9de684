"""HDFS file checksums (MD5-of-MD5-of-CRC32C) computed from local bytes.

Why this exists: WebHDFS ``GETFILECHECKSUM`` is the only checksum HDFS hands out without
reading the file, and it is not a plain hash: per block, an MD5 over the big-endian CRC32C
of every ``bytesPerCRC`` chunk; per file, an MD5 over the block MD5s as Hadoop holds them
(a growable buffer of capacity 32 bytes, doubled as needed, zero padded, digested whole).
To verify a copy on GlusterFS, or to decide that a cached file is already there, the same
value must be computed from the local bytes. :class:`HdfsChecksum` does that incrementally
so a copy can checksum the stream it writes, without a second read and in bounded memory.

Speed matters (every staged byte goes through it, and for large files the CRCs were the
copy's largest CPU cost), so the CRCs use the fastest engine importable, in this order:
``native`` (this package's optional C extension ``_chunkcrc``: all chunks of a buffer in
one call, the SSE4.2 crc32 instruction, the GIL released: ~11 GB/s here), ``google-crc32c``
(C, hardware CRC32C, but one Python call per 512-byte chunk: ~0.8 GB/s), numpy (the CRC of
each chunk is independent of the others, so many chunks are folded at once, four bytes per
step: ~135 MB/s), pure Python (~7 MB/s, fine for tests and small files). All give
identical results; :data:`ENGINE` says which one is in use. Nothing here imports Airflow.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Mapping
from typing import Any, BinaryIO

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

__all__ = [
    "DEFAULT_BLOCK_SIZE", "DEFAULT_BYTES_PER_CRC", "ENGINE", "HdfsChecksum", "crc32c", "chunk_crcs",
    "hdfs_md5_crc_checksum", "file_checksum", "params_from_remote", "checksums_match",
]

DEFAULT_BLOCK_SIZE = 128 * 1024 * 1024
DEFAULT_BYTES_PER_CRC = 512
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _tables() -> list[list[int]]:
    t0 = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        t0.append(crc)
    tables = [t0]
    for _ in range(3):  # slicing-by-4: T[k][b] = CRC of b followed by k zero bytes
        prev = tables[-1]
        tables.append([(prev[b] >> 8) ^ t0[prev[b] & 0xFF] for b in range(256)])
    return tables


_TABLES = _tables()
_T0 = _TABLES[0]
_NP_TABLES = [_np.array(t, dtype=_np.uint32) for t in _TABLES] if _np is not None else None
#: Which CRC32C implementation :func:`chunk_crcs` uses.
ENGINE = ("native" if _native is not None else "google-crc32c" if _gcrc is not None
          else "numpy" if _np is not None else "python")


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, the checksum HDFS stores per 512-byte chunk."""
    crc = 0xFFFFFFFF
    table = _T0
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def chunk_crcs(data: bytes | memoryview, bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> bytes:
    """The big-endian CRC32C of each ``bytes_per_crc`` chunk of ``data``, concatenated
    (the last chunk may be short), exactly the bytes HDFS feeds into a block's MD5."""
    if _native is not None:
        return _native.chunk_crcs(data, bytes_per_crc)
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
            out = b"".join(struct.pack(">I", crc32c(full[i:i + bytes_per_crc]))
                           for i in range(0, len(full), bytes_per_crc))
    tail = memoryview(data)[n_full * bytes_per_crc:]
    if len(tail):
        out += struct.pack(">I", crc32c(bytes(tail)))
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


class HdfsChecksum:
    """Incremental HDFS ``MD5-of-MD5-of-CRC32C`` of a byte stream.

    Feed the file's bytes in order with :meth:`update` (any chunking), then :meth:`result`
    gives what WebHDFS ``GETFILECHECKSUM`` reports for a file with those bytes, written with
    this block size and ``bytes_per_crc``. Memory: one partial CRC chunk plus the block MD5s
    (16 bytes per HDFS block).
    """

    # Bytes gathered before computing CRCs. Small enough that one batch holds the GIL only
    # briefly (the copy's other streams keep moving), large enough for numpy to be efficient.
    BATCH = 1024 * 1024

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE,
                 bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> None:
        if block_size <= 0 or bytes_per_crc <= 0 or block_size % bytes_per_crc:
            raise ValueError(f"block size {block_size} must be a positive multiple of "
                             f"bytes per CRC {bytes_per_crc}")
        self.block_size = block_size
        self.bytes_per_crc = bytes_per_crc
        self.length = 0
        self._pending = bytearray()
        self._block_fill = 0  # bytes of the current block already folded into _block_md5
        self._block_md5 = hashlib.md5()
        self._block_md5s: list[bytes] = []

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self.length += len(data)
        if self._pending or len(data) < self.BATCH:
            self._pending += data
            if len(self._pending) >= self.BATCH:
                with memoryview(self._pending) as buf:
                    used = self._fold(buf, final=False)
                del self._pending[:used]
            return
        with memoryview(data) as buf:  # big pieces are folded in place, not copied first
            used = self._fold(buf, final=False)
            self._pending += buf[used:]

    def _fold(self, buf: memoryview, final: bool) -> int:
        """Fold ``buf`` (all of it when ``final``, else whole CRC chunks) into the block
        MD5s; returns how many bytes were used."""
        pos = 0
        while pos < len(buf):
            room = self.block_size - self._block_fill
            take = min(room, len(buf) - pos)
            if not final:  # keep a partial CRC chunk for later
                take -= take % self.bytes_per_crc
                if take == 0:
                    break
            self._block_md5.update(chunk_crcs(buf[pos:pos + take], self.bytes_per_crc))
            self._block_fill += take
            pos += take
            if self._block_fill == self.block_size:
                self._block_md5s.append(self._block_md5.digest())
                self._block_md5 = hashlib.md5()
                self._block_fill = 0
        return pos

    def _drain(self, final: bool) -> None:
        with memoryview(self._pending) as buf:
            used = self._fold(buf, final)
        del self._pending[:used]

    def result(self) -> dict[str, Any]:
        """``{"algorithm", "bytes", "length"}`` as WebHDFS reports it (compare with
        :func:`checksums_match`: WebHDFS may pad ``bytes``)."""
        self._drain(final=True)
        md5s = list(self._block_md5s)
        if self._block_fill:
            md5s.append(self._block_md5.digest())
        if self.length == 0:  # HDFS reports a CRC32 variant with zero parameters
            return {"algorithm": "MD5-of-0MD5-of-0CRC32",
                    "bytes": "0" * 24 + hashlib.md5(b"\0" * 32).hexdigest(), "length": 28}
        joined = b"".join(md5s)
        capacity = 32
        while capacity < len(joined):
            capacity *= 2
        crc_per_block = self.block_size // self.bytes_per_crc if len(md5s) > 1 else 0
        file_md5 = hashlib.md5(joined + b"\0" * (capacity - len(joined))).hexdigest()
        return {
            "algorithm": f"MD5-of-{crc_per_block}MD5-of-{self.bytes_per_crc}CRC32C",
            "bytes": struct.pack(">iq", self.bytes_per_crc, crc_per_block).hex() + file_md5,
            "length": 28,
        }


def hdfs_md5_crc_checksum(data: bytes, block_size: int = DEFAULT_BLOCK_SIZE,
                          bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> dict[str, Any]:
    """What WebHDFS ``GETFILECHECKSUM`` returns for a file with these bytes."""
    summer = HdfsChecksum(block_size, bytes_per_crc)
    summer.update(data)
    return summer.result()


def file_checksum(path: str | os.PathLike[str] | BinaryIO, block_size: int = DEFAULT_BLOCK_SIZE,
                  bytes_per_crc: int = DEFAULT_BYTES_PER_CRC,
                  read_size: int = 4 * 1024 * 1024) -> dict[str, Any]:
    """The HDFS checksum of a local file, read in ``read_size`` pieces (bounded memory)."""
    summer = HdfsChecksum(block_size, bytes_per_crc)
    if hasattr(path, "read"):
        fh = path
        while chunk := fh.read(read_size):
            summer.update(chunk)
        return summer.result()
    with open(path, "rb", buffering=0) as fh:
        while chunk := fh.read(read_size):
            summer.update(chunk)
    return summer.result()


def params_from_remote(checksum: Mapping[str, Any] | None) -> int:
    """``bytesPerCRC`` encoded in a WebHDFS checksum (first 4 bytes of ``bytes``); HDFS's
    default (512) when there is none."""
    raw = str((checksum or {}).get("bytes", ""))
    value = int(raw[:8], 16) if len(raw) >= 8 else 0
    return value or DEFAULT_BYTES_PER_CRC


def checksums_match(local: Mapping[str, Any] | None, remote: Mapping[str, Any] | None) -> bool:
    """Same algorithm and digest. WebHDFS pads ``bytes`` beyond ``length`` with zeros, so
    only the first ``length`` bytes (hex: twice as many characters) are compared."""
    if not local or not remote:
        return False
    if local.get("algorithm") != remote.get("algorithm"):
        return False
    n = 2 * int(remote.get("length") or 28)
    return str(local.get("bytes", ""))[:n] == str(remote.get("bytes", ""))[:n]
