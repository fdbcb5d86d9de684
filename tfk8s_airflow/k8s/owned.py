"""Creating a job's Service, ConfigMaps, NetworkPolicy, Workload and PodGroup, never adopting one setup did not make.

See :mod:`tfk8s_airflow.job.builders.ownership` for the mark and the rule. :func:`check_absent_or_own` runs
before setup creates anything, so a refusal leaves the namespace as it was (and nothing of the
other object is deleted by setup's clean-up); :func:`create_own` creates one object, or takes the
one of that name only when it is setup's own of the same run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client import CustomObjectsApi, NetworkingV1Api
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.exceptions import KubernetesApiError, PermanentKubernetesApiError
from tfk8s_airflow.job import podgroup
from tfk8s_airflow.job.builders.ownership import foreign, marked
from tfk8s_airflow.k8s.client import JobClient, wrap_api_error

__all__ = ["check_absent_or_own", "create_own"]

_GANG_PLURALS = {"Workload": podgroup.WORKLOADS, "PodGroup": podgroup.POD_GROUPS}


def _api(client: JobClient, kind: str) -> tuple[Any, Any]:
    """(create, read) of ``kind``."""
    if kind in _GANG_PLURALS:  # Kubernetes' Workload API (admission: workload)
        custom, plural = CustomObjectsApi(client.core.api_client), _GANG_PLURALS[kind]
        return (lambda namespace, body: custom.create_namespaced_custom_object(
                    podgroup.GROUP, podgroup.VERSION, namespace, plural, body),
                lambda name, namespace: custom.get_namespaced_custom_object(
                    podgroup.GROUP, podgroup.VERSION, namespace, plural, name))
    if kind == "NetworkPolicy":
        net = NetworkingV1Api(client.core.api_client)
        return net.create_namespaced_network_policy, net.read_namespaced_network_policy
    return {"Service": (client.core.create_namespaced_service, client.core.read_namespaced_service),
            "ConfigMap": (client.core.create_namespaced_config_map, client.core.read_namespaced_config_map)}[kind]


def _read(client: JobClient, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    kind, ns, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
    try:
        found = _api(client, kind)[1](name=name, namespace=ns)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise wrap_api_error(f"reading {kind} {ns}/{name}", exc) from exc
    out: dict[str, Any] = client.core.api_client.sanitize_for_serialization(found)
    return out


def _refuse(obj: Mapping[str, Any], why: str) -> PermanentKubernetesApiError:
    kind, ns, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
    return PermanentKubernetesApiError(
        f"creating {kind} {ns}/{name}", 409,
        f"a {kind} of that name exists and {why}: setup never adopts an object it did not create; nothing of "
        f"the job was created (fix: delete {kind.lower()}/{name} in namespace {ns} if it is a leftover, or find "
        "who creates it)")


def check_absent_or_own(client: JobClient, objs: Iterable[Mapping[str, Any]]) -> None:
    """Refuse (PermanentKubernetesApiError naming it) the first object of ``objs`` whose name is taken by one
    setup did not create (no mark, other labels or annotations). ``objs`` as setup will create them, unmarked and
    not yet owned: their content is compared by :func:`create_own`."""
    for obj in objs:
        got = _read(client, obj)
        if got is None:
            continue
        why = foreign(marked(obj), got, content=False)
        if why:
            raise _refuse(obj, why)


def create_own(client: JobClient, obj: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Create ``obj`` with setup's mark: (True, the created object); (False, the existing one) when setup's
    own earlier try made exactly it; PermanentKubernetesApiError naming any other."""
    want = marked(obj)
    kind, ns, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
    try:
        created = _api(client, kind)[0](namespace=ns, body=want)
        out: dict[str, Any] = client.core.api_client.sanitize_for_serialization(created)
        return True, out
    except ApiException as exc:
        if exc.status != 409:
            raise wrap_api_error(f"creating {kind} {ns}/{name}", exc) from exc
    got = _read(client, obj)
    if got is None:
        raise KubernetesApiError(f"creating {kind} {ns}/{name}", 409, "it was deleted meanwhile; retry")
    why = foreign(want, got)
    if why:
        raise _refuse(obj, why)
    if (got.get("metadata") or {}).get("deletionTimestamp"):
        raise KubernetesApiError(f"creating {kind} {ns}/{name}", 409,
                                 "one of that name is being deleted (an earlier run's teardown); retry")
    return False, got
