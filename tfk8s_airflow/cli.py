"""The ``tfk8s`` command: validate, render and inspect job specs without Airflow.

Why: ``tfk8s render spec.yaml | kubectl apply -f -`` is the seed's Jinja2 +
kubectl workflow done right (validated, DNS-safe names, TF_CONFIG), and
``tfk8s validate`` lets CI check spec files before a DAG ever runs them. Every command
takes a Kubeflow TFJob manifest too (its notes go to stderr); ``tfk8s import`` prints the
native spec it stands for. ``import`` translates, it does not judge: it prints the native spec
even where this deployment's policy would refuse it, then lists (on stderr) what the policy
would refuse and the setting that would admit it.
Exit codes: 0 ok, 1 invalid input (every problem printed), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from tfk8s_airflow.exceptions import Problem, SpecError, TemplateError
from tfk8s_airflow.job.defaults import MAX_REPLICAS, MAX_REPLICAS_ENV, max_replicas
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.policy.settings import lookup
from tfk8s_airflow.job.spec import ROLES, TFJobSpec, parse_spec
from tfk8s_airflow.job.spec.document import load_spec_file
from tfk8s_airflow.job.spec.tfjob import API_VERSION, is_tfjob, to_native


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="job spec file (YAML or JSON)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, e.g. --set worker.replicas=4 (repeatable)")
    p.add_argument("--max-replicas", type=int, default=max_replicas(),
                   help=f"largest total replica count accepted (default: ${MAX_REPLICAS_ENV} or {MAX_REPLICAS})")


def _add_naming_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-id", default="", help="run id the names derive from (default: none)")
    p.add_argument("--dag-id", default="", help="DAG id the names derive from (default: the spec name)")
    p.add_argument("--group", default="", help="task group the names derive from")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfk8s", description="Distributed TensorFlow jobs on Kubernetes.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check a spec; print every problem")
    _add_spec_args(p)
    p = sub.add_parser("render", help="print the Kubernetes objects setup creates for the job, as multi-document YAML")
    _add_spec_args(p)
    _add_naming_args(p)
    p.add_argument("--template", help="a Jinja2 template of your own, rendered with the plan (default: plain YAML)")
    p.add_argument("--shards", help="JSON file of shard assignments {\"worker-0\": [paths]}: adds the ConfigMap")
    p.add_argument("--workload-api", action="store_true",
                   help="render for a cluster that serves Kubernetes' Workload API (admission auto may then choose "
                        "it: the Workload, the PodGroup and each pod's schedulingGroup); admission workload implies "
                        "it")
    p = sub.add_parser("tf-config", help="print one replica's TF_CONFIG")
    _add_spec_args(p)
    _add_naming_args(p)
    p.add_argument("--role", required=True, choices=ROLES)
    p.add_argument("--index", type=int, default=0)
    p = sub.add_parser("import", help="print the native spec of a Kubeflow TFJob manifest")
    _add_spec_args(p)
    return parser


def _policy() -> DeploymentPolicy:
    """The deployment's policy read as its Airflow reads it (``AIRFLOW__TFK8S__*``, airflow.cfg's
    ``[tfk8s]``, then ``TFK8S_*``): what setup would admit, the CLI admits."""
    return DeploymentPolicy.from_settings(lookup(os.environ))


def _load(args: argparse.Namespace, policy: DeploymentPolicy) -> TFJobSpec:
    doc = load_spec_file(args.spec)
    if is_tfjob(doc):
        for note in to_native(doc).notes:
            print(f"{args.spec}: note: {note}", file=sys.stderr)
    return parse_spec(doc, max_replicas=args.max_replicas, overrides=args.overrides, policy=policy)


def _import(args: argparse.Namespace, policy: DeploymentPolicy) -> int:
    """Print the native spec of a TFJob manifest as YAML, proven to parse back to the same spec (so the
    same pods); then, on stderr, what the spec's own rules or the deployment's policy would refuse."""
    import yaml

    doc = load_spec_file(args.spec)
    if not is_tfjob(doc):
        raise SpecError(Problem("spec", f"is not a TFJob manifest (apiVersion {API_VERSION}, kind TFJob)",
                                "give a TFJob manifest; a native spec needs no import"))
    conversion = to_native(doc)
    lines = [f"# The native spec of the TFJob {conversion.spec.get('name')} (tfk8s import {args.spec})."]
    lines += [f"# note: {note}" for note in conversion.notes]
    text = "\n".join(lines) + "\n" + yaml.safe_dump(conversion.spec, sort_keys=False, allow_unicode=True)
    sys.stdout.write(text)
    try:
        spec = parse_spec(doc, max_replicas=args.max_replicas, overrides=args.overrides)
    except SpecError as exc:
        print(f"{args.spec}: the native spec above is not valid: {exc}", file=sys.stderr)
        return 1
    again = parse_spec(yaml.safe_load(text), max_replicas=args.max_replicas, overrides=args.overrides)
    if again != spec:  # pragma: no cover - a bug of the conversion, never of the input
        raise SpecError(Problem("spec", "the printed spec does not parse back to the TFJob's", "report it"))
    refusals = conversion.renamed(policy.problems(spec))
    if refusals:
        print(f"{args.spec}: this deployment's policy would refuse {len(refusals)} setting(s) (validate, render "
              "and setup refuse the job until an administrator changes the setting named):", file=sys.stderr)
        for p in refusals:
            print(f"  - {p}", file=sys.stderr)
    return 0


def _shards(path: str) -> dict[str, list[str]] | None:
    """The --shards file: JSON of {"worker-0": [paths]} (or a staging result), checked like setup checks it."""
    from tfk8s_airflow.job.builders.shardmap import MAX_CONFIGMAP_BYTES, normalize_shards

    where = f"--shards {path}"
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(8 * MAX_CONFIGMAP_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(Problem(where, f"cannot read it: {getattr(exc, 'strerror', None) or exc}",
                                "give a readable UTF-8 JSON file")) from exc
    if len(text) > 8 * MAX_CONFIGMAP_BYTES:
        raise SpecError(Problem(where, "is far larger than a ConfigMap holds", "stage fewer, larger files"))
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SpecError(Problem(where, f"is not valid JSON: {str(exc)[:200]}",
                                'write {"worker-0": ["/data/part-0"], "worker-1": [...]}')) from exc
    return normalize_shards(data, fld="--shards")


def _names(spec: TFJobSpec, args: argparse.Namespace):
    from tfk8s_airflow.job.builders.objects import JobNames
    return JobNames.for_run(spec, args.run_id, args.group, args.dag_id)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        policy = _policy()
        if args.command == "import":
            return _import(args, policy)
        spec = _load(args, policy)
        if args.command == "validate":
            print(f"{args.spec}: ok ({spec.total_replicas} replicas: "
                  + ", ".join(f"{r.role}={r.replicas}" for r in spec.active_roles) + ")")
            return 0
        names = _names(spec, args)
        if args.command == "render":
            from tfk8s_airflow.job.builders.plan import plan_job, replica_task_id
            from tfk8s_airflow.job.builders.render import render_yaml
            shards = _shards(args.shards) if args.shards else None
            # What setup would create for this run (its task labels from the same flags), without owner references.
            # Admission: workload renders its objects; auto, the Workload API's only when told the cluster serves it.
            served = args.workload_api or (spec.admission or policy.admission) == "workload"
            plan = plan_job(spec, names, policy, shards, dag_id=args.dag_id, run_id=args.run_id,
                            task_id=replica_task_id(args.group), workload_api=served)
            sys.stdout.write(render_yaml(plan, args.template))  # a custom template's output is parsed back first
            return 0
        if args.command == "tf-config":
            from tfk8s_airflow.job.builders.wiring import tf_config_json
            n = spec.replicas(args.role)
            if not 0 <= args.index < n:
                raise SpecError(f"--index {args.index} is out of range: the job has {n} {args.role} "
                                f"replica(s) (fix: use 0..{max(n - 1, 0)})", field="--index")
            print(tf_config_json(spec, names.service, args.role, args.index))
            return 0
    except SpecError as exc:
        print(f"{args.spec}: {exc}", file=sys.stderr)
        return 1
    except (TemplateError, OSError, ValueError) as exc:
        print(f"tfk8s {args.command}: {exc}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
