"""Credentials in URIs never printed: the rule every message and log line follows, both sides of the pod wall.

Why: a code URI may carry credentials (``https://user:token@host/algo.tgz``, a pre-signed
``?X-Amz-Signature=...``), and messages travel to task logs, the UI, XCom and a pod's termination
message. Printing redacts the userinfo and every query value; only the pod itself (the fetch init
container's arguments) gets the real URI. Standard library only, on the ground floor: the code
fetcher (:mod:`tfk8s_airflow.pod.codefetch`, in a bare init container) redacts through it too.

Decisions where the fetcher's own copy differed: **every** query value is hidden, not only those
of parameters named like credentials (a signature's name is the signer's choice: ``Policy``,
``sv``/``sig``, ``Key-Pair-Id``; a rule that must know the names misses the next one), so the
fetcher's messages no longer show ``op=OPEN`` or ``user.name=``; a URI in free text ends before a
trailing ``.``, ``,``, ``;``, ``:``, ``)`` or ``]`` (a sentence's full stop is not part of it); and
:func:`redact_text` also hides the secrets of the URIs it is given wherever else they occur in the
text (a server's error page may echo a token), which the Airflow side had not done.
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["redact_uri", "redact_text", "secrets_of"]

#: A URI inside free text, ending before trailing punctuation.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,;:)\]]")
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_QUERY_VALUE = re.compile(r"(?P<key>[?&][^=&#]*=)[^&#]*")
#: A secret shorter than this is only redacted inside URIs, not wherever it occurs in a text.
_MIN_SCRUBBED = 6


def redact_uri(uri: str) -> str:
    """``uri`` with its userinfo and query values replaced by ``***``; other URIs unchanged."""
    text = _USERINFO.sub(lambda m: m.group("scheme") + "***@", uri, count=1)
    base, sep, rest = text.partition("?")
    if not sep:
        return text
    query, hash_, fragment = rest.partition("#")
    return base + _QUERY_VALUE.sub(lambda m: m.group("key") + "***", "?" + query) + hash_ + fragment


def secrets_of(uri: str) -> list[str]:
    """What :func:`redact_uri` hides of ``uri``: the parts of its userinfo and its query values
    (each as written and percent-decoded)."""
    match = _USERINFO.match(uri)
    found: list[str] = []
    if match:
        userinfo = match.group(0)[len(match.group("scheme")):-1]
        found += [urllib.parse.unquote(part) for part in userinfo.split(":") if part]
    query = uri.partition("#")[0].partition("?")[2]
    for pair in query.split("&") if query else ():
        value = pair.partition("=")[2]
        if value:
            found += [value, urllib.parse.unquote_plus(value)]
    return found


def redact_text(text: str, *uris: str) -> str:
    """Every URI in a free text (an error message, a log line) redacted, and the secrets of
    ``uris`` (:func:`secrets_of`) hidden wherever else they occur in it."""
    for secret in sorted({s for uri in uris for s in secrets_of(uri) if len(s) >= _MIN_SCRUBBED}, key=len,
                         reverse=True):
        text = text.replace(secret, "***")
    return _URI.sub(lambda m: redact_uri(m.group(0)), text)
