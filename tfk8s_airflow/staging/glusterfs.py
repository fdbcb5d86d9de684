"""A GlusterFS volume as the Airflow worker sees it: a mounted directory, with path safety.

Why a mounted path and not libgfapi: the pods read the same volume through a hostPath or
a PVC (the in-tree ``glusterfs`` volume plugin was removed in Kubernetes 1.26), so the
Airflow worker mounts it too and plain file I/O is what both sides share. ``pod_mount``
says where the volume appears inside the pods, so shard lists carry paths the pods can open.

Path safety, because input paths come from templates, DAG params and the UI form:

* an input must lie under one of the configured ``roots`` (default: the whole mount);
* a path with a ``..`` segment is refused outright, before any normalisation, rather
  than resolved (``/mnt/vol/a/../../etc`` is an attack or a bug, never an intent);
* symbolic links are resolved and the target must stay inside the volume; a link that
  escapes it is refused (whether it is the input itself or a file found while listing).

Each refusal is a :class:`PathSafetyError` naming the path, the rule and the roots.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from tfk8s_airflow.exceptions import MissingInputError, PathSafetyError, StagingError
from tfk8s_airflow.pathrules import has_parent_segment
from tfk8s_airflow.staging.listing import FileEntry, is_hidden, name_matches, split_glob

__all__ = ["GlusterVolume", "DEFAULT_MOUNT", "MOUNT_ENV"]

MOUNT_ENV = "TFK8S_GLUSTER_MOUNT"
DEFAULT_MOUNT = "/mnt/tfk8s-gluster"


class GlusterVolume:
    """A mounted GlusterFS volume.

    :param mount: the mount point on this machine (default ``$TFK8S_GLUSTER_MOUNT`` or
        ``/mnt/tfk8s-gluster``).
    :param roots: directories (absolute, or relative to the mount) that inputs and cache
        directories must lie under; default the whole mount.
    :param pod_mount: where the pods mount the same volume (default: the same path).
    :param require_mounted: refuse to work when ``mount`` is not a mount point, so a
        crashed FUSE client never makes the stager fill the local disk instead.
    """

    def __init__(self, mount: str | os.PathLike[str] | None = None,
                 roots: Sequence[str | os.PathLike[str]] | None = None,
                 pod_mount: str | None = None, require_mounted: bool = True) -> None:
        raw = str(mount or os.environ.get(MOUNT_ENV) or DEFAULT_MOUNT)
        self._refuse_dotdot(raw, "mount")
        self.mount = Path(os.path.realpath(raw))
        self.require_mounted = require_mounted
        self.roots: tuple[Path, ...] = tuple(
            self._root(r) for r in (roots or [self.mount]))
        self.pod_mount = PurePosixPath(pod_mount or str(self.mount))

    def _root(self, root: str | os.PathLike[str]) -> Path:
        text = str(root)
        self._refuse_dotdot(text, "root")
        path = Path(os.path.realpath(self.mount / text))
        if not self._within(path, self.mount):
            raise PathSafetyError(f"configured root {text} is not inside the volume {self.mount}")
        return path

    # ------------------------------------------------------------------------ safety

    @staticmethod
    def _refuse_dotdot(path: str, what: str) -> None:
        if has_parent_segment(path):
            raise PathSafetyError(f"{what} {path!r} contains a '..' segment; give a path "
                                  "without '..'")

    @staticmethod
    def _within(path: Path, root: Path) -> bool:
        return path == root or root in path.parents

    def check_mounted(self) -> None:
        if self.require_mounted and not os.path.ismount(self.mount):
            raise StagingError(f"the GlusterFS volume is not mounted at {self.mount} "
                               "(mount it, or check the FUSE client)")

    def safe_path(self, path: str | os.PathLike[str], what: str = "path") -> Path:
        """``path`` (absolute, or relative to the mount) as a resolved path inside the
        volume and under a root; :class:`PathSafetyError` otherwise."""
        text = os.fspath(path)
        self._refuse_dotdot(text, what)
        lexical = Path(os.path.normpath(self.mount / text))
        real = Path(os.path.realpath(lexical))
        roots = ", ".join(str(r) for r in self.roots)
        if not any(self._within(lexical, r) or self._within(real, r) for r in self.roots):
            raise PathSafetyError(f"{what} {text} is outside the allowed roots ({roots}); "
                                  "stage from a directory under one of them")
        if not self._within(real, self.mount):
            raise PathSafetyError(f"{what} {text} resolves to {real}, outside the volume "
                                  f"{self.mount} (a symbolic link escapes it); allowed roots: {roots}")
        if not any(self._within(real, r) for r in self.roots):
            raise PathSafetyError(f"{what} {text} resolves to {real}, outside the allowed "
                                  f"roots ({roots}) through a symbolic link")
        return real

    def pod_path(self, local: str | os.PathLike[str]) -> str:
        """Where a file on the volume appears inside the pods."""
        rel = Path(os.path.realpath(local)).relative_to(self.mount)
        return str(self.pod_mount / PurePosixPath(*rel.parts)) if rel.parts else str(self.pod_mount)

    # ----------------------------------------------------------------------- listing

    def list_files(self, path: str | os.PathLike[str], pattern: str | None = None,
                   include_hidden: bool = False) -> tuple[Path, list[FileEntry]]:
        """Files under ``path`` (file, directory or glob), recursively, sorted by path.

        Returns ``(root, files)``; ``FileEntry.path`` is the resolved local path. Symbolic
        links are followed when they stay inside the volume and refused when they do not.
        """
        self.check_mounted()
        text = os.fspath(path)
        self._refuse_dotdot(text, "input")
        glob_root, segments = split_glob(str(self.mount / text) if not text.startswith("/") else text)
        root = self.safe_path(glob_root, "input")
        if not root.exists():
            raise MissingInputError(f"input does not exist on the volume: {glob_root}")
        matched = [root]
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            nxt = []
            for base in matched:
                if not base.is_dir():
                    continue
                for name in sorted(os.listdir(base)):
                    if not fnmatch.fnmatchcase(name, seg):
                        continue
                    if is_hidden(name) and not include_hidden and not is_hidden(seg):
                        continue
                    child = self.safe_path(base / name, "input")
                    if last or child.is_dir():
                        nxt.append(child)
            matched = nxt
        files: dict[str, FileEntry] = {}
        for base in matched:
            for entry in self._walk(base, root, pattern, include_hidden, set()):
                files.setdefault(entry.path, entry)
        return root, sorted(files.values(), key=lambda f: f.path)

    def _walk(self, path: Path, root: Path, pattern: str | None, include_hidden: bool,
              seen: set[Path]) -> Iterable[FileEntry]:
        real = self.safe_path(path, "input")
        if real.is_file():
            if name_matches(real.name if path == real else Path(path).name, pattern):
                st = real.stat()
                rel = os.path.relpath(path, root) if path != root else path.name
                yield FileEntry(path=str(real), relpath=rel, size=st.st_size, mtime=st.st_mtime)
            return
        if not real.is_dir() or real in seen:  # sockets etc.; directory link loops
            return
        seen.add(real)
        for name in sorted(os.listdir(real)):
            if is_hidden(name) and not include_hidden:
                continue
            yield from self._walk(path / name, root, pattern, include_hidden, seen)
