"""Render a job's plan as multi-document YAML: what setup creates, object for object.

Why the plan and nothing else: ``tfk8s render`` is the seed's Jinja2 + ``kubectl apply -f -``
workflow done right, and what it prints must be what setup creates, so it prints the objects of
:func:`~tfk8s_airflow.job.builders.plan.plan_job` (:meth:`JobPlan.objects
<tfk8s_airflow.job.builders.plan.JobPlan.objects>`), dumped by YAML's safe dumper. Setup's owner
references are not among them: they name the Service's UID, which exists only once the Service
does.

A team's own Jinja2 template (``--template``) is a view of the same plan: it gets ``plan``,
``objects`` (the plan's, in creation order), ``spec`` and ``names``, renders with StrictUndefined
(a typo is an error, not an empty field) in Jinja's SandboxedEnvironment (a template file is
configuration, not code: without the sandbox ``{{ spec.to_dict.__globals__ }}`` reaches every
module of the process), and its output is parsed back to check it is YAML. Values go through the
``json`` filter (:func:`yaml_json`): JSON with every character YAML would refuse or read as a line
break escaped, so any string a spec holds survives the round trip exactly.
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

from tfk8s_airflow.exceptions import TemplateError
from tfk8s_airflow.job.builders.plan import JobPlan

__all__ = ["dump_yaml", "parse_yaml", "render_yaml", "yaml_json"]

try:  # libyaml's C loader and dumper are an order of magnitude faster for 512-replica jobs
    _Loader: Any = yaml.CSafeLoader
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyPI wheels ship libyaml
    _Loader, _Dumper = yaml.SafeLoader, yaml.SafeDumper

#: Wide enough that no value is folded over lines: a TF_CONFIG stays one line, as ``kubectl get -o yaml``
#: users read it.
_WIDTH = 1 << 20

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


def dump_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """``objects`` as multi-document YAML (keys in the builders' order, one line per value)."""
    text: str = yaml.dump_all([dict(o) for o in objects], Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                              default_flow_style=False, width=_WIDTH, explicit_start=False)
    return text


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


def render_yaml(plan: JobPlan, template: str | Path | None = None) -> str:
    """The plan's objects as multi-document YAML text: :func:`dump_yaml` of :meth:`JobPlan.objects
    <tfk8s_airflow.job.builders.plan.JobPlan.objects>`, or ``template`` rendered with the plan (its
    output parsed back; TemplateError naming the template when it fails or writes no YAML)."""
    if template is None:
        return dump_yaml(plan.objects())
    path = Path(template)
    if not path.is_file():
        raise TemplateError(f"template {path} does not exist (fix: pass an existing --template file)")
    context = {"plan": plan, "objects": plan.objects(), "spec": plan.spec, "names": plan.names}
    try:
        text = _environment(path.parent).get_template(path.name).render(context)
    except jinja2.TemplateError as exc:
        lineno = getattr(exc, "lineno", None)
        where = f"{path}:{lineno}" if lineno else str(path)
        raise TemplateError(f"template {where} failed to render: {exc}") from exc
    parse_yaml(text, source=str(path))
    return text


def parse_yaml(text: str, source: str = "<rendered>") -> list[dict[str, Any]]:
    """The documents of rendered YAML text (empty ones dropped); TemplateError when it is not YAML."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as exc:
        raise TemplateError(f"template {source} rendered invalid YAML: {exc}") from exc
