"""Object names and label values: one function derives every name of a job.

Why one function: TFJob users saw jobs stuck on names over 63 characters
(kubeflow/training-operator#1101, #1745) and Airflow users saw label values
rejected (apache/airflow#13189). Every name here is a DNS-1123 label that
already leaves room for the longest suffix we append, so an over-long name is
impossible rather than checked for late. The hash makes names unique per
(base, run_id, group) and stable across retries of the same run, so two
backfill runs never share an object and a retry finds its own.
"""

from __future__ import annotations

import base64
import hashlib
import re
import string

DNS1123_LABEL_MAX = 63
LABEL_VALUE_MAX = 63
_ASCII_ALNUM = frozenset(string.ascii_letters + string.digits)
_LABEL_CHARS = _ASCII_ALNUM | frozenset("_.-")
#: Longest suffix ever appended to a job name: "-evaluator-0" and "-tensorboard" (12); "-worker-511" is 11.
LONGEST_SUFFIX = len("-evaluator-0")
#: A job name leaves room for its longest object-name suffix.
JOB_NAME_MAX = DNS1123_LABEL_MAX - LONGEST_SUFFIX
HASH_LEN = 10  # 50 bits of base32: collisions negligible across millions of runs

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL.match(value))


def is_dns1035_label(value: str) -> bool:
    """Service names must also start with a letter."""
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1035_LABEL.match(value))


def is_label_value(value: str) -> bool:
    return len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE.match(value))


def short_hash(*parts: str, length: int = HASH_LEN) -> str:
    """Lowercase base32 digest of the parts; '\\0'-joined so ('a','bc') != ('ab','c')."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()
    return base64.b32encode(digest).decode("ascii").lower()[:length]


def slug(text: str, max_len: int) -> str:
    """Lowercase [a-z0-9-] rendering of arbitrary text, trimmed to max_len."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out[:max_len].strip("-")


def job_name(base: str, run_id: str = "", group: str = "") -> str:
    """The job's name: '<slug(base)>[-<slug(group)>]-<hash>'.

    At most JOB_NAME_MAX characters, starts with a letter (it is also the
    headless Service's name, a DNS-1035 label), deterministic in its inputs.
    """
    digest = short_hash(base, run_id, group)
    room = JOB_NAME_MAX - HASH_LEN - 1
    readable = slug(base, room)
    group_slug = slug(group, room)
    if group_slug and group_slug != readable:
        keep = max(room - len(group_slug) - 1, min(len(readable), room // 2))
        readable = f"{readable[:keep].strip('-')}-{group_slug}"[:room].strip("-")
    if not readable or not readable[0].isalpha():
        readable = ("j-" + readable)[:room].strip("-")
    return f"{readable}-{digest}"


def replica_hostname(role: str, index: int) -> str:
    """Pod hostname: '<role>-<i>', the first label of the peer's DNS name."""
    return f"{role}-{index}"


def pod_name(job: str, role: str, index: int) -> str:
    return f"{job}-{role}-{index}"


def tensorboard_pod_name(job: str) -> str:
    """The job's TensorBoard pod (``tensorboard:`` in the spec)."""
    return f"{job}-tensorboard"


def service_name(job: str) -> str:
    return job


def configmap_name(job: str) -> str:
    return f"{job}-shards"


def templates_name(job: str) -> str:
    """The ConfigMap holding the job's pods as setup created them (recovery recreates from it)."""
    return f"{job}-pods"


def attempt_group_name(job: str, attempt: int = 1) -> str:
    """The name of a job attempt's pod group (a Kueue pod group and its Workload, or a Kubernetes PodGroup):
    the job's for the first attempt, a new one per recovery attempt, so that no scheduler mixes a
    replacement with the pods of the attempt it replaces. At most 63 characters."""
    base = job if attempt <= 1 else f"{job}-a{attempt}"
    if len(base) <= LABEL_VALUE_MAX:
        return base
    return f"{base[:54].rstrip('-')}-{hashlib.sha256(base.encode()).hexdigest()[:8]}"


def network_policy_name(job: str) -> str:
    """The job's NetworkPolicy (:mod:`tfk8s_airflow.job.builders.network`)."""
    return f"{job}-network"


def sanitize_label_value(value: str) -> str:
    """A valid label value for any string; over-long or altered values get a hash tail.

    Kubernetes rejects label values over 63 characters or with characters outside
    [A-Za-z0-9-_.]; the provider passes ours through unsanitized, so we do it.
    """
    value = str(value)
    if is_label_value(value):
        return value
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", value)
    cleaned = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
    tail = short_hash(value, length=8)
    head = cleaned[: LABEL_VALUE_MAX - len(tail) - 1]
    head = re.sub(r"[^A-Za-z0-9]+$", "", head)
    return f"{head}-{tail}" if head else tail


def pod_operator_label_value(value: str) -> str:
    """A label value as the cncf.kubernetes provider's KubernetesPodOperator writes it on its pods (its
    ``pod_generator.make_safe_label_value``): setup labels the replica pods so that each replica task finds
    its pod by the labels that operator computes, so the two must agree to the character, and the job
    model imports no Airflow. The rule: drop every character before the first and after the last ASCII
    letter or digit, and every character outside ``[A-Za-z0-9_.-]`` between them; a value that this
    changed, or that is longer than 63 characters, becomes its first 53 characters so kept, ``-`` and the
    first 9 hex digits of the MD5 of the value as given. (tests/unit/test_plan.py holds it to the
    installed provider's, examples and Hypothesis.)
    """
    first = next((i for i, c in enumerate(value) if c in _ASCII_ALNUM), len(value))
    last = next((i for i in range(len(value) - 1, first - 1, -1) if value[i] in _ASCII_ALNUM), first - 1)
    kept = "".join(c for c in value[first:last + 1] if c in _LABEL_CHARS)
    if kept == value and len(kept) <= LABEL_VALUE_MAX:
        return kept
    digest = hashlib.md5(value.encode(), usedforsecurity=False).hexdigest()[:9]
    return f"{kept[:LABEL_VALUE_MAX - len(digest) - 1]}-{digest}"
