"""Airflow's own commands show the provider's metadata in full: ``airflow config list --defaults``
every ``[tfk8s]`` setting with its default, ``airflow providers get tfk8s-airflow --full`` the
triggers, the plugin, the config and the asset URI scheme. Each runs in a fresh AIRFLOW_HOME, importing this tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfk8s_airflow.configspec import SECTION, declared
from tfk8s_airflow.provider import HOLDERS

REPO = Path(__file__).resolve().parents[2]
SETTINGS = [s for holder in HOLDERS for s in declared(holder)]


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "TFK8S_"))}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    binary = Path(sys.executable).with_name("airflow")

    def run(*args: str) -> str:
        res = subprocess.run([str(binary), *args], capture_output=True, text=True, env=env, cwd=home, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        return res.stdout
    return run


def test_config_list_shows_every_setting_with_its_default(airflow):
    out = airflow("config", "list", "--defaults", "--show-values", "--section", SECTION)
    assert f"[{SECTION}]" in out
    for s in SETTINGS:
        assert f"# {s.name} = {s.value or ''}\n" in out, s.name
        assert f"AIRFLOW__{SECTION.upper()}__{s.name.upper()}" in out
        if s.example:
            assert f"# Example: {s.name} = {s.example}" in out, s.name


def test_providers_get_full_lists_triggers_plugins_and_config(airflow):
    out = airflow("providers", "get", "tfk8s-airflow", "--full", "-o", "json")
    (info,) = json.loads(out[out.index("["):])
    assert [m for group in info["triggers"] for m in group["python-modules"]] == [
        "tfk8s_airflow.triggers.job", "tfk8s_airflow.triggers.hdfs", "tfk8s_airflow.triggers.staging"]
    assert info["plugins"] == [{"name": "tfk8s", "plugin-class": "tfk8s_airflow.plugin.TFK8sPlugin"}]
    assert list(info["config"][SECTION]["options"]) == [s.name for s in SETTINGS]
    assert info["asset-uris"] == [{"schemes": ["hdfs"], "handler": "tfk8s_airflow.lineage.sanitize_hdfs_uri",
                                   "factory": "tfk8s_airflow.lineage.create_hdfs_asset",
                                   "to_openlineage_converter": "tfk8s_airflow.lineage.convert_asset_to_openlineage"}]


def test_airflow_reads_the_default_it_shows(airflow):
    assert airflow("config", "get-value", SECTION, "staging_pods").strip() == "4"
