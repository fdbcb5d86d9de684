"""A pod's log read within a byte budget: the watch's reads of a replica's log, apart from its loop.

Why bounded: a training program's log has no size limit, and the triggerer reads it for the
job's progress (every poll, the lead replica's tail) and for a failed replica's reason. Each read
here is at most two requests, each bounded (``limitBytes``, ``tailLines``), and what is kept in
memory stays within about the budget however much the server sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S, wrap_api_error

__all__ = ["BoundedLog", "read_bounded", "read_raw"]


@dataclass(frozen=True)
class BoundedLog:
    """A log read within a byte budget: all of it (``tail`` None), or its start and its end."""

    head: str
    tail: str | None = None


async def read_bounded(v1: Any, namespace: str, pod: str, container: str, *, max_bytes: int, tail_lines: int = 5000,
                       previous: bool = False, tail_only: bool = False) -> BoundedLog:
    """A replica's log, bounded.

    The whole log when it fits in ``max_bytes``; otherwise its first half and its last
    ``tail_lines`` lines (capped to the other half). Two bounded requests at most; memory
    stays within about ``max_bytes``. ``tail_only``: just the last ``max_bytes`` (one request).
    ``v1`` is a ``kubernetes_asyncio`` ``CoreV1Api``.
    """
    if tail_only:
        tail = await read_raw(v1, namespace, pod, container, previous, tail_lines=200, keep_last=max_bytes)
        return BoundedLog(tail.decode("utf-8", "replace"))
    head = await read_raw(v1, namespace, pod, container, previous, limit_bytes=max_bytes + 1)
    if len(head) <= max_bytes:
        return BoundedLog(head.decode("utf-8", "replace"))
    half = max(max_bytes // 2, 1)
    tail = await read_raw(v1, namespace, pod, container, previous, tail_lines=tail_lines, keep_last=half)
    first = head[:half]
    cut = first.rfind(b"\n")
    first = first[:cut + 1] if cut > 0 else first
    return BoundedLog(first.decode("utf-8", "replace"), tail.decode("utf-8", "replace"))


async def read_raw(v1: Any, namespace: str, pod: str, container: str, previous: bool, *,
                   limit_bytes: int | None = None, tail_lines: int | None = None,
                   keep_last: int | None = None) -> bytes:
    """One log request: at most ``limit_bytes`` bytes, or the last ``tail_lines`` lines of which
    only the last ``keep_last`` bytes are kept (from a line's start)."""
    from kubernetes_asyncio import client as async_client

    kwargs: dict[str, Any] = {"name": pod, "namespace": namespace, "container": container,
                              "previous": previous, "_preload_content": False,
                              "_request_timeout": REQUEST_TIMEOUT_S}
    if limit_bytes is not None:
        kwargs["limit_bytes"] = limit_bytes
    if tail_lines is not None:
        kwargs["tail_lines"] = tail_lines
    try:
        resp = await v1.read_namespaced_pod_log(**kwargs)
    except async_client.ApiException as exc:
        raise wrap_api_error(f"reading the log of {namespace}/{pod} ({container})", exc) from exc
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(1 << 16):
        buf += chunk
        if keep_last is not None and len(buf) > 2 * keep_last:
            del buf[:len(buf) - keep_last]
        if limit_bytes is not None and len(buf) >= limit_bytes:
            break
    resp.release()
    if keep_last is not None and len(buf) > keep_last:
        del buf[:len(buf) - keep_last]
        cut = buf.find(b"\n")
        if 0 <= cut < len(buf) - 1:
            del buf[:cut + 1]
    return bytes(buf)
