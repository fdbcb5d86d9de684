"""Validate, plan and render jobs of 8, 64 and 512 replicas (target: < 0.3 s at 512 to validate and plan).

Prints, side by side in one run: spec validation, the plan (every object setup creates, the
templates ConfigMap's xz compression of every pod included), the YAML ``tfk8s render`` prints
from it, and the size of that YAML. Best of N runs, since the machine is shared.
Run: .venv/bin/python benchmarks/render.py
"""

from __future__ import annotations

import time

from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import render_yaml
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec

TARGET_S = 0.3
RUN = "scheduled__2026-11-29T00:00:00+00:00"


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print(f"{'replicas':>8} {'validate ms':>12} {'plan ms':>12} {'yaml ms':>12} {'valid+plan ms':>14} "
          f"{'MB yaml':>8}  target<{TARGET_S}s")
    policy = DeploymentPolicy()
    for total in (8, 64, 512):
        ps = max(1, total // 16)
        raw = {"name": "bench", "image": "tfk8s/trainer:0.1", "ps": {"replicas": ps},
               "worker": {"replicas": total - ps, "resources": {"cpu": "2", "memory": "4Gi"}},
               "volumes": [{"name": "data", "mount_path": "/data", "host_path": "/mnt/tfk8s-gluster"}]}
        spec = parse_spec(raw)
        names = JobNames.for_run(spec, RUN, dag_id="bench")

        def plan():
            return plan_job(spec, names, policy, dag_id="bench", run_id=RUN)

        planned = plan()
        t_valid = best(lambda: parse_spec(raw))
        t_plan = best(plan)
        t_yaml = best(lambda: render_yaml(planned))
        size = len(render_yaml(planned)) / 1e6
        both = t_valid + t_plan
        verdict = "ok" if total != 512 or both < TARGET_S else "SLOW"
        print(f"{total:>8} {t_valid*1e3:>12.2f} {t_plan*1e3:>12.2f} {t_yaml*1e3:>12.2f} {both*1e3:>14.2f} "
              f"{size:>8.2f}  {verdict}")


if __name__ == "__main__":
    main()
