"""``labels``, ``annotations`` and ``node_selector``: the Kubernetes label and annotation grammar."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import LABEL_PREFIX
from tfk8s_airflow.job.kueue import GROUP_LABEL, PRIORITY_LABEL, QUEUE_LABEL
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.parse.reader import Reader

#: Kueue's pod-group labels: the job sets them from ``queue`` and ``priority_class``, for all its pods at once.
KUEUE_POD_LABELS = (QUEUE_LABEL, GROUP_LABEL, PRIORITY_LABEL)

#: Kubernetes' limit on the total size of an object's annotations (keys and values, in bytes).
ANNOTATIONS_MAX_BYTES = 256 * 1024


def label_map(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = r.mapping(d, key, fld)
    out: dict[str, str] = {}
    for lk, lv in raw.items():
        r.extend(v.check_label_key(lk, f"{fld}.{lk}"))
        text = "" if lv is None else v.as_text(lv, bools=True)
        if text is None:
            r.add(f"{fld}.{lk}", f"must be a string, got {type(lv).__name__}", "write a label value such as a1")
            continue
        r.extend(v.check_label_value(text, f"{fld}.{lk}"))
        out[lk] = text
    return out


def job_labels(r: Reader, d: Mapping[str, Any]) -> dict[str, str]:
    """The spec's ``labels``: the tfk8s.io/ prefix is the job's own."""
    out = label_map(r, d, "labels", "labels")
    for lk in out:
        if lk.startswith(LABEL_PREFIX):
            r.add(f"labels.{lk}", f"the {LABEL_PREFIX} prefix is reserved for the job's own labels",
                  "use another prefix, e.g. team.example.com/" + lk.split("/", 1)[1])
        elif lk in KUEUE_POD_LABELS:
            r.add(f"labels.{lk}", "on every pod it would make each pod a Kueue Workload of its own (no gang)",
                  "write queue: <LocalQueue> (and priority_class:) instead: the pods then form one pod group")
    return out


def annotation_map(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
    raw = r.mapping(d, key, fld)
    out: dict[str, str] = {}
    for ak, av in raw.items():
        if not isinstance(ak, str):
            r.add(f"{fld}[{ak!r}]"[:200], f"has a key of type {type(ak).__name__}: annotation keys are text",
                  "quote the key")
            continue
        # The API server checks annotation keys in lower case (the prefix may be written in capitals).
        r.extend(v.check_label_key(ak.lower(), f"{fld}.{ak}"))
        text = "" if av is None else v.as_text(av, bools=True)
        if text is None:
            r.add(f"{fld}.{ak}", f"must be a string, got {type(av).__name__}", "quote it or JSON-encode it")
            continue
        if ak.lower() in KUEUE_POD_LABELS:  # older Kueue releases read the queue from an annotation too
            r.add(f"{fld}.{ak}", "is one of Kueue's pod-group labels written as an annotation: a Kueue that reads it "
                  "there would queue each pod as a Workload of its own (no gang), past allowed_queues",
                  "write queue: <LocalQueue> (and priority_class:) instead: the pods then form one pod group")
            continue
        out[ak] = text
    return out


def check_annotation_size(r: Reader, annotations: Mapping[str, str], fld: str) -> None:
    """The pods' annotations (the job's and a role's together) within Kubernetes' 256 KiB."""
    size = sum(len(str(k).encode()) + len(str(x).encode()) for k, x in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        r.add(fld, f"the annotations are {size} bytes, more than Kubernetes' limit of {ANNOTATIONS_MAX_BYTES}",
              "move large data to a ConfigMap or a volume")
