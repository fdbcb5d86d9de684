"""A job's progress as its training program reports it: pure parsing of what a pod wrote.

Why a module of its own: the job's shared watch (:mod:`tfk8s_airflow.k8s.watch`) reads the lead
replica's log and the chief's ``checkpoint`` file every poll; what is in them was written by the
training image, so reading a step out of them is a rule of the job model (what counts as a step,
which fields are kept), with no I/O and nothing that may raise on what a pod wrote.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tfk8s_airflow import untrusted
from tfk8s_airflow.contract import PROGRESS_PREFIX
from tfk8s_airflow.job.spec.fields import finite_float

__all__ = ["PROGRESS_LINE_MAX", "STEP_MAX", "checkpoint_step_of", "parse_progress", "read_progress", "step_of"]

#: Steps beyond this (2**53, the largest a float holds exactly) are no step: the ETA divides by them.
STEP_MAX = 2**53
#: Characters of a progress line's JSON read; a longer one is skipped.
PROGRESS_LINE_MAX = 4096
_DIGITS = re.compile(r"[0-9]{1,16}")
_CHECKPOINT_STEP = re.compile(r'^model_checkpoint_path:[ \t]*"[^"\n]*?-([0-9]{1,16})"[ \t]*$', re.M)


def parse_progress(text: str) -> dict[str, Any] | None:
    """The newest ``tfk8s.progress {...}`` line of a log, as a dict with an int ``step``; or None."""
    return read_progress(text)[0]


def read_progress(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The newest usable ``tfk8s.progress`` line of a log (see :func:`parse_progress`), and what was
    wrong with the newest line that was not usable, if one was skipped (for a warning).

    The log is the training program's, so nothing in it may raise here: a line that is not JSON,
    not an object, or whose ``step`` is not a whole number from 0 to 2**53 (``Infinity``, ``NaN``,
    ``1e400``, ``true``, ``"x"``) is skipped; ``loss`` and ``examples_per_sec`` are kept only when
    finite numbers, ``target_step`` only when a whole number in the same range.
    """
    problem: str | None = None
    for line in reversed(text.splitlines()):
        at = line.find(PROGRESS_PREFIX)
        if at < 0:
            continue
        body = line[at + len(PROGRESS_PREFIX):]
        try:  # the shared bounded reader: too long, too deep or not JSON is a line skipped, never raised
            doc = untrusted.loads(body, max_bytes=4 * PROGRESS_LINE_MAX) if len(body) <= PROGRESS_LINE_MAX else None
        except ValueError:
            doc = None
        step = step_of(doc.get("step")) if isinstance(doc, dict) else None
        if step is None:
            problem = problem or f"progress line {body[:80]!r} has no step from 0 to 2**53 (ignored)"
            continue
        assert isinstance(doc, dict)
        out: dict[str, Any] = {"step": step}
        for key in ("loss", "examples_per_sec"):
            value = finite_float(doc.get(key))
            if value is not None:
                out[key] = value
        target = step_of(doc.get("target_step"))
        if target is not None:
            out["target_step"] = target
        return out, problem
    return None, problem


def step_of(value: Any) -> int | None:
    """A step as a progress line gives it: a whole number from 0 to :data:`STEP_MAX` (an int, or a
    float or string of one); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return None
        value = int(value)
    elif isinstance(value, str):
        value = int(value) if _DIGITS.fullmatch(value) else None
    return value if isinstance(value, int) and 0 <= value <= STEP_MAX else None


def checkpoint_step_of(text: str) -> int | None:
    """The step of the newest checkpoint named in TensorFlow's ``checkpoint`` file ``text``
    (``model_checkpoint_path: "model.ckpt-<step>"``); None when it names none."""
    m = _CHECKPOINT_STEP.search(text)
    return step_of(m.group(1)) if m else None
