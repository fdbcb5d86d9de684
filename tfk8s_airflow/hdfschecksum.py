"""HDFS's file checksum (MD5-of-MD5-of-CRC32C), the one rule of both sides of the pod wall.

Why this exists: WebHDFS ``GETFILECHECKSUM`` is the only checksum HDFS hands out without
reading the file, and it is not a plain hash: per block, an MD5 over the big-endian CRC32C
of every ``bytesPerCRC`` chunk; per file, an MD5 over the block MD5s as Hadoop holds them
(a growable buffer of capacity 32 bytes, doubled as needed, zero padded, digested whole).
To verify a copy, or to decide that a file already there is complete, the same value is
computed from the local bytes: by the Airflow side (:mod:`tfk8s_airflow.staging.hdfscopy`) and by
the staging copy pods (:mod:`tfk8s_airflow.pod.stagecopy`), both through :class:`HdfsChecksum`.
A file split across copy pods is summed block range by block range (:meth:`HdfsChecksum.block_md5s`)
and composed here (:func:`compose`) by the same rule :meth:`HdfsChecksum.result` uses.

Standard library only, on the ground floor (the pod side imports it; the training image keeps
it). The CRCs of the chunks are an engine each side passes: the copy pods the package's optional
C accelerator (``tfk8s_airflow.pod._chunkcrc``: all chunks of a buffer in one call, the GIL
released) when it is built, the Airflow side the fastest it can import
(:mod:`tfk8s_airflow.staging.checksums`: the accelerator, google-crc32c, numpy); pure Python
(:func:`python_chunk_crcs`, about 7 MB/s: correct, slow) otherwise. Every engine gives the same bytes.

Decisions where the two copies this replaces differed: the empty file is always HDFS's
``MD5-of-0MD5-of-0CRC32`` (both agreed); a ``None`` on either side of :func:`checksums_match` is no
match (the pod's copy took a non-None local); the pod side's buffer is the Airflow side's (1 MiB
batches folded in place, not a copy of every piece).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_BLOCK_SIZE", "DEFAULT_BYTES_PER_CRC", "TABLE", "HdfsChecksum", "ChunkCrcs", "crc32c",
           "python_chunk_crcs", "compose", "checksums_match", "params_from_remote"]

DEFAULT_BLOCK_SIZE = 128 * 1024 * 1024
DEFAULT_BYTES_PER_CRC = 512
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
#: ``chunk_crcs(data, bytes_per_crc)``: the big-endian CRC32C of each chunk, concatenated.
ChunkCrcs = Callable[[bytes | memoryview, int], bytes]


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


#: The byte-at-a-time CRC32C table (the Airflow side's numpy engine derives its slicing tables from it).
TABLE = _table()


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, the checksum HDFS stores per 512-byte chunk."""
    crc = 0xFFFFFFFF
    table = TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def python_chunk_crcs(data: bytes | memoryview, bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> bytes:
    """The big-endian CRC32C of each ``bytes_per_crc`` chunk of ``data``, concatenated (the last
    chunk may be short), exactly the bytes HDFS feeds into a block's MD5; in pure Python (the
    engine of last resort: each side passes its fastest to :class:`HdfsChecksum`)."""
    view = memoryview(data)
    return b"".join(struct.pack(">I", crc32c(view[i:i + bytes_per_crc])) for i in range(0, len(view), bytes_per_crc))


class HdfsChecksum:
    """Incremental HDFS ``MD5-of-MD5-of-CRC32C`` of a byte stream that starts at a block boundary.

    Feed the bytes in order with :meth:`update` (any chunking), then :meth:`result` gives what
    WebHDFS ``GETFILECHECKSUM`` reports for a file with those bytes, written with this block size
    and ``bytes_per_crc``; :meth:`block_md5s` gives the block MD5s of a byte range of a file (a copy
    pod's part), which :func:`compose` turns into the file's checksum. Memory: one batch plus the
    block MD5s (16 bytes per HDFS block). ``engine`` computes the CRCs (default :func:`python_chunk_crcs`).
    """

    # Bytes gathered before computing CRCs. Small enough that one batch holds the GIL only
    # briefly (the copy's other streams keep moving), large enough for numpy to be efficient.
    BATCH = 1024 * 1024

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE, bytes_per_crc: int = DEFAULT_BYTES_PER_CRC,
                 engine: ChunkCrcs | None = None) -> None:
        if block_size <= 0 or bytes_per_crc <= 0 or block_size % bytes_per_crc:
            raise ValueError(f"block size {block_size} must be a positive multiple of "
                             f"bytes per CRC {bytes_per_crc}")
        self.block_size = block_size
        self.bytes_per_crc = bytes_per_crc
        self.engine: ChunkCrcs = engine or python_chunk_crcs
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
            self._block_md5.update(self.engine(buf[pos:pos + take], self.bytes_per_crc))
            self._block_fill += take
            pos += take
            if self._block_fill == self.block_size:
                self._block_md5s.append(self._block_md5.digest())
                self._block_md5 = hashlib.md5()
                self._block_fill = 0
        return pos

    def _finish(self) -> list[bytes]:
        with memoryview(self._pending) as buf:
            used = self._fold(buf, final=True)
        del self._pending[:used]
        if self._block_fill:  # a last, short block ends the stream
            self._block_md5s.append(self._block_md5.digest())
            self._block_md5 = hashlib.md5()
            self._block_fill = 0
        return self._block_md5s

    def block_md5s(self) -> list[str]:
        """The MD5 (hex) of each block's CRCs, the last block's short when the bytes end inside one."""
        return [m.hex() for m in self._finish()]

    def result(self) -> dict[str, Any]:
        """``{"algorithm", "bytes", "length"}`` as WebHDFS reports it (compare with
        :func:`checksums_match`: WebHDFS may pad ``bytes``)."""
        return compose(self.block_md5s(), self.length, self.block_size, self.bytes_per_crc)


def compose(md5s: Sequence[str], size: int, block_size: int = DEFAULT_BLOCK_SIZE,
            bytes_per_crc: int = DEFAULT_BYTES_PER_CRC) -> dict[str, Any]:
    """What WebHDFS ``GETFILECHECKSUM`` reports for a file of ``size`` bytes whose block MD5s (hex,
    in order) are ``md5s``."""
    if size == 0:  # HDFS reports a CRC32 variant with zero parameters
        return {"algorithm": "MD5-of-0MD5-of-0CRC32", "bytes": "0" * 24 + hashlib.md5(b"\0" * 32).hexdigest(),
                "length": 28}
    joined = b"".join(bytes.fromhex(m) for m in md5s)
    capacity = 32
    while capacity < len(joined):
        capacity *= 2
    per_block = block_size // bytes_per_crc if len(md5s) > 1 else 0
    return {"algorithm": f"MD5-of-{per_block}MD5-of-{bytes_per_crc}CRC32C",
            "bytes": struct.pack(">iq", bytes_per_crc, per_block).hex()
            + hashlib.md5(joined + b"\0" * (capacity - len(joined))).hexdigest(),
            "length": 28}


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
