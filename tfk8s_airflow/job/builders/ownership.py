"""Setup's own mark on the objects it creates, and the refusal of everything else of their names.

Why: the names of a job's objects derive from (DAG, run, group), so anyone who may write
Services or ConfigMaps in the namespace can create them first: a ``<job>-shards`` ConfigMap
choosing every worker's input files, a Service whose ``tfk8s.io/attempts`` annotation tells
recovery to relaunch with 1e15 bytes of memory. Setup therefore never adopts an object: each
one it creates carries :data:`MARK`, the digest of the object as setup built it, and an object
of that name that already exists is taken only when it is exactly what setup would create now
(same mark, same labels and annotations, same data or Service spec, same owner): setup's own
earlier try of the same run, whose worker died before it could clean up. Anything else is
refused, naming it, before setup creates anything (:func:`foreign`).

An exact copy made by someone else passes, and is harmless by construction: it holds nothing
setup would not have written. What a namespace writer changes *after* setup is another matter:
recovery validates what it reads back from the Service (:mod:`tfk8s_airflow.job.run.recoverystate`)
and reads the pod templates only under the digest kept in the job record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MARK", "foreign", "marked"]

MARK = "tfk8s.io/setup-digest"
#: Service spec fields setup sets; the API server fills in the others (clusterIPs, ipFamilies...).
_SERVICE_FIELDS = ("clusterIP", "publishNotReadyAddresses", "selector", "ports")


def _digest(obj: Mapping[str, Any]) -> str:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("annotations", "ownerReferences")}
    body = {**{k: v for k, v in obj.items() if k != "metadata"}, "metadata": meta,
            "annotations": {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if k != MARK}}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def marked(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` carrying setup's mark."""
    out = dict(obj)
    out["metadata"] = {**obj["metadata"],
                       "annotations": {**(obj["metadata"].get("annotations") or {}), MARK: _digest(obj)}}
    return out


def _same_ports(want: Any, got: Any) -> bool:
    if not isinstance(got, list) or len(got) != len(want):
        return False
    return all(isinstance(g, Mapping) and all(g.get(k) == v for k, v in w.items()) for w, g in zip(want, got,
                                                                                                  strict=True))


def foreign(want: Mapping[str, Any], got: Mapping[str, Any], content: bool = True) -> str | None:
    """Why the existing object ``got`` (as the API server returns it, camelCase) is not the one setup
    would create (``want``, marked); None when it is exactly that. ``content=False``: only whether it
    carries setup's mark, setup's labels and no other annotation (before the owner, which the
    content depends on, is known)."""
    meta, gmeta = want["metadata"], got.get("metadata") or {}
    annotations = gmeta.get("annotations") or {}
    if annotations.get(MARK) is None:
        return "setup did not create it (it has no setup mark)"
    if not content:
        if set(annotations) != {MARK}:
            return "its annotations are not the ones setup wrote"
        return "its labels are not the ones setup wrote" if (gmeta.get("labels") or {}) != meta.get("labels", {}) \
            else None
    if annotations != (meta.get("annotations") or {}):
        return "its annotations are not the ones setup wrote"
    if (gmeta.get("labels") or {}) != (meta.get("labels") or {}):
        return "its labels are not the ones setup wrote"
    own = [(r.get("kind"), r.get("name"), r.get("uid")) for r in meta.get("ownerReferences") or ()]
    if [(r.get("kind"), r.get("name"), r.get("uid")) for r in gmeta.get("ownerReferences") or ()] != own:
        return "its owner is not the job's Service"
    if want["kind"] == "Service":
        spec, gspec = want["spec"], got.get("spec") or {}
        for k in _SERVICE_FIELDS:
            same = _same_ports(spec[k], gspec.get(k)) if k == "ports" else gspec.get(k) == spec.get(k)
            if not same:
                return f"its spec.{k} is not the one setup wrote"
    else:
        for k in ("data", "binaryData"):
            if (got.get(k) or {}) != (want.get(k) or {}):
                return f"its {k} is not what setup wrote"
    return None
