"""Field checks shared by the spec parser: each returns problems, never raises.

Why here and not in the API server: Kubernetes would reject most of these too,
but only after half a job exists (the first pods created, the rest refused).
Checking the Kubernetes grammar locally lets us refuse the whole job up front,
with the spec's field name and a fix instead of an API path.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from tfk8s_airflow.exceptions import Problem

KNOWN_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "ephemeral-storage")
RESOURCE_ALIASES = {"gpu": "nvidia.com/gpu", "gpus": "nvidia.com/gpu", "mem": "memory",
                    "cpus": "cpu", "nvidia.com/gpus": "nvidia.com/gpu"}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_QUANTITY = re.compile(r"^(?P<num>[+-]?(\d+(\.\d*)?|\.\d+))(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_DURATION = re.compile(r"^(\d+(\.\d+)?)(ms|s|m|h|d)$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

# Docker reference grammar (distribution/reference), written out as a regex.
_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def parse_duration(value: Any) -> int | None:
    """Seconds from 300, "300", "90s", "5m", "2h", "1d"; None when unparseable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        m = _DURATION.match(text)
        if m:
            return int(float(m.group(1)) * _DURATION_UNITS[m.group(3)])
    return None


def check_dns_label(value: str, fld: str) -> list[Problem]:
    if len(value) > 63:
        return [Problem(fld, f"{value!r} is {len(value)} characters, the limit is 63", "shorten it")]
    if not _DNS_LABEL.match(value):
        return [Problem(fld, f"{value!r} is not a DNS-1123 label",
                        "use lowercase letters, digits and '-', starting and ending with a letter or digit")]
    return []


def check_dns_subdomain(value: str, fld: str) -> list[Problem]:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return [Problem(fld, f"{value!r} is not a DNS-1123 subdomain",
                        "use lowercase letters, digits, '-' and '.', at most 253 characters")]
    return []


def check_label_key(key: str, fld: str) -> list[Problem]:
    prefix, slash, name = key.rpartition("/")
    if not slash:
        prefix, name = "", key
    problems = []
    if slash and (not prefix or check_dns_subdomain(prefix, fld)):
        problems.append(Problem(fld, f"key prefix {prefix!r} is not a DNS subdomain",
                                "write the key as example.com/name or just name"))
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        problems.append(Problem(fld, f"key name {name!r} is not valid",
                                "use at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric"))
    return problems


def check_label_value(value: str, fld: str) -> list[Problem]:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return [Problem(fld, f"label value {value!r} is not valid",
                        "use at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric")]
    return []


def is_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def is_sha256(text: str) -> bool:
    return bool(_SHA256.match(text))


def check_quantity(value: Any, fld: str, *, integer: bool = False) -> Problem | None:
    """A Kubernetes resource quantity; extended resources (GPUs) must be whole numbers."""
    if isinstance(value, bool) or value is None:
        return Problem(fld, f"{value!r} is not a resource quantity", "write e.g. 500m, 2, 4Gi")
    text = str(value)
    m = _QUANTITY.match(text)
    if not m:
        return Problem(fld, f"{text!r} is not a resource quantity",
                       "write e.g. cpu: 500m or 2, memory: 512Mi or 4Gi, nvidia.com/gpu: 1")
    if float(m.group("num")) < 0:
        return Problem(fld, f"must not be negative, got {text!r}", "remove it or give a positive amount")
    if integer and (m.group("suffix") or not m.group("num").lstrip("+").isdigit()):
        return Problem(fld, f"must be a whole number, got {text!r}", "write e.g. nvidia.com/gpu: 1")
    return None


def check_image(ref: str, fld: str) -> list[Problem]:
    if not ref or not _IMAGE.match(ref):
        hint = ""
        if ref != ref.lower() and _IMAGE.match(ref.lower()):
            hint = f"; repository names are lowercase: {ref.lower()}"
        return [Problem(fld, f"{ref!r} is not a valid image reference{hint}",
                        "write [registry[:port]/]repository[:tag][@sha256:digest], e.g. tfk8s/trainer:0.1")]
    return []


def quantity_to_float(text: str) -> float:
    """Numeric value of a quantity in base units (cores, bytes, devices)."""
    m = _QUANTITY.match(str(text))
    if not m:
        raise ValueError(f"not a quantity: {text!r}")
    num = float(m.group("num"))
    suffix = m.group("suffix") or ""
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    decimal = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
               "P": 1e15, "E": 1e18}
    if suffix in binary:
        return num * binary[suffix]
    if suffix in decimal:
        return num * decimal[suffix]
    return num * 10 ** int(suffix[1:])
