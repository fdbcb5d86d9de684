"""What every operator and sensor of the package does the same way.

Why: the one rule "a :class:`~tfk8s_airflow.exceptions.PermanentError` fails the task at
once, without retries; anything else is left to Airflow's retries" is written here once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException

from tfk8s_airflow.exceptions import PermanentError


def describe(exc: BaseException) -> str:
    """``SpecError: ...``: the message a failed task shows, naming the error class."""
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def fail_permanently() -> Iterator[None]:
    """Turn a PermanentError raised inside into ``AirflowFailException`` (no retry)."""
    try:
        yield
    except PermanentError as exc:
        raise AirflowFailException(describe(exc)) from exc
