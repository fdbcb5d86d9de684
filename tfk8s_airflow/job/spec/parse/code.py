"""``code``: training code fetched into every replica before its container starts."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import DEFAULT_CODE_DIR, SHARDS_MOUNT
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.model import CodeSource
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.job.spec.parse.volumes import mount_path_problem
from tfk8s_airflow.pathrules import is_safe_relative
from tfk8s_airflow.redaction import redact_uri

_CODE_KEYS = tuple(f for f in CodeSource.__dataclass_fields__)
_SCHEMES = ("http://", "https://", "hdfs://", "webhdfs://", "swebhdfs://")


def code(r: Reader, d: Mapping[str, Any]) -> CodeSource | None:
    raw = d.get("code")
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"uri": raw}
    if not isinstance(raw, Mapping):
        r.add("code", "must be a mapping", "write code: {uri: https://host/algo.tar.gz, entrypoint: run.sh}")
        return None
    r.unknown(raw, _CODE_KEYS, "code.")
    uri = r.string(raw, "uri", "code.uri") or ""
    if not uri.startswith(_SCHEMES):  # quoted without credentials: messages reach logs and the UI
        r.add("code.uri", f"must be an http(s)://, hdfs:// or (s)webhdfs:// URI, got {v.show(redact_uri(uri))}",
              "write code: {uri: https://host/algo.tar.gz}")
    entry = r.string(raw, "entrypoint", "code.entrypoint", "run.sh") or "run.sh"
    if not is_safe_relative(entry):
        r.add("code.entrypoint", "must be a relative path inside the code archive", "write entrypoint: run.sh")
    elif entry.startswith("-"):
        r.add("code.entrypoint", "must not start with '-' (a program would read it as an option)",
              "rename the file, or write entrypoint: ./" + entry)
    sha = r.string(raw, "sha256", "code.sha256")
    if sha and not v.is_sha256(sha):
        r.add("code.sha256", "must be 64 hex characters", "write the output of sha256sum")
    elif not sha and uri.startswith("http://"):
        r.add("code.sha256", "is required for a plain http:// code.uri (anyone on the way could change the code)",
              "add sha256: <the output of sha256sum algo.tar.gz>, or fetch over https://")
    img = r.string(raw, "image", "code.image")
    if img:
        r.extend(v.check_image(img, "code.image"))
    mount = r.string(raw, "mount_path", "code.mount_path", DEFAULT_CODE_DIR) or DEFAULT_CODE_DIR
    if not mount_path_problem(r, mount, "code.mount_path", DEFAULT_CODE_DIR) and \
            posixpath.normpath(mount) == SHARDS_MOUNT:
        r.add("code.mount_path", f"{SHARDS_MOUNT} is where the pods get their shard assignments",
              f"write mount_path: {DEFAULT_CODE_DIR}")
    return CodeSource(uri, entry, sha.lower() if sha else None, img or None, mount)
