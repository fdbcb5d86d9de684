"""What the import graph must be, computed from it: the pod side imports the standard library,
the shared ground floor and itself only (TensorFlow and numpy for training)."""
from __future__ import annotations

import sys

import grimp

#: The ground floor the pod side shares with the Airflow side.
GROUND_FLOOR = {"tfk8s_airflow", "tfk8s_airflow.contract", "tfk8s_airflow.exceptions", "tfk8s_airflow.pathrules"}
#: What training needs beyond the standard library, and who may import it.
TRAINING = {"tensorflow", "numpy"}
TRAINING_IMPORTERS = ("tfk8s_airflow.pod.trainer", "tfk8s_airflow.pod.runtime")
#: The staging copier's optional C CRC32C accelerator (compiled, importing nothing; pure Python without it).
ACCELERATOR = ("tfk8s_airflow.pod.stagecopy", "tfk8s_airflow.staging")  # grimp names the package


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
            if (module, imported) == ACCELERATOR:
                continue
            wrong.append(f"{module} -> {imported}")
    assert wrong == [], wrong
