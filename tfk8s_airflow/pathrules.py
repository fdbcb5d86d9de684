"""The path rules every input is held to, written once (specs, staging, the volume, the code fetcher).

Why refuse ``..`` instead of resolving it: paths come from templates, the UI form and
archives; a path that needs ``..`` to say where it is can also say it without, and refusing
it outright leaves nothing to get wrong when the path is later joined to a root. Standard
library only (the code fetcher imports it).
"""

from __future__ import annotations


def has_parent_segment(path: str) -> bool:
    """Whether ``path`` has a ``..`` segment (``a/../b``, ``..``, ``..\\x``), resolved or not."""
    return ".." in str(path).replace("\\", "/").split("/")


def is_safe_relative(path: str) -> bool:
    """A non-empty relative POSIX path with no ``..`` segment and no backslash."""
    text = str(path)
    return bool(text) and not text.startswith("/") and "\\" not in text and not has_parent_segment(text)
