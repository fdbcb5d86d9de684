"""A child process that inherits nothing of the Airflow worker: the evaluator's fallback mode.

Why: the worker's environment holds its secrets (``AIRFLOW_CONN_*`` connection URIs,
``AIRFLOW__*`` settings such as the database URL or the Fernet key, cloud credentials), its
open descriptors include its database and log connections, and its working directory is
its own. A child that evaluates an untrusted model gets none of that:

* **an environment from an allowlist** (:data:`ALLOWED_ENV`: the search paths, the locale,
  the time zone, TensorFlow's log level, the GPUs to use) plus what the caller names, with
  ``HOME`` and ``TMPDIR`` inside a fresh directory; nothing else, whatever its name;
* **a fresh, private working directory** (mode 0700), removed afterwards;
* **no inherited descriptors** (only stdin from ``/dev/null`` and stdout/stderr to a file
  in that directory), **its own session**, killed as a group at the timeout;
* **no sight of other processes**: it runs in its own user, PID and mount namespaces with its
  own ``/proc`` (util-linux ``unshare -r -p -f -m --mount-proc``), so ``/proc/<ppid>/environ``
  of the worker (or of its supervisor, or any process of the same user) does not exist for it.
  Where the kernel or the container refuses unprivileged namespaces, the worker is made
  non-dumpable while the child runs (``PR_SET_DUMPABLE``): a child of the same non-root user
  can then not read the worker's ``/proc/<pid>/environ``; a worker running as root, or other
  processes of its user, are not protected that way (docs/security.md).

What it cannot do: stop the child from reading files the worker's user may read (the Airflow
configuration among them) or from writing where that user may write. Isolation from those
is the evaluation pod's job (:mod:`tfk8s_airflow.job.builders.evaluation`); this mode is for models
that are trusted, or where no cluster can run the evaluation.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from tfk8s_airflow.nofollow import SafeDir

__all__ = ["ALLOWED_ENV", "ChildRun", "child_env", "namespaces_available", "run_isolated"]

#: Variables a child keeps from the worker's environment (and every ``LC_*``).
ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "LD_LIBRARY_PATH", "TF_CPP_MIN_LOG_LEVEL",
               "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
_OUTPUT = "output.log"
_OUTPUT_TAIL = 16 << 10


@dataclass(frozen=True)
class ChildRun:
    """How the child ended: its exit code, the tail of its output, the result file's bytes (or None)."""

    returncode: int
    output: str
    result: bytes | None


def child_env(workdir: str, extra: Mapping[str, str] | None = None,
              parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's whole environment: the allowlisted part of ``parent`` (default this
    process's), ``HOME``/``TMPDIR`` in ``workdir``, then ``extra``."""
    source = os.environ if parent is None else parent
    env = {k: v for k, v in source.items() if k in ALLOWED_ENV or k.startswith("LC_")}
    env.update({"HOME": workdir, "TMPDIR": workdir})
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


_UNSHARE = ("--user", "--map-root-user", "--pid", "--fork", "--mount", "--mount-proc", "--kill-child", "--")
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


@functools.cache
def namespaces_available() -> bool:
    """Whether this machine lets an unprivileged process make user, PID and mount namespaces (tried once)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        return subprocess.run([unshare, *_UNSHARE, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def _not_dumpable() -> Iterator[None]:
    """This process non-dumpable meanwhile (its /proc/<pid>/environ then readable by root only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        if before > 0:
            libc.prctl(_PR_SET_DUMPABLE, before, 0, 0, 0)


def run_isolated(command: Callable[[str], Sequence[str]], *, timeout: float, result_name: str = "result.json",
                 result_limit: int = 4096, env: Mapping[str, str] | None = None) -> ChildRun:
    """Run ``command(result_path)`` in a fresh directory with a scrubbed environment.

    ``result_path`` is where the child writes its result; it is read back (a regular file,
    at most ``result_limit`` bytes, no link followed) after the child exited.
    :class:`TimeoutError` after ``timeout`` seconds (the child's process group is killed).
    """
    with tempfile.TemporaryDirectory(prefix="tfk8s-isolated-") as work:
        os.chmod(work, 0o700)
        argv = list(command(os.path.join(work, result_name)))
        contained = namespaces_available()
        if contained:
            argv = [str(shutil.which("unshare")), *_UNSHARE, *argv]
        guard = contextlib.nullcontext() if contained else _not_dumpable()
        with guard, open(os.path.join(work, _OUTPUT), "wb") as out:
            proc = subprocess.Popen(argv, cwd=work, env=child_env(work, env), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
            except BaseException as exc:  # the timeout, or the task being stopped
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its session: whatever it started too
                proc.wait()
                if isinstance(exc, subprocess.TimeoutExpired):
                    raise TimeoutError(f"{argv[0]} did not finish within {timeout:.0f}s (killed)") from None
                raise
        with SafeDir.open(work) as d:
            with d.open_read(_OUTPUT) as fh:
                size = os.fstat(fh.fileno()).st_size
                fh.seek(max(0, size - _OUTPUT_TAIL))
                output = fh.read(_OUTPUT_TAIL).decode("utf-8", "replace")
            result = d.read_bytes(result_name, result_limit) if d.lstat(result_name) is not None else None
        return ChildRun(code, output, result)
