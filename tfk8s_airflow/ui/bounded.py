"""Requests the TF jobs view makes on behalf of a page: bounded in time, never retried, one per job at a time.

Why: a page is served by one of the api-server's threads. A LIST of a job's pods against a cluster
that accepts the connection and never answers (a stuck API server, a black-holed route) held that
thread for as long as the client's defaults allowed (no timeout, three retries): still blocked after
100 s, and every open page that polled added one more. Here a request has :data:`VIEW_REQUEST_TIMEOUT_S`
in all (connecting, the answer's headers, and reading its body, checked between chunks), is made
once (no retry: the page polls again by itself), and concurrent callers for the same job share the
one request in flight (:class:`SingleFlight`) instead of each making their own. A failure is kept
as briefly as an answer (the view's cache), so a dead cluster costs one bounded request per job and
cache period, whatever the number of pages open.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Generic, TypeVar

__all__ = ["VIEW_REQUEST_TIMEOUT_S", "SingleFlight", "ViewRequestError", "list_pods_bounded"]

#: Seconds a request made for a page may take in all.
VIEW_REQUEST_TIMEOUT_S = 5.0
#: Bytes of a LIST answer read at most (a 512-pod job's LIST is ~20 MB).
VIEW_LIST_MAX_BYTES = 64 * 2**20
_CHUNK = 1 << 16

T = TypeVar("T")


class ViewRequestError(Exception):
    """A request made for a page did not answer in time, or failed: the page shows the records' view."""


class SingleFlight(Generic[T]):
    """At most one call in flight per key; callers that come while it runs wait for its result.

    A waiter waits at most ``timeout`` seconds (the bound of the call it shares), so no caller is
    held longer than its own request would have taken.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: dict[Hashable, Future[T]] = {}
        self.calls = 0  # calls actually made (tests read it)

    def do(self, key: Hashable, fn: Callable[[], T], timeout: float) -> T:
        with self._lock:
            future = self._in_flight.get(key)
            leader = future is None
            if future is None:
                future = Future()
                self._in_flight[key] = future
                self.calls += 1
        if leader:
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to every waiter, raised below
                future.set_exception(exc)
            finally:
                with self._lock:
                    self._in_flight.pop(key, None)
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise ViewRequestError(f"no answer within {timeout:g}s") from None


def list_pods_bounded(conn_id: str | None, namespace: str, selector: str,
                      timeout: float = VIEW_REQUEST_TIMEOUT_S) -> list[dict[str, Any]]:
    """The pods of a selector as the API's JSON, in at most about ``timeout`` seconds, or ViewRequestError."""
    from tfk8s_airflow.k8s.client import api_client

    deadline = time.monotonic() + timeout
    try:
        api = api_client(conn_id)
        api.configuration.retries = False
        api.rest_client.pool_manager.connection_pool_kw["retries"] = False  # no retry: the page polls again
        from kubernetes.client import CoreV1Api

        resp = CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector, _preload_content=False,
                                                  _request_timeout=timeout)
        try:
            body = bytearray()
            for chunk in resp.stream(_CHUNK):
                body += chunk
                if time.monotonic() > deadline:
                    raise ViewRequestError(f"the answer took longer than {timeout:g}s")
                if len(body) > VIEW_LIST_MAX_BYTES:
                    raise ViewRequestError(f"the answer is larger than {VIEW_LIST_MAX_BYTES} bytes")
        finally:
            resp.release_conn()
        items = json.loads(bytes(body)).get("items")
    except ViewRequestError:
        raise
    except Exception as exc:  # noqa: BLE001 - an unreachable cluster or connection must not fail the page
        raise ViewRequestError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []
