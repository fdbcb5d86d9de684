"""The spec model and its parser: ``model`` (the frozen classes), ``parse`` (a document to a spec),
``tfjob`` (a Kubeflow TFJob manifest to a native document), ``document`` (bounded loading and
``--set``), ``fields`` and ``quantity`` (checks shared by the parser), ``podtemplate``.

This module is the layer's face: ``from tfk8s_airflow.job.spec import TFJobSpec, parse_spec``.
The modules of this layer import each other directly, never this face.
"""

from tfk8s_airflow.job.spec.model import (
    ADMISSIONS,
    CHIEF_NAMES,
    CLEAN_POD_POLICIES,
    DEFAULT_MAX_REPLICAS,
    ENV_FROM_SOURCES,
    PULL_POLICIES,
    RESTART_POLICIES,
    ROLE_KEYS,
    ROLES,
    SPEC_KEYS,
    SUCCESS_POLICIES,
    VALUE_SOURCES,
    VOLUME_KINDS,
    WIRINGS,
    CodeSource,
    EmptyDir,
    EnvFrom,
    Resources,
    RoleSpec,
    TFJobSpec,
    ValueFrom,
    Volume,
    apply_overrides,
    key,
    load_spec_file,
    plain,
    spec_fields,
)
from tfk8s_airflow.job.spec.parse import parse_spec, parse_spec_file

__all__ = ["ROLES", "DEFAULT_MAX_REPLICAS", "WIRINGS", "SUCCESS_POLICIES", "RESTART_POLICIES", "PULL_POLICIES",
           "CHIEF_NAMES", "CLEAN_POD_POLICIES", "ADMISSIONS", "SPEC_KEYS", "ROLE_KEYS", "VALUE_SOURCES",
           "ENV_FROM_SOURCES", "VOLUME_KINDS", "ValueFrom",
           "EnvFrom", "EmptyDir", "Resources", "Volume", "CodeSource", "RoleSpec", "TFJobSpec", "key", "spec_fields",
           "plain", "apply_overrides", "load_spec_file", "parse_spec", "parse_spec_file"]
