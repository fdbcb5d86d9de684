"""Kubernetes resource quantities: the grammar, the exact value, and the bounds we hold them to.

Why exact (a Fraction) and bounded: requests are compared with limits and summed against
ResourceQuotas, so ``0.1 + 0.2`` must equal ``300m``; and a quantity such as
``1e30000000`` is valid grammar that the API server stores but clamps, while computing it
exactly would take a Python process half a minute. Quantities are refused beyond
2^63 - 1 base units (cores, bytes, devices), where Kubernetes' own int64 arithmetic ends,
and the exponent is checked before anything is computed.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from tfk8s_airflow.exceptions import Problem
from tfk8s_airflow.job.spec.fields import INT64_MAX, as_text, check_label_key, did_you_mean, show

__all__ = ["STANDARD_RESOURCES", "RESOURCE_ALIASES", "parse_quantity", "quantity_problem", "quantity_value",
           "quantity_to_float", "is_extended_resource", "resource_name_problems"]

#: Resource names without a domain that a container may request.
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
RESOURCE_ALIASES = {"gpu": "nvidia.com/gpu", "gpus": "nvidia.com/gpu", "mem": "memory",
                    "cpus": "cpu", "nvidia.com/gpus": "nvidia.com/gpu"}

_QUANTITY = re.compile(r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                       r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$", re.ASCII)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_MAX_CHARS = 64
_MAX_EXPONENT = 40  # 10^40 is far past int64 whatever the mantissa; 10^-40 far below a nano


def parse_quantity(value: Any) -> Fraction | str:
    """The exact value in base units, or the reason it is not an acceptable quantity."""
    amount = _parse(value)
    if isinstance(amount, Fraction) and abs(amount) > INT64_MAX:
        return f"is out of range (more than {INT64_MAX} base units)"
    return amount


def _parse(value: Any) -> Fraction | str:
    text = as_text(value)
    if text is None:
        return "is not a resource quantity"
    text = text.strip()
    if len(text) > _MAX_CHARS:
        return f"is longer than {_MAX_CHARS} characters"
    m = _QUANTITY.match(text)
    if not m:
        return "is not a resource quantity"
    num = Fraction(m.group("num").rstrip(".") or "0")
    suffix = m.group("suffix") or ""
    if suffix in _BINARY:
        amount = num * _BINARY[suffix]
    elif suffix in _DECIMAL:
        amount = num * Fraction(10) ** _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT and num:
            return "is out of range (the exponent is too large)"
        amount = num * Fraction(10) ** exponent if num else num
    return -amount if m.group("sign") == "-" else amount


def quantity_problem(value: Any, fld: str, *, integer: bool = False) -> Problem | None:
    """What is wrong with a quantity, as a Problem; None when Kubernetes accepts it.

    ``integer``: extended resources (GPUs) must be whole numbers.
    """
    amount = parse_quantity(value)
    if isinstance(amount, str):
        return Problem(fld, f"{show(value)} {amount}",
                       "write e.g. cpu: 500m or 2, memory: 512Mi or 4Gi, nvidia.com/gpu: 1")
    if amount < 0:
        return Problem(fld, f"must not be negative, got {show(value)}", "remove it or give a positive amount")
    if integer and amount.denominator != 1:
        return Problem(fld, f"must be a whole number, got {show(value)}", "write e.g. nvidia.com/gpu: 1")
    return None


def quantity_value(text: Any) -> Fraction:
    """The exact value of a quantity :func:`quantity_problem` accepted; ValueError otherwise."""
    amount = parse_quantity(text)
    if isinstance(amount, str):
        raise ValueError(f"{show(text)} {amount}")
    return amount


def quantity_to_float(text: Any) -> float:
    """A quantity in base units (cores, bytes, devices) as a float, e.g. of a ResourceQuota's status.

    Lenient where :func:`parse_quantity` is strict: what the API server reports is what it
    stored, so values beyond int64 are infinite rather than errors; text that is no
    quantity at all raises ValueError.
    """
    amount = _parse(text)
    if isinstance(amount, Fraction):
        return float(amount)
    m = _QUANTITY.match(str(text).strip()) if isinstance(text, str) and len(text) < 4096 else None
    if m and m.group("suffix") and m.group("suffix")[0] in "eE":
        tiny = m.group("suffix")[1:2] == "-"
        return 0.0 if tiny else (-math.inf if m.group("sign") == "-" else math.inf)
    raise ValueError(f"{show(text)} {amount}")


def resource_name_problems(name: str, fld: str) -> list[Problem]:
    """The API server's rule for a container's resource name.

    Without a domain: cpu, memory or ephemeral-storage. With one (``nvidia.com/gpu``): a
    qualified name whose domain still is a DNS subdomain with ``requests.`` in front of it
    (that is how a ResourceQuota names it), and not itself starting with ``requests.``.
    """
    if "/" not in name:
        if name in STANDARD_RESOURCES:
            return []
        guess = RESOURCE_ALIASES.get(name.lower()) or did_you_mean(name, (*STANDARD_RESOURCES, "nvidia.com/gpu"))
        return [Problem(fld, "unknown resource name", f"did you mean '{guess}'?" if guess else
                        "use cpu, memory, ephemeral-storage, nvidia.com/gpu or a domain/name extended resource")]
    fix = "write an extended resource as domain/name, e.g. nvidia.com/gpu or example.com/fpga"
    if name.startswith("requests."):
        return [Problem(fld, f"{show(name)} is not an extended resource name (it starts with 'requests.')", fix)]
    if check_label_key(name, fld) or check_label_key("requests." + name, fld):
        return [Problem(fld, f"{show(name)} is not a valid extended resource name", fix)]
    return []


def is_extended_resource(name: str) -> bool:
    """A domain-qualified resource (nvidia.com/gpu): whole numbers, and requests equal to limits."""
    return "/" in name
