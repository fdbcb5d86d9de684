"""Field checks shared by the spec parser: each returns problems, never raises.

Why here and not in the API server: Kubernetes would reject most of these too,
but only after half a job exists (the first pods created, the rest refused).
Checking the Kubernetes grammar locally lets us refuse the whole job up front,
with the spec's field name and a fix instead of an API path.
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
from collections.abc import Iterable
from typing import Any

from tfk8s_airflow.exceptions import Problem

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: The longest duration: Kubernetes' activeDeadlineSeconds is an int32 (about 68 years).
MAX_DURATION_S = INT32_MAX

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_INTEGER = re.compile(r"^[+-]?[0-9]{1,19}$")
_SECONDS = re.compile(r"^[0-9]{1,12}$")
_DURATION = re.compile(r"^([0-9]{1,12}(\.[0-9]{1,9})?)(ms|s|m|h|d)$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
#: Integers longer than this (in bits, about 64 digits) are never spelled out in text.
_MAX_TEXT_INT_BITS = 212


class _Repr(reprlib.Repr):
    """reprlib with short limits, and huge integers described instead of converted."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4
        self.maxlevel = 2

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _MAX_TEXT_INT_BITS:
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_SHOW = _Repr()


def show(value: Any) -> str:
    """A value as a message shows it: a repr cut to about 60 characters, never expensive.

    Messages quote the user's input back; a value may be a megabyte string, a structure
    that YAML aliases make enormous, or an integer of thousands of digits (which ``repr``
    refuses to convert), so every message quotes values through here.
    """
    try:
        return _SHOW.repr(value)
    except Exception:  # noqa: BLE001 - an exotic object whose repr fails still gets a message
        return f"<{type(value).__name__}>"


def as_text(value: Any, *, bools: bool = False) -> str | None:
    """A scalar as the text Kubernetes is given, or None when it is not one.

    Strings as they are; integers (up to about 64 digits) and finite floats in decimal;
    ``true``/``false`` for booleans only where ``bools`` says so (env values, label values).
    """
    if isinstance(value, bool):
        return str(value).lower() if bools else None
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value) if value.bit_length() <= _MAX_TEXT_INT_BITS else None
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    return None


def parse_int(value: Any) -> int | None:
    """An integer from an int or a plain decimal string ("12", "-3"); None otherwise.

    Only ASCII digits count: ``"²".isdigit()`` is true but ``int("²")`` fails.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.match(value.strip()):
        return int(value.strip())
    return None


_DECIMAL_NUMBER = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,12})?$")


def finite_float(value: Any) -> float | None:
    """An int or a float read from data that nobody checked (JSON can hold an int of any size) as a
    finite float; None for anything else, never an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def parse_number(value: Any) -> float | None:
    """A finite non-negative number from an int, a float or a plain decimal string ("1.5"); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= INT64_MAX else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and _DECIMAL_NUMBER.match(value.strip()):
        return float(value.strip())
    return None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    if len(word) > 64:
        return None
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def parse_duration(value: Any) -> int | None:
    """Seconds from 300, "300", "90s", "5m", "2h", "1d"; None when unparseable or not finite."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        if _SECONDS.match(text):
            return int(text)
        m = _DURATION.match(text)
        if m:
            return int(float(m.group(1)) * _DURATION_UNITS[m.group(3)])
    return None


def check_dns_label(value: str, fld: str) -> list[Problem]:
    if len(value) > 63:
        return [Problem(fld, f"{show(value)} is {len(value)} characters, the limit is 63", "shorten it")]
    if not _DNS_LABEL.match(value):
        return [Problem(fld, f"{show(value)} is not a DNS-1123 label",
                        "use lowercase letters, digits and '-', starting and ending with a letter or digit")]
    return []


def check_dns_subdomain(value: str, fld: str) -> list[Problem]:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return [Problem(fld, f"{show(value)} is not a DNS-1123 subdomain",
                        "use lowercase letters, digits, '-' and '.', at most 253 characters")]
    return []


def check_label_key(key: str, fld: str) -> list[Problem]:
    """A qualified name: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if not slash:
        prefix, name = "", key
    problems = []
    if slash and (not prefix or check_dns_subdomain(prefix, fld)):
        problems.append(Problem(fld, f"key prefix {show(prefix)} is not a DNS subdomain",
                                "write the key as example.com/name or just name"))
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        problems.append(Problem(fld, f"key name {show(name)} is not valid",
                                "use at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric"))
    return problems


def check_label_value(value: str, fld: str) -> list[Problem]:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return [Problem(fld, f"label value {show(value)} is not valid",
                        "use at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric")]
    return []


def check_config_key(key: str, fld: str) -> list[Problem]:
    """A key of a Secret or ConfigMap: letters, digits, '-', '_', '.'; at most 253; not . or .."""
    if len(key) > 253 or not _CONFIG_KEY.match(key) or key in (".", ".."):
        return [Problem(fld, f"{show(key)} is not a valid Secret/ConfigMap key",
                        "use letters, digits, '-', '_' and '.', e.g. password or tls.crt")]
    return []


def is_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def is_sha256(text: str) -> bool:
    return bool(_SHA256.match(text))


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
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$",
    re.ASCII,  # Go's \w: ASCII letters, digits and '_'
)


def check_image(ref: str, fld: str) -> list[Problem]:
    if not ref or len(ref) > 4096 or not _IMAGE.match(ref):
        hint = ""
        if len(ref) <= 4096 and ref != ref.lower() and _IMAGE.match(ref.lower()):
            hint = f"; repository names are lowercase: {show(ref.lower())}"
        return [Problem(fld, f"{show(ref)} is not a valid image reference{hint}",
                        "write [registry[:port]/]repository[:tag][@sha256:digest], e.g. tfk8s/trainer:0.1")]
    return []
