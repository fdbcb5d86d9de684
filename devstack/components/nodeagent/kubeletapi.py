"""The part of the kubelet API the API server uses for ``kubectl logs``: /containerLogs.

The API server reaches a node at ``status.addresses[InternalIP]`` and
``status.daemonEndpoints.kubeletEndpoint.Port`` over TLS, with its kubelet client
certificate. The devstack API server does not verify the kubelet's serving certificate (no
``--kubelet-certificate-authority``), so a self-signed one serves; the agent in turn
requires a client certificate signed by the cluster CA for everything except /healthz.

Supported: ``GET /containerLogs/<ns>/<pod>/<container>`` with ``tailLines``, ``limitBytes``,
``previous``, ``follow``; ``timestamps`` is accepted but the files carry no per-line times,
so lines are returned without them. ``GET /healthz``. Everything else is 404.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

log = logging.getLogger("nodeagent.kubelet")

# lookup(ns, pod, container, previous) -> (path, still_running: () -> bool) or an error string
Lookup = Callable[[str, str, str, bool], "tuple[str, Callable[[], bool]] | str"]


def tail_bytes(data: bytes, lines: int | None) -> bytes:
    if lines is None or lines < 0:
        return data
    if lines == 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


class _Handler(BaseHTTPRequestHandler):
    server_version = "tfk8s-nodeagent"
    lookup: Lookup

    def log_message(self, fmt, *args):  # noqa: D401 - quiet access log
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server API
        url = urlparse(self.path)
        if url.path == "/healthz":
            return self._send(200, b"ok")
        if not self.connection.getpeercert():
            return self._send(401, b"client certificate required\n")
        parts = [unquote(p) for p in url.path.split("/") if p]
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._send(404, b"not found\n")
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        previous = q.get("previous", "false").lower() == "true"
        found = self.lookup(parts[1], parts[2], parts[3], previous)
        if isinstance(found, str):
            return self._send(404, found.encode() + b"\n")
        path, running = found
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            data = b""
        tail = int(q["tailLines"]) if q.get("tailLines", "").lstrip("-").isdigit() else None
        out = tail_bytes(data, tail)
        limit = int(q["limitBytes"]) if q.get("limitBytes", "").isdigit() else None
        follow = q.get("follow", "false").lower() == "true" and not previous
        if not follow:
            return self._send(200, out[:limit] if limit else out)
        # follow: stream until the container ends; HTTP/1.0, the end of the body is the close.
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = len(data)
        self.wfile.write(out)
        self.wfile.flush()
        while True:
            alive = running()
            try:
                with open(path, "rb") as fh:
                    fh.seek(sent)
                    more = fh.read()
            except FileNotFoundError:
                more = b""
            if more:
                self.wfile.write(more)
                self.wfile.flush()
                sent += len(more)
            if not alive and not more:
                return
            time.sleep(0.2)


def serve(host: str, port: int, cert: str, key: str, client_ca: str, lookup: Lookup) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"lookup": staticmethod(lookup)})
    httpd = ThreadingHTTPServer((host, port), handler)
    httpd.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(client_ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    # The handshake happens in the request's thread (first read), not in accept().
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=httpd.serve_forever, name="kubelet-api", daemon=True).start()
    log.info("kubelet API (containerLogs) on https://%s:%d", host, port)
    return httpd
