"""``labels``, ``annotations`` and ``node_selector``: the Kubernetes label and annotation grammar."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import LABEL_PREFIX
from tfk8s_airflow.job import fields as v
from tfk8s_airflow.job.parse.reader import Reader

#: Kubernetes' limit on the total size of an object's annotations (keys and values).
ANNOTATIONS_MAX_BYTES = 256 * 1024


def label_map(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = r.mapping(d, key, fld)
    out: dict[str, str] = {}
    for lk, lv in raw.items():
        lk = str(lk)
        r.extend(v.check_label_key(lk, f"{fld}.{lk}"))
        lv = "" if lv is None else (str(lv).lower() if isinstance(lv, bool) else str(lv))
        r.extend(v.check_label_value(lv, f"{fld}.{lk}"))
        out[lk] = lv
    return out


def job_labels(r: Reader, d: Mapping[str, Any]) -> dict[str, str]:
    """The spec's ``labels``: the tfk8s.io/ prefix is the job's own."""
    out = label_map(r, d, "labels", "labels")
    for lk in out:
        if lk.startswith(LABEL_PREFIX):
            r.add(f"labels.{lk}", f"the {LABEL_PREFIX} prefix is reserved for the job's own labels",
                  "use another prefix, e.g. team.example.com/" + lk.split("/", 1)[1])
    return out


def annotation_map(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = r.mapping(d, key, fld)
    out: dict[str, str] = {}
    for ak, av in raw.items():
        ak = str(ak)
        r.extend(v.check_label_key(ak, f"{fld}.{ak}"))
        out[ak] = "" if av is None else str(av)
    if sum(len(k) + len(x) for k, x in out.items()) > ANNOTATIONS_MAX_BYTES:
        r.add("annotations", "total size exceeds 256 KiB", "move large data to a ConfigMap or volume")
    return out
