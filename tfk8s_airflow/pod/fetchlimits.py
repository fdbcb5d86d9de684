"""What one code fetch may take, and how it fails: the fetcher's limits, deadline and error.

The code fetcher (:mod:`tfk8s_airflow.pod.codefetch`, the ``fetch-code`` init container) and its
archive unpacker (:mod:`tfk8s_airflow.pod.unpack`) share them. Each limit is a flag and an
environment variable (:data:`SETTINGS`); going over one is a permanent failure that says how to
raise it, and the deadline of the whole fetch, retries included, a retryable one. Every message
is redacted (:func:`tfk8s_airflow.redaction.redact_text`). The standard library and the pod
contract only, like the fetcher.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import time
from typing import NamedTuple

from tfk8s_airflow.contract import EXIT_PERMANENT, EXIT_RETRYABLE
from tfk8s_airflow.redaction import redact_text


class FetchError(Exception):
    """A failure with the exit code it maps to; its message never carries credentials."""

    def __init__(self, message: str, code: int = EXIT_PERMANENT) -> None:
        super().__init__(redact_text(message))
        self.code = code


class DeadlinePassed(FetchError):
    """The fetch ran out of time (retryable: the next attempt may find the server well)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_RETRYABLE)


_NUMBER = re.compile(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class Setting(NamedTuple):
    """A limit of every fetch: its default, and the flag and environment variable that change it."""

    default: float
    flag: str
    env: str
    unit: str  # "bytes" (which may be written 512M, 1G...), "members" or "seconds"
    about: str

    def how(self) -> str:
        return f"{self.flag} or ${self.env}"

    def show(self, value: float) -> str:
        if self.unit == "seconds":
            return f"{value:g}s"
        for suffix, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if self.unit == "bytes" and value >= factor and value % factor == 0:
                return f"{value / factor:g} {suffix}"
        return f"{value:,.0f} {self.unit}"

    def exceeded(self, what: str, limit: float) -> FetchError:
        """The permanent failure of ``what`` going over ``limit``."""
        return FetchError(f"{what} exceeds the cap of {self.show(limit)}; if the code really is this large, "
                          f"raise the cap with {self.how()}")

    def parse(self, text: str) -> float:
        """``text`` as a positive value; bytes may end in K, M, G or T (powers of 1024)."""
        match = _NUMBER.fullmatch(text.strip())
        value = 0.0
        if match and (self.unit == "bytes" or not match.group(2)):
            value = float(match.group(1)) * _FACTORS[match.group(2).upper()]
        if value <= 0 or (self.unit == "members" and value != int(value)):
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of {self.unit} (set by "
                                             f"{self.how()})")
        return value if self.unit == "seconds" else int(value)


DOWNLOAD_BYTES = Setting(256 << 20, "--max-download-bytes", "TFK8S_CODE_MAX_DOWNLOAD_BYTES", "bytes",
                         "the most bytes to download")
UNPACKED_BYTES = Setting(1 << 30, "--max-unpacked-bytes", "TFK8S_CODE_MAX_UNPACKED_BYTES", "bytes",
                         "the most bytes an archive may unpack to")
MEMBERS = Setting(10_000, "--max-members", "TFK8S_CODE_MAX_MEMBERS", "members",
                  "the most members (files, directories, links) an archive may have")
DEADLINE = Setting(300, "--deadline", "TFK8S_CODE_DEADLINE", "seconds",
                   "the most seconds the whole fetch may take, retries included")
#: Each field of :class:`Limits` and the setting that gives it.
SETTINGS = {"download_bytes": DOWNLOAD_BYTES, "unpacked_bytes": UNPACKED_BYTES, "members": MEMBERS,
            "deadline": DEADLINE}


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one fetch may take (see :data:`SETTINGS`)."""

    download_bytes: float = DOWNLOAD_BYTES.default
    unpacked_bytes: float = UNPACKED_BYTES.default
    members: float = MEMBERS.default
    deadline: float = DEADLINE.default


#: The limits of a fetch that names none (every setting's default).
DEFAULT_LIMITS = Limits()


class Deadline:
    """The end of the whole fetch, retries included."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def __str__(self) -> str:
        return f"the deadline of {DEADLINE.show(self.seconds)} ({DEADLINE.how()})"

    def check(self, when: str) -> None:
        if self.left() <= 0:
            raise DeadlinePassed(f"{self} passed {when}")

    def timeout(self, timeout: float, when: str) -> float:
        """A socket timeout that does not outlast the deadline."""
        self.check(when)
        return min(timeout, self.left())
