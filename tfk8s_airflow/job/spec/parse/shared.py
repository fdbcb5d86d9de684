"""Readers of the keys a job and its role blocks share, one per key.

Why a table: a role block may set every job-wide key declared with ``role=`` in
:mod:`tfk8s_airflow.job.spec.model`; the same reader checks the key at both levels, so the
rules of a key are written once whichever level it is written at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tfk8s_airflow.job.spec.model import RESTART_POLICIES
from tfk8s_airflow.job.spec.parse import env, metadata, podtemplate, resources, scheduling
from tfk8s_airflow.job.spec.parse.reader import Reader

KeyReader = Callable[[Reader, Mapping[str, Any], str, str], Any]


def _image(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> str:
    return r.string(d, key, fld, "") or ""


def _command(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> tuple[str, ...] | None:
    return r.strings(d, key, fld)


def _args(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> tuple[str, ...]:
    return r.strings(d, key, fld) or ()


def _restart_policy(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> str:
    return r.choice(d, key, fld, RESTART_POLICIES, "OnFailure")


READERS: dict[str, KeyReader] = {
    "image": _image,
    "command": _command,
    "args": _args,
    "env": env.env,
    "env_from": env.env_from,
    "resources": resources.resources,
    "node_selector": metadata.label_map,
    "tolerations": scheduling.tolerations,
    "restart_policy": _restart_policy,
    "annotations": metadata.annotation_map,
    "pod_template": podtemplate.pod_template,
}
