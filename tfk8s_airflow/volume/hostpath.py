"""A host path as it stands on this machine: walked from its allowed root without following a link.

Why a walk and not ``realpath``: the kubelet follows every symbolic link when it bind-mounts a
``hostPath``, and a pod with a writable mount of an allowed directory can plant one there
(``<allowed>/tfk8s/link -> ../serving``). ``realpath`` answers where a link points *now*, and of a
path this machine cannot see it answers the path itself (a check that then passes whatever the node
holds). The walk opens the allowed root (the deployment's configuration, opened as given), then each
component below it relative to its parent with ``O_PATH | O_NOFOLLOW``: a component that is a link is
reported, never followed, and a root this process cannot open is reported as not seen, so that the
policy can refuse rather than trust the written path (:meth:`DeploymentPolicy.host_path_problems
<tfk8s_airflow.job.policy.DeploymentPolicy.host_path_problems>`).

Standard library only.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["HostPathView", "outermost_root", "walk_host_path"]

_OPEN = getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC
_MISSING = (errno.ENOENT, errno.ENOTDIR)


@dataclass(frozen=True)
class HostPathView:
    """What the walk found: ``seen`` is False when the root could not be opened here (``why`` says why);
    ``link`` is the first component that is a symbolic link (its full path), None when there is none;
    ``missing`` is the first component that does not exist (the kubelet would create it, nothing to follow)."""

    root: str
    seen: bool
    link: str | None = None
    missing: str | None = None
    why: str = ""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def outermost_root(path: str, roots: Sequence[str]) -> str | None:
    """The shortest of ``roots`` at or above ``path`` (both normalised), or None."""
    path = posixpath.normpath(path)
    found = [posixpath.normpath(r) for r in roots if _under(path, posixpath.normpath(r))]
    return min(found, key=len) if found else None


def walk_host_path(path: str, roots: Sequence[str]) -> HostPathView:
    """Walk ``path`` from the outermost of ``roots`` above it, one component at a time, following nothing.

    ``path`` must be under one of ``roots`` (ValueError otherwise: the policy refuses such paths first).
    """
    path = posixpath.normpath(path)
    root = outermost_root(path, roots)
    if root is None:
        raise ValueError(f"{path} is under none of {', '.join(roots)}")
    try:
        fd = os.open(root, _OPEN | os.O_DIRECTORY)
    except OSError as exc:
        return HostPathView(root, False, why=f"{os.strerror(exc.errno or 0) or type(exc).__name__}")
    try:
        at = root
        for name in [p for p in path[len(root):].split("/") if p]:
            at = posixpath.join(at, name)
            try:
                child = os.open(name, _OPEN | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _MISSING:
                    return HostPathView(root, True, missing=at)
                if exc.errno == errno.ELOOP:  # without O_PATH, O_NOFOLLOW on a link fails so
                    return HostPathView(root, True, link=at)
                return HostPathView(root, False, why=f"{at}: {os.strerror(exc.errno or 0)}")
            os.close(fd)
            fd = child
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                return HostPathView(root, True, link=at)
            if not stat.S_ISDIR(mode) and at != path:
                return HostPathView(root, True, missing=posixpath.join(at, "..."))
        return HostPathView(root, True)
    finally:
        os.close(fd)
