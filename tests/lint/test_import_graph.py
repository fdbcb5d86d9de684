"""What the import graph must be, computed from it: the pod side imports the standard library,
the shared ground floor and itself only (TensorFlow and numpy for training)."""
from __future__ import annotations

import sys

import grimp
import pytest

#: The ground floor the pod side shares with the Airflow side.
GROUND_FLOOR = {"tfk8s_airflow", "tfk8s_airflow.contract", "tfk8s_airflow.exceptions", "tfk8s_airflow.pathrules",
                "tfk8s_airflow.untrusted", "tfk8s_airflow.nofollow", "tfk8s_airflow.hdfschecksum",
                "tfk8s_airflow.redaction", "tfk8s_airflow.threads"}
#: What training needs beyond the standard library, and who may import it.
TRAINING = {"tensorflow", "numpy"}
TRAINING_IMPORTERS = ("tfk8s_airflow.pod.trainer", "tfk8s_airflow.pod.runtime")


def test_the_pod_side_imports_the_standard_library_the_ground_floor_and_itself_only():
    graph = grimp.build_graph("tfk8s_airflow", include_external_packages=True)
    pod = {m for m in graph.modules if m == "tfk8s_airflow.pod" or m.startswith("tfk8s_airflow.pod.")}
    assert "tfk8s_airflow.pod.codefetch" in pod and "tfk8s_airflow.pod.trainer.evaluate" in pod
    wrong = []
    for module in sorted(pod):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            top = imported.split(".")[0]
            if imported in pod or imported in GROUND_FLOOR or top in sys.stdlib_module_names:
                continue
            if top in TRAINING and module.startswith(TRAINING_IMPORTERS):
                continue
            wrong.append(f"{module} -> {imported}")
    assert wrong == [], wrong


def _cycles(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def _package_graph() -> tuple[list[str], dict[str, set[str]]]:
    graph = grimp.build_graph("tfk8s_airflow")
    modules = sorted(graph.modules)
    return modules, {m: set(graph.find_modules_directly_imported_by(m)) for m in modules}


def _squashed(modules: list[str], edges: dict[str, set[str]], parent: str) -> tuple[list[str], dict[str, set[str]]]:
    """The graph of ``parent``'s direct children, each subpackage squashed into one node."""
    depth = parent.count(".") + 2

    def child(m: str) -> str | None:
        return ".".join(m.split(".")[:depth]) if m.startswith(parent + ".") else None

    nodes = sorted({c for m in modules if (c := child(m))})
    squashed: dict[str, set[str]] = {}
    for m, imported in edges.items():
        if (u := child(m)) is None:
            continue
        for t in imported:
            if (v := child(t)) is not None and v != u:
                squashed.setdefault(u, set()).add(v)
    return nodes, squashed


def test_there_is_no_import_cycle_between_any_two_modules_of_the_package():
    modules, edges = _package_graph()
    assert len(modules) > 120
    assert _cycles(modules, edges) == []


@pytest.mark.parametrize("parent", ["tfk8s_airflow", "tfk8s_airflow.job", "tfk8s_airflow.job.spec",
                                    "tfk8s_airflow.job.builders", "tfk8s_airflow.job.run"])
def test_no_subpackage_imports_back_up(parent):
    """Squash each subpackage into one node: what remains is acyclic, so every import points one way."""
    nodes, squashed = _squashed(*_package_graph(), parent)
    assert len(nodes) >= 3
    assert _cycles(nodes, squashed) == []


def test_the_cycle_finder_finds_the_cycles_it_must():
    """The check above would see the two circles the job model had (spec <-> parser, objects <-> TensorBoard)."""
    edges = {"job.spec": {"job.parse"}, "job.parse": {"job.spec", "job.fields"},
             "build.objects": {"build.tensorboard"}, "build.tensorboard": {"build.objects", "job.spec"}}
    assert sorted(_cycles(sorted({*edges, "job.fields"}), edges)) == [["build.objects", "build.tensorboard"],
                                                                        ["job.parse", "job.spec"]]
    nodes, squashed = _squashed(["p.a.x", "p.a.y", "p.b.z"], {"p.a.x": {"p.b.z"}, "p.b.z": {"p.a.y"}}, "p")
    assert nodes == ["p.a", "p.b"] and _cycles(nodes, squashed) == [["p.a", "p.b"]]
