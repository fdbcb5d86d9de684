"""The deployment's ``[tfk8s]`` settings read as Airflow reads them, without importing Airflow.

Why: the ``tfk8s`` command admits what setup would admit, so it reads the same settings the
deployment's Airflow does, where there may be no Airflow installed (a CI job checking specs)
and where importing it would cost seconds. The precedence is Airflow's, then this package's
own variables:

1. ``AIRFLOW__TFK8S__<NAME>`` from the environment;
2. ``<name> = ...`` under ``[tfk8s]`` in Airflow's configuration file: ``$AIRFLOW_CONFIG``, else
   ``$AIRFLOW_HOME/airflow.cfg``, else ``~/airflow/airflow.cfg`` (Airflow's own default);
3. ``TFK8S_<NAME>`` from the environment;
4. the built-in default (:class:`~tfk8s_airflow.job.policy.DeploymentPolicy`).

As on the Airflow side (:mod:`tfk8s_airflow.deployment`), a value of 1. or 2. that is the setting's
declared default is read as unset, so 3. still applies: Airflow writes every provider setting with its
default into the ``airflow.cfg`` it generates, and that file must not hide ``TFK8S_<NAME>``.

Not read here: Airflow's ``_CMD`` and ``_SECRET`` variants and its secrets backends, which
only Airflow itself can resolve (the Airflow side, :mod:`tfk8s_airflow.deployment`, reads them).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Callable, Mapping

from tfk8s_airflow.configspec import SECTION, declared
from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.policy.deployment import DeploymentPolicy

__all__ = ["airflow_config_path", "lookup", "with_fallback"]


def airflow_config_path(env: Mapping[str, str]) -> str:
    """The configuration file Airflow reads in this environment."""
    if env.get("AIRFLOW_CONFIG"):
        return os.path.expanduser(env["AIRFLOW_CONFIG"])
    home = env.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return os.path.join(os.path.expanduser(home), "airflow.cfg")


def _section(path: str) -> Mapping[str, str]:
    """The ``[tfk8s]`` section of ``path`` ({} when the file or the section is absent)."""
    # Airflow's file uses %% for % and may hold {AIRFLOW_HOME} templates: read it raw, as text.
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with open(path, encoding="utf-8") as fh:
            parser.read_file(fh, source=path)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise SpecError(Problem(path, f"Airflow's configuration cannot be read: {exc}",
                                "fix the file, or point AIRFLOW_CONFIG at the deployment's airflow.cfg")) from exc
    return dict(parser[SECTION]) if parser.has_section(SECTION) else {}


def with_fallback(airflow_get: Callable[[str], str | None], env: Mapping[str, str]) -> Callable[[str], str | None]:
    """``airflow_get(name)`` (Airflow's value of ``[tfk8s] name``), else ``TFK8S_<NAME>`` where it is unset or empty."""

    def get(name: str) -> str | None:
        value = airflow_get(name)
        return env.get(f"TFK8S_{name.upper()}") if value in (None, "") else value

    return get


def lookup(env: Mapping[str, str]) -> Callable[[str], str | None]:
    """``get(name) -> value or None`` for :meth:`DeploymentPolicy.from_settings`, in Airflow's precedence,
    without Airflow: its variable, else its file, else ``TFK8S_<NAME>``; Airflow's value that is the
    setting's default counts as unset."""
    section: Mapping[str, str] | None = None
    defaults = {s.name: s.value for s in declared(DeploymentPolicy)}

    def airflow_get(name: str) -> str | None:
        nonlocal section
        value = env.get(f"AIRFLOW__{SECTION.upper()}__{name.upper()}")
        if value is None:
            if section is None:
                section = _section(airflow_config_path(env))
            value = section.get(name.lower())
        return None if value is not None and value == defaults.get(name) else value

    return with_fallback(airflow_get, env)
