"""JSON and text that someone else wrote, read within bounds: the one reader of every writable object.

Why one reader: pod annotations (the job's verdict, recovery's attempts), progress lines of a log,
and the records and journals the staging pods leave on the shared volume are written by whoever
may write Services in the namespace, run a training image, or write the volume. Python's
``json.loads`` recurses once per level of nesting, so ~1,000 brackets raise ``RecursionError``
(not a ``ValueError``), and a reader that caught only ``ValueError`` let it end the job's shared
watch and teardown. Here every such read:

1. is bounded in size (``max_bytes``, its UTF-8 bytes) before anything is parsed;
2. is bounded in nesting (``max_depth``, default :data:`MAX_DEPTH`), measured by scanning the
   brackets outside strings **before** ``json.loads`` runs, so no input can make it recurse deep;
3. turns every other failure (not UTF-8, not JSON, ``NaN`` when ``strict``, a number of more digits
   than Python converts, anything else) into :class:`~tfk8s_airflow.exceptions.UntrustedJSONError`,
   a ``ValueError`` and a ``DataError``: :func:`loads` raises only that, :func:`read` returns None
   and logs a warning (once per source and value: a watch reads the same annotation every poll).

:func:`clean_text` is the matching rule for text taken from such a value into a message (a job's
failure reason): control and format characters removed, length bounded.

Standard library only, on the ground floor: the pod side reads through it too (the staging
copier's and checksum pods' journals, the reference trainer's state on the volume).
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from itertools import accumulate
from typing import Any

from tfk8s_airflow.exceptions import UntrustedJSONError

__all__ = ["MAX_DEPTH", "clean_text", "nesting_within", "loads", "read"]

#: Levels of arrays and objects a document may nest: the package's own records and annotations nest a
#: few; json.loads recurses once a level, far below Python's recursion limit at this depth.
MAX_DEPTH = 32
#: Values :func:`read` remembers having warned of, so a value read again every poll warns once.
_WARNED_MAX = 256

_log = logging.getLogger(__name__)
_warned: dict[tuple[str, str, str], None] = {}

# A JSON string (escapes included), or an unterminated one with the rest of the text: always matches
# at a quote, in one pass (possessive), so no input makes the scan quadratic.
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
# Openers to +1 and closers to -1 as signed bytes (for a running depth), everything else deleted;
# then openers to "(" and closers to ")" (a closer of the other kind is json.loads's to refuse).
_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_PAIRS = bytes.maketrans(b"\x01\xff", b"()")
_PREFIX = 1 << 16


def nesting_within(text: str, max_depth: int) -> bool:
    """Whether the arrays and objects of ``text`` read as JSON (brackets inside strings ignored) nest at
    most ``max_depth`` levels and every bracket is closed: else ``json.loads`` could recurse deeper, or
    fails anyway. One pass of C code over ``text``, then at most ``max_depth`` over its brackets (one a
    level), each removing the innermost pairs."""
    brackets = _STRING.sub("", text).encode("ascii", "replace").translate(_BRACKETS, _NOT_BRACKETS)
    # The first 64 KiB's running depth: what nests deep at its start is refused without further passes.
    if brackets and max(accumulate(memoryview(brackets[:_PREFIX]).cast("b"))) > max_depth:
        return False
    pairs = brackets.translate(_PAIRS)
    for _ in range(max_depth):  # each pass removes the innermost pairs: one level
        if not pairs:
            return True
        shorter = pairs.replace(b"()", b"")
        if len(shorter) == len(pairs):
            return False  # a bracket that is never closed, or closed before it opens
        pairs = shorter
    return not pairs


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(raw: Any, *, max_bytes: int, max_depth: int = MAX_DEPTH, strict: bool = False,
          what: str = "the value") -> Any:
    """The JSON document ``raw`` (text, or UTF-8 bytes), or :class:`UntrustedJSONError` saying why
    not: larger than ``max_bytes``, nested deeper than ``max_depth``, not JSON (``strict``: NaN and
    Infinity refused too), or anything else that went wrong. Never raises anything else."""
    try:
        if isinstance(raw, (bytes, bytearray, memoryview)):
            if len(raw) > max_bytes:
                raise UntrustedJSONError(f"{what} is larger than {max_bytes} bytes")
            text = bytes(raw).decode("utf-8")
        elif isinstance(raw, str):
            if len(raw) > max_bytes or (len(raw) * 4 > max_bytes and
                                        len(raw.encode("utf-8", "surrogatepass")) > max_bytes):
                raise UntrustedJSONError(f"{what} is larger than {max_bytes} bytes")
            text = raw
        else:
            raise UntrustedJSONError(f"{what} is a {type(raw).__name__}, not JSON text")
        if not nesting_within(text, max_depth):
            raise UntrustedJSONError(f"{what} nests more than {max_depth} levels deep, or leaves a bracket open")
        if strict:
            return json.loads(text, parse_constant=_refuse_constant)
        return json.loads(text)
    except UntrustedJSONError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything a writer's value makes go wrong is its fault, never ours
        detail = str(exc)[:200] or type(exc).__name__
        raise UntrustedJSONError(f"{what} is not a JSON document: {detail}") from None


def _digest(raw: Any) -> str:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return hashlib.blake2b(data, digest_size=8).hexdigest() if isinstance(data, bytes) else repr(type(raw))


def read(raw: Any, *, max_bytes: int, max_depth: int = MAX_DEPTH, strict: bool = False,
         what: str = "the value", log: logging.Logger | None = None) -> Any | None:
    """:func:`loads`, or None with a warning (once per ``what`` and value) when ``raw`` is not a
    bounded JSON document: what someone else wrote is ignored, never let to end the reader."""
    try:
        return loads(raw, max_bytes=max_bytes, max_depth=max_depth, strict=strict, what=what)
    except UntrustedJSONError as exc:
        key = (what, str(exc), _digest(raw))
        if key not in _warned:
            if len(_warned) >= _WARNED_MAX:
                _warned.pop(next(iter(_warned)))
            _warned[key] = None
            (log or _log).warning("%s ignored: %s", what, exc)
        return None


def clean_text(value: Any, limit: int) -> str:
    """``value`` as one line of text fit for a message: control and format characters (terminal
    escapes, bidirectional overrides, line breaks) removed, tabs and line breaks made spaces, at most
    ``limit`` characters. Anything but a string is ''."""
    if not isinstance(value, str):
        return ""
    out = []
    for c in value[:limit * 4]:
        if c in "\t\n\r\x0b\x0c\u2028\u2029\x85":
            out.append(" ")
        elif c.isprintable():
            out.append(c)
        if len(out) >= limit:
            break
    return "".join(out).strip()
