"""The training-image recipe (deploy/training-image.Dockerfile) installs what imports with the
standard library alone: the pure-Python wheel built from this tree, installed with the recipe's
own `pip install --no-deps` into a bare venv (no Airflow, no Kubernetes client, no jinja2, no
yaml), then the recipe's own import line, with every module it loaded checked to be the standard
library's or this package's."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "deploy" / "training-image.Dockerfile"

CHECK = """
import json, sys
before = set(sys.modules)
{imports}
loaded = sorted(set(sys.modules) - before)
print(json.dumps({{"loaded": loaded, "stdlib": sorted(sys.stdlib_module_names), "file": tfk8s_airflow.__file__}}))
"""


def _recipe_prune() -> str:
    """The recipe's `python3 -c "..."` that removes all of the package but the pod side."""
    m = re.search(r'python3 -c "(import pathlib, shutil, tfk8s_airflow;[^"]+)"', RECIPE.read_text())
    assert m, f"{RECIPE.name} does not remove the Airflow side"
    return m.group(1)


def _recipe_imports() -> list[str]:
    """The modules the recipe's `python3 -c "import ..."` line imports."""
    m = re.search(r'python3 -c "import ([\w., ]+)"', RECIPE.read_text())
    assert m, f"{RECIPE.name} has no python3 -c \"import ...\" check"
    return [name.strip() for name in m.group(1).split(",")]


def test_the_recipe_installs_from_a_file_with_no_dependencies():
    text = RECIPE.read_text()
    installs = re.findall(r"pip install ([^\n&]+)", text)
    ours = [line for line in installs if "tfk8s" in line]
    assert ours and all("--no-deps" in line and "py3-none-any.whl" in line for line in ours), ours
    assert not re.search(r"pip install[^\n]*\btfk8s-airflow\b", text), "the name is on no index"
    assert "TFK8S_PURE_PYTHON=1" in text


def test_what_the_recipe_installs_imports_with_the_standard_library_alone(tmp_path):
    modules = _recipe_imports()
    assert {"tfk8s_airflow.pod.runtime", "tfk8s_airflow.pod.codefetch", "tfk8s_airflow.pod.trainer.cli"} <= set(modules)
    # Built from a copy: a build leaves build/ beside its source, which a later build would reuse.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".artifacts", ".demo", ".hypothesis", "*.so"))
    dist = tmp_path / "dist"
    env = {**os.environ, "TFK8S_PURE_PYTHON": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
                   check=True, env=env, capture_output=True, timeout=300, cwd=tmp_path)
    (wheel,) = dist.glob("tfk8s_airflow-*-py3-none-any.whl")
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # nothing but the interpreter's standard library
    python = bare / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    str(wheel)], check=True, env=env, capture_output=True, timeout=300, cwd=tmp_path)
    site = subprocess.run([str(python), "-c", "import sys; print([p for p in sys.path if p])"],
                          check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert "site-packages" in site and str(ROOT) not in site and str(src) not in site
    subprocess.run([str(python), "-c", _recipe_prune()], check=True, capture_output=True, timeout=60, cwd=tmp_path)
    left = subprocess.run([str(python), "-c", "import pathlib, tfk8s_airflow; print(sorted(p.name for p in "
                           "pathlib.Path(tfk8s_airflow.__file__).parent.iterdir() if p.name != '__pycache__'))"],
                          check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert json.loads(left.replace("'", '"')) == ["__init__.py", "contract.py", "exceptions.py", "hdfschecksum.py",
                                                   "nofollow.py", "pathrules.py", "pod", "py.typed", "redaction.py",
                                                   "threads.py", "untrusted.py"]
    code = CHECK.format(imports="\n".join(f"import {m}" for m in modules) + "\nimport tfk8s_airflow")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={"PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert str(bare) in result["file"]
    stdlib = set(result["stdlib"])
    foreign = [m for m in result["loaded"] if m.split(".")[0] not in stdlib and m.split(".")[0] != "tfk8s_airflow"]
    assert foreign == [], f"the pod side loaded modules beyond the standard library: {foreign}"
    assert any(m == "tfk8s_airflow.pod.codefetch" for m in result["loaded"])
