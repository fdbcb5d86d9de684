"""Validation cannot crash: arbitrary spec documents either parse or raise SpecError.

Documents are nested mappings and lists of random scalars (unicode text, huge integers,
NaN and infinities, digit-like strings such as "²" or "--2"), shaped like a spec often
enough to reach every reader: top-level keys, role blocks and nested items are drawn from
the spec's own vocabulary as well as at random. Each example is bounded in time
(Hypothesis' deadline) and in memory (tracemalloc's peak), generously: a normal spec
parses in about a millisecond and a few hundred KiB.
"""
from __future__ import annotations

import copy as _copy
import datetime as _dt
import math
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.security.fuzz_shapes import GOOD_TEMPLATE, GOOD_TFJOB, HOSTILE, mutations
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import ROLE_KEYS, SPEC_KEYS, parse_spec
from tfk8s_airflow.job.spec.tfjob import to_native

EXAMPLES = 1500
PEAK_BYTES = 64 * 2**20
WORDS = sorted({*SPEC_KEYS, *ROLE_KEYS, "name", "key", "value", "value_from", "secret_key_ref", "config_map_key_ref",
                "field_ref", "field_path", "optional", "secret_ref", "config_map_ref", "prefix", "mount_path",
                "host_path", "pvc", "secret", "config_map", "empty_dir", "read_only", "sub_path", "requests",
                "limits", "cpu", "memory", "nvidia.com/gpu", "operator", "effect", "toleration_seconds", "uri",
                "entrypoint", "sha256", "medium", "size_limit", "items", "path"})
NASTY_TEXT = ["", "²", "--2", "-", "0x10", "1e30000000", "1e-30000000", "9" * 40, "٣", "+1", ".5", "5.", "1Ei",
              "8Ei", "-1", "nan", "inf", ".inf", "NaN", "Exists", "Equal", "NoExecute", "/", "/..", "../x",
              "/mnt/tfk8s-gluster", "a/b c", "tfk8s-code", "tfk8s-shards", "/etc/tfk8s/shards", "/opt/tfk8s/code",
              "http://h/x", "https://u:p@h/x", "-c", "run.py", "\x00", "\x85", "\u2028", "\ud800"[:0],
              "default", "tf_config", "Never", "OnFailure", "ExitCode", "all_workers", "5m", "99999999999999d"]

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, 2**63 - 1, -(2**63) - 1, 2**31, 10**4000, -(10**4000)]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.inf, -math.inf, math.nan, 1e308, 5e-324]),
    st.text(max_size=20), st.sampled_from(NASTY_TEXT), st.sampled_from(WORDS),
)
keys = st.one_of(st.sampled_from(WORDS), st.text(max_size=12), st.sampled_from(NASTY_TEXT[:30]))
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=6)),
    max_leaves=40,
)
role_blocks = st.one_of(documents, st.dictionaries(st.sampled_from(ROLE_KEYS), documents, max_size=6))
specs = st.one_of(
    documents,
    st.fixed_dictionaries(
        {"name": st.one_of(st.just("job"), scalars), "image": st.one_of(st.just("tfk8s/trainer:0.1"), scalars),
         "worker": role_blocks},
        optional={k: documents for k in SPEC_KEYS if k not in ("name", "image", "worker")}
        | {r: role_blocks for r in ("chief", "ps", "evaluator")},
    ),
)


def deep(n: int):
    doc: object = "x"
    for _ in range(n):
        doc = {"env": doc} if n % 2 else [doc]
    return doc


@settings(max_examples=EXAMPLES, deadline=timedelta(seconds=2), database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=st.one_of(specs, st.builds(lambda n, d: {"name": "j", "worker": 1, "image": "i:1", "args": deep(n),
                                                   "env": d}, st.integers(1, 3000), documents)))
@example(doc={"name": "job", "image": "tfk8s/trainer:0.1", "worker": {}, "command": []})  # found once: () -> None
@example(doc={"name": "job", "image": "tfk8s/trainer:0.1", "worker": 1, "service_account": ""})  # "" -> None
def test_any_document_parses_or_raises_spec_error(doc):
    tracemalloc.start()
    try:
        try:
            spec = parse_spec(doc)
        except SpecError as exc:
            assert exc.problems and all(p.field and p.fix for p in exc.problems), exc
            assert len(str(exc)) < 200_000
        else:
            assert parse_spec(spec.to_dict()) == spec
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"peak {peak} bytes"


# ----------------------------------------------------------------------------- pod templates and TFJob manifests
# The second round: wrong-typed items inside ``pod_template`` and TFJob templates crashed validation or
# the render (AttributeError, TypeError; 35 sites, a stored example of each in fuzz_corpus/, found by the
# single-point mutations below against the code before the fix). Each document must now be refused with
# a SpecError naming the field, or validate, build and render (the Jinja template and the builders agree).
# Budget: every third single-point mutation of three good documents (about 3,500, deterministic) and 300
# drawn documents (derandomized), some 15 s on one core.

CORPUS = Path(__file__).parent / "fuzz_corpus"
MUTATION_STRIDE = 3
DRAWN = 300
OPEN_POLICY = DeploymentPolicy(allowed_secrets=("*",), allowed_volume_types=("*",), allow_service_account_token=True)
BASES = (("spec", {"name": "j", "image": "img:1", "ps": 1, "worker": 2, "pod_template": GOOD_TEMPLATE}),
         ("spec", {"name": "j", "image": "img:1", "ps": 1, "worker": {"replicas": 2, "pod_template": GOOD_TEMPLATE}}),
         ("tfjob", GOOD_TFJOB))


def refused_or_rendered(doc, policy=OPEN_POLICY) -> str:
    """'refused' (a SpecError naming fields, with fixes) or 'rendered'; anything else raises (a traceback)."""
    try:
        native = to_native(doc).spec if isinstance(doc, dict) and doc.get("kind") == "TFJob" else doc
        spec = parse_spec(native, policy=policy)
    except SpecError as exc:
        assert exc.problems and all(p.field and p.message for p in exc.problems), exc
        return "refused"
    plan = plan_job(spec, JobNames.for_run(spec, "fuzz", "train", "dag"), policy, dag_id="dag", run_id="fuzz",
                    task_id="train.replica")
    assert parse_yaml(render_yaml(plan)) == plan.objects()
    return "rendered"


def test_every_stored_crash_is_now_refused_or_rendered():
    files = sorted(CORPUS.glob("*.yaml"))
    assert len(files) >= 35, files  # one example of each crash site found
    outcomes = {f.name: refused_or_rendered(yaml.safe_load(f.read_text())) for f in files}
    assert set(outcomes.values()) <= {"refused", "rendered"}
    assert outcomes["spec-env-value-null.yaml"] == "rendered"  # valid Kubernetes: an env var without a value


def test_a_yaml_date_as_a_sidecar_image_is_refused_naming_the_field():
    tpl = _copy.deepcopy(GOOD_TEMPLATE)
    tpl["spec"]["containers"][1]["image"] = _dt.date(2024, 1, 2)
    with pytest.raises(SpecError) as err:
        parse_spec({"name": "j", "image": "img:1", "worker": 1, "pod_template": tpl}, policy=OPEN_POLICY)
    assert [p.field for p in err.value.problems] == ["pod_template.spec.containers[1].image"], err.value
    assert "quote it" in str(err.value)


def test_volumes_of_a_scalar_are_refused_naming_the_item():
    with pytest.raises(SpecError) as err:
        parse_spec({"name": "j", "image": "img:1", "worker": 1, "pod_template": {"spec": {"volumes": ["x"]}}})
    assert "pod_template.spec.volumes[0]" in [p.field for p in err.value.problems]


def test_every_single_point_mutation_of_a_template_is_refused_or_rendered():
    seen = {"refused": 0, "rendered": 0}
    for _kind, base in BASES:
        for i, doc in enumerate(mutations(base, ("pod_template", "worker", "spec"))):
            if i % MUTATION_STRIDE == 0:
                seen[refused_or_rendered(doc)] += 1
    assert seen["refused"] > 1000 and seen["rendered"] > 400, seen  # both outcomes reached, not one path only


hostile_leaf = st.sampled_from(HOSTILE)


def _maybe(good):
    return st.one_of(good, good, good, hostile_leaf)


_container = st.fixed_dictionaries({"name": _maybe(st.sampled_from(["tensorflow", "side", "x"]))}, optional={
    "image": _maybe(st.just("busybox:1")), "args": _maybe(st.lists(_maybe(st.just("a")), max_size=2)),
    "env": _maybe(st.lists(_maybe(st.fixed_dictionaries({"name": _maybe(st.just("A"))}, optional={
        "value": _maybe(st.just("v")), "valueFrom": _maybe(st.fixed_dictionaries({"secretKeyRef": _maybe(
            st.fixed_dictionaries({"name": _maybe(st.just("s")), "key": _maybe(st.just("k"))}))}))})), max_size=2)),
    "securityContext": _maybe(st.fixed_dictionaries({}, optional={
        "capabilities": _maybe(st.fixed_dictionaries({}, optional={"drop": _maybe(st.just(["ALL"])),
                                                                   "add": _maybe(st.just(["NET_ADMIN"]))})),
        "privileged": _maybe(st.booleans()), "seLinuxOptions": _maybe(st.just({"type": "container_t"}))})),
    "volumeMounts": _maybe(st.lists(_maybe(st.fixed_dictionaries({"name": _maybe(st.just("v")),
                                                                 "mountPath": _maybe(st.just("/m"))})), max_size=2))})
_volume = st.fixed_dictionaries({"name": _maybe(st.just("v"))}, optional={
    "emptyDir": _maybe(st.just({})), "secret": _maybe(st.fixed_dictionaries({"secretName": _maybe(st.just("s"))})),
    "csi": _maybe(st.fixed_dictionaries({"driver": _maybe(st.just("d")), "nodePublishSecretRef": _maybe(
        st.fixed_dictionaries({"name": _maybe(st.just("s"))}))})),
    "projected": _maybe(st.fixed_dictionaries({"sources": _maybe(st.lists(_maybe(st.fixed_dictionaries(
        {"secret": _maybe(st.fixed_dictionaries({"name": _maybe(st.just("s"))}))})), max_size=2))}))})
_template = st.fixed_dictionaries({}, optional={
    "metadata": _maybe(st.fixed_dictionaries({}, optional={
        "annotations": _maybe(st.dictionaries(st.sampled_from(["a.io/x", "container.apparmor.security.beta."
                                                                         "kubernetes.io/side"]),
                                              _maybe(st.just("runtime/default")), max_size=2))})),
    "spec": _maybe(st.fixed_dictionaries({}, optional={
        "containers": _maybe(st.lists(_maybe(_container), max_size=2)),
        "initContainers": _maybe(st.lists(_maybe(_container), max_size=1)),
        "volumes": _maybe(st.lists(_maybe(_volume), max_size=2)),
        "securityContext": _maybe(st.fixed_dictionaries({}, optional={"runAsUser": _maybe(st.just(1000))})),
        "imagePullSecrets": _maybe(st.lists(_maybe(st.fixed_dictionaries({"name": _maybe(st.just("p"))})),
                                            max_size=1)),
        "affinity": _maybe(st.just({}))}))})


@settings(max_examples=DRAWN, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(tpl=_template, where=st.sampled_from(["job", "role", "tfjob"]))
def test_drawn_templates_are_refused_or_rendered(tpl, where):
    if where == "tfjob":
        tfjob = _copy.deepcopy(GOOD_TFJOB)
        spec = tpl.get("spec") if isinstance(tpl.get("spec"), dict) else {}
        main = _copy.deepcopy(GOOD_TFJOB["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0])
        tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"] = {**tpl, "spec": {
            **spec, "containers": [main, *(spec.get("containers") or [] if isinstance(spec.get("containers"), list)
                                           else [])]}}
        refused_or_rendered(tfjob)
    elif where == "job":
        refused_or_rendered({"name": "j", "image": "img:1", "ps": 1, "worker": 2, "pod_template": tpl})
    else:
        refused_or_rendered({"name": "j", "image": "img:1", "worker": {"replicas": 1, "pod_template": tpl}})
    refused_or_rendered({"name": "j", "image": "img:1", "worker": 1, "pod_template": tpl},
                        policy=DeploymentPolicy())  # the default policy: refuses more, crashes never
