"""Render a job as multi-document YAML through a Jinja2 template.

Why a template at all when the builders exist: the seed's workflow was a Jinja2
template piped to ``kubectl apply -f -``, and teams customise it (sidecars,
affinity, site conventions). The template sees the same replica plan as the
builders (:func:`tfk8s_airflow.job.builders.objects.plan_replicas`), renders with
StrictUndefined so a typo in a custom template is an error instead of an empty
field, and its output is parsed back to check it is YAML before it is printed.

Templates render in Jinja's SandboxedEnvironment: a template file is configuration, not
code, and without the sandbox ``{{ spec.to_dict.__globals__ }}`` reaches every module of
the process. Values go through the ``json`` filter (:func:`yaml_json`): JSON with every
character YAML would refuse or read as a line break escaped, so any string a spec holds
survives the round trip exactly.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
import yaml

from tfk8s_airflow.contract import TENSORBOARD_CONTAINER
from tfk8s_airflow.exceptions import TemplateError
from tfk8s_airflow.job.builders.objects import (
    CONTAINER_NAME,
    PORT_NAME,
    SHARDS_KEY,
    JobNames,
    job_labels,
    plan_replicas,
    shards_json,
)
from tfk8s_airflow.job.builders.tensorboard import plan_tensorboard
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec

DEFAULT_TEMPLATE = Path(__file__).parent / "templates" / "tfcluster_template.yaml.jinja"

try:  # libyaml's C loader is an order of magnitude faster for 512-replica jobs
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyPI wheels ship libyaml
    _Loader = yaml.SafeLoader


#: Characters that must not appear raw in YAML: the non-printable ones (C1 controls, DEL,
#: surrogates, U+FFFE/U+FFFF) and those YAML 1.1 reads as line breaks or a byte order mark.
_YAML_UNSAFE = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\x85\u2028\u2029\ufeff]")


def yaml_json(value: Any) -> str:
    """``value`` as JSON that YAML reads back exactly (the templates' ``json`` filter).

    JSON is YAML, except that ``ensure_ascii=False`` leaves characters raw that a YAML
    parser refuses (DEL, the C1 controls) or folds as line breaks (NEL, U+2028, U+2029);
    those, and only those, are written as ``\\u`` escapes, which both languages share.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if text.isascii() and "\x7f" not in text:  # nearly always: nothing to escape, and 4x faster
        return text
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@functools.lru_cache(maxsize=16)  # compiled templates are reused across renders
def _environment(template_dir: Path) -> jinja2.Environment:
    env = jinja2.sandbox.SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["json"] = yaml_json
    return env


def render_yaml(spec: TFJobSpec, names: JobNames, shards: Mapping[str, Sequence[str]] | None = None,
                template: str | Path | None = None, *, check: bool | None = None,
                policy: DeploymentPolicy | None = None) -> str:
    """The job's objects as multi-document YAML text.

    ``check`` parses the output back; by default only for custom templates (the
    bundled one is proven equal to the builders by the test suite). ``policy``: the
    deployment's, as for :func:`~tfk8s_airflow.job.builders.objects.plan_replicas`.
    """
    path = Path(template) if template else DEFAULT_TEMPLATE
    if not path.is_file():
        raise TemplateError(f"template {path} does not exist (fix: pass an existing --template file)")
    labels = job_labels(spec, names)
    context = {
        "spec": spec, "names": names, "labels": labels,
        "replicas": plan_replicas(spec, names, shards, policy),
        "tensorboard": plan_tensorboard(spec, names, policy, labels),
        "shards_json": shards_json(shards) if shards is not None else None,
        "container_name": CONTAINER_NAME, "port_name": PORT_NAME, "shards_key": SHARDS_KEY,
        "tensorboard_name": TENSORBOARD_CONTAINER,
    }
    try:
        text = _environment(path.parent).get_template(path.name).render(context)
    except jinja2.TemplateError as exc:
        lineno = getattr(exc, "lineno", None)
        where = f"{path}:{lineno}" if lineno else str(path)
        raise TemplateError(f"template {where} failed to render: {exc}") from exc
    if check if check is not None else template is not None:
        parse_yaml(text, source=str(path))
    return text


def parse_yaml(text: str, source: str = "<rendered>") -> list[dict[str, Any]]:
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as exc:
        raise TemplateError(f"template {source} rendered invalid YAML: {exc}") from exc
