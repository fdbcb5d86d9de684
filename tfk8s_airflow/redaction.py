"""Credentials in URIs never printed: the rule every message and log line follows, written once.

Why: a code URI may carry credentials (``https://user:token@host/algo.tgz``, a pre-signed
``?X-Amz-Signature=...``), and messages travel to task logs, the UI and XCom. Printing
redacts the userinfo and every query value; only the pod itself (the fetch init container's
arguments) gets the real URI. Standard library only: the code fetcher may use it too.
"""

from __future__ import annotations

import re

__all__ = ["redact_uri", "redact_text"]

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_QUERY_VALUE = re.compile(r"(?P<key>[?&][^=&#]*=)[^&#]*")


def redact_uri(uri: str) -> str:
    """``uri`` with its userinfo and query values replaced by ``***``; other URIs unchanged."""
    text = _USERINFO.sub(lambda m: m.group("scheme") + "***@", uri, count=1)
    base, sep, rest = text.partition("?")
    if not sep:
        return text
    query, hash_, fragment = rest.partition("#")
    return base + _QUERY_VALUE.sub(lambda m: m.group("key") + "***", "?" + query) + hash_ + fragment


def redact_text(text: str) -> str:
    """Every URI in a free text (an error message, a log line) redacted."""
    return _URI.sub(lambda m: redact_uri(m.group(0)), text)
