"""What a kubelet answers for the log of a container run it removed (tfk8s_airflow.k8s.logstream).

A real kubelet keeps one ended run per container; asked ``previous=true`` for a run it removed it answers
status 200 with one line. That line is recognised as the whole body only: a program that prints it as part
of its output is still streamed. (The real kubelet's answer is checked on the devstack's node:
tests/realpods/test_log_stream.py.)
"""
from __future__ import annotations

import asyncio

from tfk8s_airflow.k8s.logstream import _Peeked, kubelet_said_gone

GONE = b"unable to retrieve container logs for containerd://" + b"a" * 64


def test_the_kubelets_answer_is_recognised():
    assert kubelet_said_gone(GONE)
    assert kubelet_said_gone(GONE + b"\n")


def test_output_that_only_starts_or_ends_like_it_is_output():
    assert not kubelet_said_gone(GONE + b"\nline 1 of the program\n")
    assert not kubelet_said_gone(b"step 1\n" + GONE)
    assert not kubelet_said_gone(b"")
    assert not kubelet_said_gone(b"unable to retrieve container logs for \n")


class _Content:
    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks

    async def read(self, n: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    async def iter_chunked(self, n: int):
        while self.chunks:
            yield self.chunks.pop(0)


class _Resp:
    def __init__(self, chunks: list[bytes]):
        self.content = _Content(chunks)
        self.released = False

    def release(self) -> None:
        self.released = True


def test_a_peeked_response_gives_its_head_first_then_the_rest():
    async def read_all(peeked: _Peeked) -> bytes:
        out = b""
        while chunk := await peeked.content.read(4):
            out += chunk
        return out

    async def chunked(peeked: _Peeked) -> bytes:
        return b"".join([c async for c in peeked.content.iter_chunked(4)])

    assert asyncio.run(read_all(_Peeked(_Resp([b"cd", b"ef"]), b"ab"))) == b"abcdef"
    assert asyncio.run(chunked(_Peeked(_Resp([b"cd", b"ef"]), b"ab"))) == b"abcdef"
    assert asyncio.run(read_all(_Peeked(_Resp([]), b""))) == b""
    resp = _Resp([])
    _Peeked(resp, b"x").release()
    assert resp.released
