"""The provider's metadata is complete and valid: Airflow's own schema accepts it, ``config`` is
every ``[tfk8s]`` setting as declared once (tfk8s_airflow/configspec.py), ``triggers`` every trigger
class of the package, ``plugins`` the plugin, ``asset-uris`` the hdfs scheme."""
from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from importlib.resources import files

import jsonschema
import pytest

from tfk8s_airflow import configspec, triggers
from tfk8s_airflow.provider import HOLDERS, get_provider_info


def _info():
    return get_provider_info()


def test_airflows_provider_info_schema_accepts_the_metadata():
    schema = json.loads(files("airflow").joinpath("provider_info.schema.json").read_text())
    jsonschema.validate(_info(), schema)


def test_config_is_every_declared_setting():
    options = _info()["config"][configspec.SECTION]["options"]
    names = [s.name for holder in HOLDERS for s in configspec.declared(holder)]
    assert len(names) == len(set(names)), "two fields declare the same [tfk8s] setting"
    assert list(options) == names
    for name in ("allowed_host_paths", "default_queue", "staging_pods", "staging_lease", "staging_pod_template"):
        assert name in options


def test_every_dataclass_field_of_a_holder_is_a_declared_setting():
    import dataclasses
    for holder in HOLDERS:
        declared = {s.field for s in configspec.declared(holder)}
        assert declared == {f.name for f in dataclasses.fields(holder)}, holder


def test_each_default_airflow_shows_is_the_fields_default():
    """The default ``airflow config list`` shows reads back (through the setting's own parser) as the
    default the package uses when nothing is set."""
    for holder in HOLDERS:
        built = holder()
        for s in configspec.declared(holder):
            assert s.kind in ("string", "integer", "boolean", "float")
            if s.value is None:
                continue
            assert configspec.read(holder, {s.name: s.value}.get)[s.field] == getattr(built, s.field), s.name
            if s.example is not None:  # an example is a valid value
                configspec.read(holder, {s.name: s.example}.get)


def test_a_new_field_with_metadata_is_a_setting_without_another_line():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Holder:
        max_things: int = dataclasses.field(default=3, metadata=configspec.setting(
            "how many things", "3", int, example="5"))

    (s,) = configspec.declared(Holder)
    assert (s.name, s.value, s.kind, s.example, s.variable) == ("max_things", "3", "integer", "5",
                                                                  "TFK8S_MAX_THINGS")


def test_triggers_are_every_trigger_class_grouped_per_integration():
    from airflow.triggers.base import BaseTrigger

    info = _info()
    integrations = {i["integration-name"] for i in info["integrations"]}
    listed = set()
    for group in info["triggers"]:
        assert group["integration-name"] in integrations
        listed.update(group["python-modules"])
    defining = set()
    for mod in pkgutil.iter_modules(triggers.__path__, "tfk8s_airflow.triggers."):
        module = importlib.import_module(mod.name)
        if any(issubclass(c, BaseTrigger) and c.__module__ == mod.name and not c.__name__.startswith("_")
               for _, c in inspect.getmembers(module, inspect.isclass)):
            defining.add(mod.name)
    assert listed == defining


def test_plugins_name_the_plugin():
    from tfk8s_airflow.plugin import TFK8sPlugin

    info = _info()
    assert info["plugins"] == [{"name": TFK8sPlugin.name, "plugin-class": "tfk8s_airflow.plugin.TFK8sPlugin"}]


def test_the_hdfs_asset_uri_scheme_is_the_packages_and_airflow_registers_it():
    """The metadata's ``asset-uris``: hdfs, with a handler, a factory and an OpenLineage converter that import;
    Airflow's providers manager registers them, so Airflow's own Asset checks an hdfs:// URI with ours."""
    from airflow.sdk import Asset
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    def import_string(path: str):
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    (entry,) = _info()["asset-uris"]
    assert entry["schemes"] == ["hdfs"] and "dataset-uris" not in _info()
    for key in ("handler", "factory", "to_openlineage_converter"):
        assert entry[key].startswith("tfk8s_airflow.lineage.") and callable(import_string(entry[key])), key
    manager = ProvidersManagerTaskRuntime()  # what the task SDK's Asset asks
    assert manager.asset_uri_handlers["hdfs"] is import_string(entry["handler"])
    assert manager.asset_to_openlineage_converters["hdfs"] is import_string(entry["to_openlineage_converter"])
    assert Asset(uri="hdfs://nn:8020/data/clicks/dt=2026-01-01/").uri == "hdfs://nn:8020/data/clicks/dt=2026-01-01"
    with pytest.raises(ValueError, match="must name the NameNode"):
        Asset(uri="hdfs:///data/clicks")
    asset = import_string(entry["factory"])(host="nn", port=8020, path="/data/clicks")
    assert asset.uri == "hdfs://nn:8020/data/clicks"


def test_airflows_default_reads_as_unset_so_the_fallback_variable_applies(monkeypatch):
    from airflow.configuration import conf

    from tfk8s_airflow.deployment import copy_settings

    monkeypatch.setenv("TFK8S_STAGING_PODS", "8")
    monkeypatch.delenv("AIRFLOW__TFK8S__STAGING_PODS", raising=False)
    if conf.get("tfk8s", "staging_pods", fallback=None) is None:  # a test run without providers' config
        monkeypatch.setattr(conf, "get_default_value", lambda section, key, **kw: "4")
        monkeypatch.setattr(conf, "get", lambda section, key, **kw: "4")
    assert copy_settings().pods == 8
    monkeypatch.setenv("AIRFLOW__TFK8S__STAGING_PODS", "6")
    assert copy_settings().pods == 6
