"""Free TCP ports that no other test process on this machine is handed at the same time.

Binding port 0 and closing the socket gives a port that is free *now*, and nothing more: the
kernel may give the same port to the next ``bind(0)`` of any process before the test's server
binds it. With two pytest processes (``pytest -n 2``, or two sessions on one machine) two
servers could be handed one port, and a TensorFlow server (gRPC binds with ``SO_REUSEPORT``)
would even share it silently. So every port :func:`free_port` hands out is also reserved: an
exclusive ``flock`` on ``<tmp>/tfk8s-test-ports/<port>``, held by this process until it exits
(the kernel drops the lock then, after a crash too). A port another process holds is skipped,
and this process never hands out one port twice.
"""
from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path

__all__ = ["free_port"]

LOCK_DIR = Path(tempfile.gettempdir()) / "tfk8s-test-ports"
ATTEMPTS = 200
_held: dict[int, int] = {}  # port -> fd of its lock file (closed only when the process exits)


def free_port() -> int:
    """A TCP port free on every IPv4 address now, reserved for this process (see the module docstring)."""
    LOCK_DIR.mkdir(exist_ok=True)
    for _ in range(ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        if port in _held:
            continue
        fd = os.open(LOCK_DIR / str(port), os.O_RDWR | os.O_CREAT, 0o666)  # not inherited (O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held[port] = fd
        return port
    raise RuntimeError(f"no free port in {ATTEMPTS} tries that another test process had not reserved in {LOCK_DIR}")
