"""Validate + render jobs of 8, 64 and 512 replicas (target: < 0.3 s at 512).

Prints, side by side in one run: spec validation, the Python builders, the
Jinja2 template, and the ratio of the template to the builders. Best of N runs,
since the machine is shared. Run: .venv/bin/python benchmarks/render.py
"""

from __future__ import annotations

import time

from tfk8s_airflow.job.builders.manifests import job_manifests
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.render import render_yaml
from tfk8s_airflow.job.spec import parse_spec

TARGET_S = 0.3


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print(f"{'replicas':>8} {'validate ms':>12} {'builders ms':>12} {'template ms':>12} {'valid+tmpl ms':>14} "
          f"{'tmpl/build':>10} {'MB yaml':>8}  target<{TARGET_S}s")
    for total in (8, 64, 512):
        ps = max(1, total // 16)
        raw = {"name": "bench", "image": "tfk8s/trainer:0.1", "ps": {"replicas": ps},
               "worker": {"replicas": total - ps, "resources": {"cpu": "2", "memory": "4Gi"}},
               "volumes": [{"name": "data", "mount_path": "/data", "host_path": "/mnt/tfk8s-gluster"}]}
        spec = parse_spec(raw)
        names = JobNames.for_run(spec, "scheduled__2026-11-29T00:00:00+00:00", dag_id="bench")
        t_valid = best(lambda: parse_spec(raw))
        t_build = best(lambda: job_manifests(spec, names))
        t_tmpl = best(lambda: render_yaml(spec, names))
        size = len(render_yaml(spec, names)) / 1e6
        both = t_valid + t_tmpl
        verdict = "ok" if total != 512 or both < TARGET_S else "SLOW"
        print(f"{total:>8} {t_valid*1e3:>12.2f} {t_build*1e3:>12.2f} {t_tmpl*1e3:>12.2f} {both*1e3:>14.2f} "
              f"{t_tmpl / t_build:>10.2f} {size:>8.2f}  {verdict}")


if __name__ == "__main__":
    main()
