"""Parse time of each DAG file in dags/ (target: well under a second).

Each sample is a fresh interpreter that imports ``airflow`` and then the DAG file as a module
(what the DAG processor does: it imports the file in a process where Airflow is loaded), and
times both steps with ``perf_counter``. A baseline interpreter imports only ``airflow``.
Reported per file, over ``--repeat`` samples: the median (and min/max) of

* ``parse``: importing the DAG file once Airflow is imported, i.e. the file's own cost
  (its imports of tfk8s_airflow, the providers' KubernetesPodOperator, DAG construction);
  this is the number the DAG processor sees and the one the target is about;
* ``cold``: ``import airflow`` + the file, in a new interpreter;
* ``ratio``: ``cold`` / ``import airflow`` alone (1.0 = the file costs nothing on top);
* ``processor``: the parse once the ``airflow.*`` modules the file imports are loaded, as the
  DAG processor loads them in its parent before forking each parse
  (``[dag_processor] parsing_pre_import_modules``, on by default).

A reference file that only imports the cncf.kubernetes provider's ``KubernetesPodOperator``
(which ``TFReplicaPodOperator`` subclasses, so every DAG with a ``tf_job`` pays for it) is
measured the same way: the difference is what tfk8s_airflow and the DAG's own code cost.

Then the same files are checked with Airflow's own DagBag timing (``DagBag.dagbag_stats``,
what ``airflow dags report`` prints) in this process.

    .venv/bin/python benchmarks/dag_parse.py [--repeat 15] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DAGS = REPO / "dags"
TARGET_S = 1.0

REFERENCE = "from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator  # noqa\n"
REFERENCE_NAME = "(ref) KubernetesPodOperator"

CHILD = r"""
import importlib.util, json, sys, time
t0 = time.perf_counter()
import airflow  # noqa: F401
t1 = time.perf_counter()
path = sys.argv[1]
preimport = len(sys.argv) > 2
if path != "-" and preimport:
    # What the DAG processor does in its parent before it forks the parse of a file
    # ([dag_processor] parsing_pre_import_modules, on by default).
    import importlib
    from airflow.utils.file import iter_airflow_imports
    for module in iter_airflow_imports(path):
        importlib.import_module(module)
t1 = time.perf_counter()
if path != "-":
    spec = importlib.util.spec_from_file_location("dagfile", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["dagfile"] = mod
    spec.loader.exec_module(mod)
t2 = time.perf_counter()
print(json.dumps({"airflow": t1 - t0, "parse": t2 - t1, "cold": t2 - t0}))
"""


def child_env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "PYTHONDONTWRITEBYTECODE": "0"})
    return env


def sample(path: str, env: dict[str, str], preimport: bool = False) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, path, *(["preimport"] if preimport else [])], env=env,
                         capture_output=True, text=True, timeout=120, cwd=str(REPO))
    if out.returncode != 0:
        raise SystemExit(f"{path}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def dagbag_stats() -> list[dict[str, object]]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS), safe_mode=False, bundle_path=DAGS, bundle_name="dags-folder")
    if bag.import_errors:
        raise SystemExit(f"import errors: {bag.import_errors}")
    return [{"file": Path(s.file).name, "duration_s": s.duration.total_seconds() if hasattr(s.duration, "total_seconds")
             else float(s.duration), "dags": s.dag_num, "tasks": s.task_num} for s in bag.dagbag_stats]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dag-parse-bench-") as home:
        ref = Path(home) / "reference_kpo.py"
        ref.write_text(REFERENCE)
        files = sorted(DAGS.glob("*.py")) + [ref]
        env = child_env(home)
        sample("-", env)  # warm the page cache and __pycache__ once, unmeasured
        for f in files:
            sample(str(f), env)
        def label(f: Path) -> str:
            return REFERENCE_NAME if f == ref else f.name

        base, per_file = [], {label(f): [] for f in files}
        forked: dict[str, list[float]] = {label(f): [] for f in files}
        for _ in range(args.repeat):  # interleaved, so machine noise hits every column alike
            base.append(sample("-", env)["airflow"])
            for f in files:
                per_file[label(f)].append(sample(str(f), env))
                forked[label(f)].append(sample(str(f), env, preimport=True)["parse"])
        os.environ.update(env)
        stats = dagbag_stats()
    airflow_alone = statistics.median(base)
    results = {"repeat": args.repeat, "import_airflow_s": summary(base), "files": {}}
    print(f"import airflow alone: median {airflow_alone * 1000:.0f} ms "
          f"(min {min(base) * 1000:.0f}, max {max(base) * 1000:.0f}); {args.repeat} fresh interpreters per column")
    print(f"{'file':<28} {'parse ms':>9} {'min':>6} {'max':>6} {'cold ms':>8} {'ratio':>6} {'processor ms':>13}"
          f"  target: parse < {TARGET_S:.0f} s")
    ok = True
    for name, samples in per_file.items():
        parse = summary([s["parse"] for s in samples])
        cold = summary([s["cold"] for s in samples])
        ratio = cold["median"] / airflow_alone
        if name != REFERENCE_NAME:
            ok &= parse["median"] < TARGET_S
        proc = summary(forked[name])
        results["files"][name] = {"parse_s": parse, "cold_s": cold, "ratio_vs_import_airflow": ratio,
                                  "processor_parse_s": proc}
        print(f"{name:<28} {parse['median'] * 1000:>9.0f} {parse['min'] * 1000:>6.0f} {parse['max'] * 1000:>6.0f} "
              f"{cold['median'] * 1000:>8.0f} {ratio:>6.2f} {proc['median'] * 1000:>13.0f}")
    print("processor ms: the parse after the DAG processor's pre-import of the file's airflow.* imports "
          "(parsing_pre_import_modules), i.e. what each forked parse costs")
    print("Airflow's DagBag timing (one process, airflow already imported; the first file also "
          "pays the shared imports):")
    for s in stats:
        print(f"  {s['file']:<22} {s['duration_s'] * 1000:>7.0f} ms  dags={s['dags']} tasks={s['tasks']}")
    results["dagbag_stats"] = stats
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    ref = results["files"][REFERENCE_NAME]["parse_s"]["median"]
    worst = max(v["parse_s"]["median"] for k, v in results["files"].items() if k != REFERENCE_NAME)
    print(f"{'OK' if ok else 'SLOW'}: slowest DAG file {worst * 1000:.0f} ms (target < {TARGET_S:.0f} s); "
          f"{ref * 1000:.0f} ms of it ({ref / worst:.0%}) is importing the provider's KubernetesPodOperator, "
          f"{(worst - ref) * 1000:.0f} ms is tfk8s_airflow and the DAGs themselves")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
