"""A replica's whole log, streamed to ``<log dir>/<job>/<pod>.log`` while the replica runs.

Why streamed by the replica's trigger: TFJob users lost the logs of failed and healthy peers at
cleanup, and a tail read at teardown is all that survives a deleted pod. The replica task's
trigger already watches its replica; it also follows the training container's log
(``follow=true``) and appends what arrives, in bounded chunks, to the job's log directory (the
``logs`` volume's host path), so the complete log exists when the pod is gone and teardown never
waits on a huge log.

How it stays correct and bounded:

* one container at a time, identified by the pod's creation time and the container's ID (a
  group restart recreates a pod under the same name; a restart in place starts a new
  container): a line ``--- <pod>: ... ---`` separates them in the file. A follower that first
  meets a container that has restarted (the trigger started late, or again after a triggerer
  restart) writes the previous container's log first, as ``kubectl logs --previous`` has it;
  containers before that one are gone from Kubernetes too. A kubelet keeps one ended run per
  container and removes the earlier one as soon as a later one ends; asked for a run it removed
  it answers (status 200) with the line ``unable to retrieve container logs for <id>``: that
  answer is recognised (:func:`kubelet_said_gone`), said in the task log, and never written as
  the replica's output;
* a broken stream is followed again from the start of that container's log, skipping the bytes
  already written, so nothing is written twice and nothing needs per-line timestamps;
* memory: at most one chunk (:data:`CHUNK_BYTES`) is held; it is flushed when full or after
  :data:`FLUSH_S` without more output;
* the file: begun by replacing whatever was at its name, then only appended to, through
  :mod:`tfk8s_airflow.volume.logs` (no link, FIFO or hard link on the volume is written
  through); at :data:`MAX_LOG_BYTES` the stream stops with a line saying so.

The follower never fails the task: errors are logged once and the stream is tried again on the
next change of the replica; teardown's bounded tail remains the fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfk8s_airflow.exceptions import DataError
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S
from tfk8s_airflow.volume import logs

__all__ = ["LogFollower", "Incarnation", "CHUNK_BYTES", "FLUSH_S", "MAX_LOG_BYTES", "kubelet_said_gone"]

#: Bytes held in memory before they are appended to the file.
CHUNK_BYTES = 64 * 1024
#: Output is appended at least this often while a replica logs.
FLUSH_S = 1.0
#: A streamed log stops growing here (a line says so); the pod's own log is untouched.
MAX_LOG_BYTES = 1 << 30
#: A broken stream of a running container is followed again after this long (doubling per error).
RETRY_S = 2.0
#: Consecutive errors after which one container's log is given up (teardown's tail remains).
MAX_ERRORS = 5
#: Seconds :meth:`LogFollower.close` waits for a cancelled follower to end before it leaves it behind.
CLOSE_TIMEOUT_S = 5.0

#: What a kubelet answers (status 200) for the log of a container run it no longer has.
GONE_ANSWER = re.compile(rb"unable to retrieve container logs for [^\s]+\s*")
#: Bytes of a previous run's log read before deciding whether it is the kubelet's "gone" answer.
GONE_PEEK_BYTES = 512

log = logging.getLogger(__name__)


def kubelet_said_gone(body: bytes) -> bool:
    """Whether a whole log body is the kubelet's answer for a run it removed, not a program's output."""
    return GONE_ANSWER.fullmatch(body) is not None


class _Peeked:
    """A log response whose first bytes were read already: they come first, then the rest of the stream."""

    def __init__(self, resp: Any, head: bytes):
        self._resp, self._head = resp, head
        self.content = self

    async def read(self, n: int = -1) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return bytes(await self._resp.content.read(n))

    async def iter_chunked(self, n: int) -> Any:
        if self._head:
            yield self._head
            self._head = b""
        async for chunk in self._resp.content.iter_chunked(n):
            yield chunk

    def release(self) -> None:
        self._resp.release()


@dataclass(frozen=True)
class Incarnation:
    """One container's life: the pod (by its creation time) and the container's ID; ``restarts``
    (the pod's restart count of the container) only labels it."""

    created: float | None
    container_id: str
    restarts: int = field(default=0, compare=False)

    def header(self, pod: str) -> bytes:
        """The line that separates this container's output from the one before it in the file."""
        return f"--- {pod}: container restart {self.restarts} ({self.container_id}) ---\n".encode()


class LogFollower:
    """Follows one replica's training container into its log file; see the module docstring.

    :param open_api: returns an async context manager yielding an ``ApiClient`` (a hook's ``get_conn``).
    :param log_dir: the job's log directory (trusted: the validated spec's ``logs`` host path).
    """

    def __init__(self, *, open_api: Callable[[], Any], namespace: str, pod: str, container: str,
                 log_dir: str, job: str, max_bytes: int = MAX_LOG_BYTES) -> None:
        self.open_api, self.namespace, self.pod, self.container = open_api, namespace, pod, container
        self.log_dir, self.job, self.max_bytes = log_dir, job, max_bytes
        self.written = 0  # bytes in the file
        self.path = str(logs.archive_path(log_dir, job, pod))
        self._current: Incarnation | None = None
        self._running = False  # the current container still runs (more output may come)
        self._done: set[Incarnation] = set()
        self._consumed: dict[Incarnation, int] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._started_file = False
        self._said_error = False
        self._full = False

    # ------------------------------------------------------------------ driven by the trigger
    def update(self, incarnation: Incarnation | None, running: bool) -> None:
        """The replica as the latest snapshot shows it (None: no started container yet)."""
        if incarnation != self._current or running != self._running:
            self._current, self._running = incarnation, running
            self._changed.set()
        if self._task is None and incarnation is not None:
            self._task = asyncio.ensure_future(self._run())

    async def close(self, drain: float) -> None:
        """Stop following: give an ending container up to ``drain`` seconds to deliver its last
        output, then cancel, and append what is buffered."""
        task = self._task
        if task is None:
            return
        self._running = False
        self._changed.set()
        # asyncio.wait, not wait_for: it never cancels (or swallows a cancellation of) anything itself,
        # and each wait is bounded, so a follower that does not end can never hold its replica's task.
        await asyncio.wait({task}, timeout=drain)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
        if not task.done():
            log.warning("the log stream of %s/%s did not stop within %.0fs of being cancelled: left behind",
                        self.namespace, self.pod, CLOSE_TIMEOUT_S)
        elif not task.cancelled() and task.exception() is not None:
            self._say(f"following the log of {self.namespace}/{self.pod} ended with {task.exception()!r}")

    # ------------------------------------------------------------------ the loop
    async def _run(self) -> None:
        errors = 0
        while True:
            inc = self._current
            if inc is None or inc in self._done or self._full:
                self._changed.clear()  # no await since reading the state: no update is missed
                await self._changed.wait()
                errors = 0
                continue
            try:
                ended = await self._follow(inc)
                errors = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - never fails the task: logged, tried again
                errors += 1
                self._say(f"following the log of {self.namespace}/{self.pod} failed ({errors}x): "
                          f"{type(exc).__name__}: {exc}")
                if errors >= MAX_ERRORS:
                    self._done.add(inc)  # e.g. a node without a log endpoint: teardown's tail is the fallback
                    continue
                ended = False
            if ended and (inc != self._current or not self._running):
                self._done.add(inc)
                continue
            self._changed.clear()
            # Not started yet, or a stream that ended while the container runs: again soon.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(RETRY_S * 2 ** errors, 30.0)):
                    await self._changed.wait()

    async def _follow(self, inc: Incarnation) -> bool:
        """Stream ``inc``'s output from where the file left it; True when the stream ended normally
        (or ``inc``'s output is gone), False when it cannot be read yet."""
        from kubernetes_asyncio import client as async_client

        skip = self._consumed.get(inc, 0)
        async with self.open_api() as api:
            v1 = async_client.CoreV1Api(api)
            resp = await self._open(v1, previous=False)
            if resp is None:
                return False
            # The log API names a container, not one of its runs: make sure the stream is inc's.
            # Read after the stream opened, the pod still showing inc means the stream is inc's.
            now = await self._container_now(v1)
            current = now is not None and now[0] == inc.container_id
            if not current:
                resp.release()
                if now is None or now[1] != inc.restarts + 1:
                    self._say(f"the output of {self.pod}'s container {inc.container_id} is gone from Kubernetes "
                              "(restarted more than once since): not in the streamed log")
                    return True
                resp = await self._open_previous(v1)  # one restart later inc's log is the previous one
                if resp is None:
                    return True
            buf = bytearray()
            try:
                if not self._started_file:
                    await asyncio.to_thread(logs.start_log, self.log_dir, self.job, self.pod)
                    self._started_file = True
                    if current and inc.restarts > 0 and skip == 0 and await self._copy_previous(v1):
                        buf += inc.header(self.pod)
                elif skip == 0:
                    buf += inc.header(self.pod)
                while True:
                    try:
                        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancellation that
                        # arrives as its read completes, and the follower would then never stop.
                        async with asyncio.timeout(FLUSH_S):
                            chunk = await resp.content.read(CHUNK_BYTES)
                    except TimeoutError:
                        chunk = None
                    if chunk == b"":
                        break
                    if chunk:
                        self._consumed[inc] = self._consumed.get(inc, 0) + len(chunk)
                        if skip:
                            dropped = min(skip, len(chunk))
                            chunk, skip = chunk[dropped:], skip - dropped
                        buf += chunk
                    if buf and (chunk is None or len(buf) >= CHUNK_BYTES):
                        if not await self._append(buf):
                            return True
                        buf = bytearray()
            finally:
                if buf:
                    await self._append(buf)
                resp.release()
        return True

    async def _open(self, v1: Any, *, previous: bool) -> Any:
        """The log response (followed unless ``previous``), or None when there is no such log yet."""
        from kubernetes_asyncio import client as async_client

        try:
            # A followed log may be quiet for hours (a parameter server): only connecting is bounded
            # there; a previous container's log is read with an idle bound as well.
            timeout = (REQUEST_TIMEOUT_S, REQUEST_TIMEOUT_S if previous else None)
            return await v1.read_namespaced_pod_log(name=self.pod, namespace=self.namespace, container=self.container,
                                                    follow=not previous, previous=previous,
                                                    _preload_content=False, _request_timeout=timeout)
        except async_client.ApiException as exc:
            if exc.status in (400, 404):  # not started yet, or gone: the next change says which
                return None
            raise

    async def _open_previous(self, v1: Any) -> Any:
        """The previous container's log response, or None when there is none or the kubelet no longer has
        it (said in the task log: its answer is not the replica's output)."""
        resp = await self._open(v1, previous=True)
        if resp is None:
            return None
        head = b""
        try:
            while len(head) < GONE_PEEK_BYTES:
                chunk = await resp.content.read(GONE_PEEK_BYTES - len(head))
                if not chunk:
                    if kubelet_said_gone(head):
                        resp.release()
                        log.info("the output of %s's previous container is gone from its node (the kubelet keeps "
                                 "one ended run per container): not in the streamed log (%s)", self.pod,
                                 head.decode(errors="replace").strip())
                        return None
                    break
                head += chunk
        except BaseException:
            resp.release()
            raise
        return _Peeked(resp, head)

    async def _container_now(self, v1: Any) -> tuple[str | None, int] | None:
        """(container ID while it runs or after it ended, restart count) of the container now; None
        when the pod or its status is gone."""
        from kubernetes_asyncio import client as async_client

        try:
            resp: Any = await v1.read_namespaced_pod(name=self.pod, namespace=self.namespace, _preload_content=False,
                                                     _request_timeout=REQUEST_TIMEOUT_S)
            pod = json.loads(await resp.read())
        except (async_client.ApiException, ValueError, TimeoutError):
            return None
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == self.container:
                state = cs.get("state") or {}
                live = "running" in state or "terminated" in state
                return (cs.get("containerID") if live else None), int(cs.get("restartCount") or 0)
        return None

    async def _copy_previous(self, v1: Any) -> bool:
        """The previous container's whole log into the file; False when there is none (or it is gone)."""
        resp = await self._open_previous(v1)
        if resp is None:
            return False
        try:
            async for chunk in resp.content.iter_chunked(CHUNK_BYTES):
                if not await self._append(chunk):
                    break
        finally:
            resp.release()
        return True

    async def _append(self, data: bytes | bytearray) -> bool:
        """Append to the file; False once the file reached ``max_bytes`` (a line says so)."""
        room = self.max_bytes - self.written
        out = bytes(data[:max(room, 0)])
        if len(data) > room:
            out += (f"\n[tfk8s: this log reached {self.max_bytes} bytes; the rest is in the pod's own log "
                    "while the pod exists]\n").encode()
            self._full = True
        try:
            self.written = await asyncio.to_thread(logs.append_log, self.log_dir, self.job, self.pod, out)
        except (DataError, OSError) as exc:
            self._say(f"appending to {self.path} failed: {exc}")
            self._full = True  # something is in the way on the volume: stop, teardown's tail is the fallback
        return not self._full

    def _say(self, message: str) -> None:
        (log.debug if self._said_error else log.warning)("%s", message)
        self._said_error = True
