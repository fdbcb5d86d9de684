"""The URL of a job's TensorBoard: the deployment's template (``[tfk8s] tensorboard_url``) and its filling.

Why a template of the deployment's and not a URL of the spec's: where a browser reaches a pod is
the deployment's network (an ingress per job, pod IPs routed to the office, a proxy), the same
for every job, and a link in the UI must point where the deployment says, never where a form
value says. The template names the job's facts as placeholders (:data:`URL_PLACEHOLDERS`):

* ``{job}``, ``{namespace}``, ``{service}``, ``{pod}`` (the TensorBoard pod), ``{port}``, ``{host}``
  (``tensorboard.<service>.<namespace>.svc``, the pod's DNS name inside the cluster): known when
  setup plans the job, filled in there;
* ``{pod_ip}``: known once the pod runs, filled in by the job's watch from its LIST.

For example ``http://{pod_ip}:{port}/`` where browsers reach pod IPs (the devstack),
``https://tensorboard.example.com/{namespace}/{job}/`` behind an ingress that routes by path
and strips it. Literal braces are written ``{{`` and ``}}``, as in Python's ``str.format``.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from tfk8s_airflow.contract import TENSORBOARD_HOSTNAME
from tfk8s_airflow.job import naming

__all__ = ["URL_PLACEHOLDERS", "RUNTIME_PLACEHOLDERS", "placeholders", "url_template_problem", "fill_url",
           "static_url", "http_url"]

#: Placeholders of the ``[tfk8s] tensorboard_url`` template.
URL_PLACEHOLDERS = ("job", "namespace", "service", "pod", "port", "host", "pod_ip")
#: The placeholders only the running pod can fill (the watch does, from its LIST).
RUNTIME_PLACEHOLDERS = ("pod_ip",)
_SAMPLE = {"job": "job", "namespace": "ns", "service": "job", "pod": "job-tensorboard", "port": "6006",
           "host": "tensorboard.job.ns.svc", "pod_ip": "10.0.0.1"}


def _fields(template: str) -> list[tuple[str, str | None, str | None, str | None]]:
    return list(string.Formatter().parse(template))


def placeholders(template: str) -> set[str]:
    """The placeholders a (valid) template still has."""
    return {name for _text, name, _spec, _conv in _fields(template) if name}


def url_template_problem(template: str) -> str | None:
    """Why ``template`` is no usable ``[tfk8s] tensorboard_url``; None when it is."""
    try:
        fields = _fields(template)
    except ValueError as exc:
        return f"is not a URL template with {{placeholders}} ({exc}); write literal braces as {{{{ and }}}}"
    for _text, name, spec, conversion in fields:
        if name is None:
            continue
        if name not in URL_PLACEHOLDERS or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return (f"has the placeholder {shown}; the known ones are "
                    + ", ".join("{" + p + "}" for p in URL_PLACEHOLDERS) + ", without a format spec or conversion")
    if http_url(fill_url(template, _SAMPLE)) is None:
        return "must be an absolute http(s) URL, for example http://{pod_ip}:{port}/"
    return None


def fill_url(template: str, values: Mapping[str, str]) -> str:
    """``template`` with the placeholders of ``values`` filled in.

    While placeholders remain the result is still a template (literal braces stay escaped);
    once none remains it is the URL itself.
    """
    out = []
    left = False
    for text, name, _spec, _conv in _fields(template):
        out.append(text.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        if name in values:
            out.append(str(values[name]).replace("{", "{{").replace("}", "}}"))
        else:
            out.append("{" + name + "}")
            left = True
    filled = "".join(out)
    return filled if left else filled.replace("{{", "{").replace("}}", "}")


def static_url(template: str | None, job: str, namespace: str, service: str, port: int) -> str | None:
    """The template with everything setup knows filled in (only ``{pod_ip}`` may remain); None
    without a template."""
    if not template:
        return None
    return fill_url(template, {"job": job, "namespace": namespace, "service": service,
                               "pod": naming.tensorboard_pod_name(job), "port": str(port),
                               "host": f"{TENSORBOARD_HOSTNAME}.{service}.{namespace}.svc"})


def http_url(url: Any) -> str | None:
    """The URL when it is an absolute http(s) URL (a link the UI and the extra link may show), else None."""
    if not isinstance(url, str) or not url:
        return None
    parts = urlsplit(url)
    return url if parts.scheme in ("http", "https") and parts.netloc else None
