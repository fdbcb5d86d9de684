"""Read-only means read-only: host-path admission decided on the path as it stands on this machine.

Each test builds a real tree with real symbolic links in a temporary directory (the deciding machine's
view of the shared volume) and admits pods with the package's own functions. The kubelet follows links
when it bind-mounts a hostPath, so ``<allowed>/tfk8s/link -> ../serving`` mounted writable is a writable
mount of the read-only tree: refused. Where the deciding process cannot see the volume (recovery in a
triggerer that does not mount it) and read-only roots are set, the path is refused, not trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfk8s_airflow.exceptions import PermanentKubernetesApiError, SpecError
from tfk8s_airflow.job.builders.admission import admit_pod, admit_pods
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JobRecord, ReplicaRef
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s.relaunch import Recoverer
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.volume.hostpath import walk_host_path


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    """The shared volume as the deciding machine sees it: a writable tfk8s/ tree and a read-only serving/."""
    (tmp_path / "tfk8s" / "job").mkdir(parents=True)
    (tmp_path / "serving" / "model" / "1").mkdir(parents=True)
    return tmp_path


def _policy(volume: Path) -> DeploymentPolicy:
    return DeploymentPolicy(allowed_host_paths=(str(volume),), read_only_host_paths=(f"{volume}/serving",))


def _pod(path: str, read_only: bool = False, sub_path: str | None = None) -> dict:
    mount = {"name": "v", "mountPath": "/v", **({"readOnly": True} if read_only else {}),
             **({"subPath": sub_path} if sub_path else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "i", "volumeMounts": [mount],
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]},
                                                         "seccompProfile": {"type": "RuntimeDefault"}}}],
                     "volumes": [{"name": "v", "hostPath": {"path": path}}]}}


def test_a_planted_link_into_the_read_only_tree_is_refused_for_a_writable_mount(volume):
    os.symlink("../serving", volume / "tfk8s" / "link")
    with pytest.raises(SpecError) as info:
        admit_pod(_pod(f"{volume}/tfk8s/link"), _policy(volume))
    text = str(info.value)
    assert "volumeMounts[v]" in text and "tfk8s/link' is a symbolic link" in text and "read_only" in text
    # Deeper: the link is a component above the mounted directory.
    with pytest.raises(SpecError, match="is a symbolic link"):
        admit_pod(_pod(f"{volume}/tfk8s/link/model"), _policy(volume))
    # The same link mounted read-only stays inside the allowed paths: admitted, read-only.
    admitted = admit_pod(_pod(f"{volume}/tfk8s/link", read_only=True), _policy(volume))
    assert admitted["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True


def test_a_link_out_of_the_read_only_tree_is_refused_too(volume):
    """A link inside the read-only tree, through a writable subPath of a volume above it."""
    os.symlink("../tfk8s/job", volume / "serving" / "out")
    os.symlink("../serving/model", volume / "tfk8s" / "job" / "in")
    with pytest.raises(SpecError, match="is a symbolic link"):
        admit_pod(_pod(str(volume / "tfk8s"), sub_path="job/in"), _policy(volume))


def test_the_spec_is_refused_before_anything_is_built(volume):
    os.symlink("../serving", volume / "tfk8s" / "link")
    spec = parse_spec({"name": "j", "image": "i", "worker": 1,
                       "volumes": [{"name": "m", "mount_path": "/m", "host_path": f"{volume}/tfk8s/link"}]})
    problems = _policy(volume).problems(spec)
    assert [p.field for p in problems] == ["volumes[0].host_path"]
    assert "symbolic link" in problems[0].message
    plain = parse_spec({"name": "j", "image": "i", "worker": 1,
                        "volumes": [{"name": "m", "mount_path": "/m", "host_path": f"{volume}/tfk8s/job"}]})
    assert _policy(volume).problems(plain) == []


def test_plain_directories_and_the_read_only_tree_are_admitted(volume):
    admitted = admit_pod(_pod(f"{volume}/tfk8s/job"), _policy(volume))
    assert not admitted["spec"]["containers"][0]["volumeMounts"][0].get("readOnly")
    served = admit_pod(_pod(f"{volume}/serving/model"), _policy(volume))
    assert served["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True
    # A directory that does not exist yet (the kubelet creates it) has nothing to follow: admitted.
    admit_pod(_pod(f"{volume}/tfk8s/job/new/deeper"), _policy(volume))
    # A writable subPath of the volume's root that is neither at nor above the read-only root: admitted.
    admit_pod(_pod(str(volume), sub_path="tfk8s/job"), _policy(volume))
    # One that reaches into it is mounted read-only; one above it is refused.
    into = admit_pod(_pod(str(volume), sub_path="serving/model"), _policy(volume))
    assert into["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True
    with pytest.raises(SpecError, match="holds"):
        admit_pod(_pod(str(volume)), _policy(volume))


def test_where_the_volume_cannot_be_seen_the_path_is_refused_not_trusted(tmp_path):
    unseen = tmp_path / "not-mounted-here"
    policy = DeploymentPolicy(allowed_host_paths=(str(unseen),), read_only_host_paths=(f"{unseen}/serving",))
    with pytest.raises(SpecError) as info:
        admit_pod(_pod(f"{unseen}/tfk8s/link"), policy)
    text = str(info.value)
    assert "volumes[v].hostPath.path" in text and "cannot be checked here" in text
    assert f"mount the volume at {unseen}" in text and "read_only_host_paths" in text
    # Without read-only roots nothing is protected by the walk: the path is admitted as before.
    admit_pod(_pod(f"{unseen}/tfk8s/link"), DeploymentPolicy(allowed_host_paths=(str(unseen),)))


def test_recovery_in_a_triggerer_that_cannot_see_the_volume_refuses_to_recreate(tmp_path):
    unseen = tmp_path / "gluster"
    policy = DeploymentPolicy(allowed_host_paths=(str(unseen),), read_only_host_paths=(f"{unseen}/serving",))
    record = JobRecord(job="j", namespace="default", service="j", configmap="j", selector="tfk8s.io/job=j",
                       policy=JobPolicy.from_spec(parse_spec({"name": "j", "image": "i", "worker": 1})),
                       replicas=(ReplicaRef("worker-0", "worker", 0, "p", True, uid="u"),), created_at=0.0)
    with pytest.raises(PermanentKubernetesApiError, match="cannot be checked here"):
        Recoverer(record, api=None, policy=policy)._admitted([_pod(f"{unseen}/tfk8s/job")])


def test_the_walk_opens_nothing_it_would_follow(volume):
    os.symlink("/etc", volume / "tfk8s" / "etc")
    view = walk_host_path(f"{volume}/tfk8s/etc/passwd", [str(volume)])
    assert view.seen and view.link == f"{volume}/tfk8s/etc"
    assert walk_host_path(f"{volume}/tfk8s/job", [str(volume), f"{volume}/tfk8s"]).root == str(volume)
    missing = walk_host_path(f"{volume}/tfk8s/nope/x", [str(volume)])
    assert missing.seen and missing.link is None and missing.missing == f"{volume}/tfk8s/nope"


def _copy_pods(volume: Path, policy: DeploymentPolicy, program: str = "tfk8s_airflow.pod.stagecopy") -> dict:
    dest = volume / "tfk8s" / "cache" / "ds"
    staging, records = fanout.pods_staging_dir(dest, "k"), fanout.records_dir(dest, "k")
    staging.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)

    def pod_path(p: Path) -> str:
        return "/data/" + p.relative_to(volume).as_posix()

    doc = {"part": 0, "staging": pod_path(staging), "records": pod_path(records), "dest": pod_path(dest)}
    settings = fanout.CopySettings(image="img")
    pod = fanout.copy_pod("p", {}, doc, settings, str(volume), "/data", policy.pod_security(None)[:2],
                          program=program)
    return admit_pod(pod, policy, what="staging copy pod p")


def test_copy_pods_mount_only_their_task_directories_writable(volume):
    pod = _copy_pods(volume, _policy(volume))
    mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["spec"]["volumes"]}
    assert mounts["/data"]["readOnly"] is True and paths["data"] == str(volume)
    writable = sorted(paths[m["name"]] for m in mounts.values() if not m.get("readOnly"))
    assert writable == sorted([f"{volume}/tfk8s/cache/.ds.tfk8s-parts-k", f"{volume}/tfk8s/cache/.ds.tfk8s-pods-k"])
    assert all(m["mountPath"] == "/data/" + os.path.relpath(paths[m["name"]], volume)
               for m in mounts.values() if not m.get("readOnly"))


def test_a_task_directory_replaced_by_a_link_refuses_the_copy_pod(volume):
    dest = volume / "tfk8s" / "cache" / "ds"
    dest.parent.mkdir(parents=True)
    os.symlink("../../serving", fanout.pods_staging_dir(dest, "k"))
    with pytest.raises(SpecError, match="is a symbolic link"):
        _copy_pods(volume, _policy(volume))


def test_admission_of_many_pods_walks_each(volume):
    os.symlink("../serving", volume / "tfk8s" / "link")
    with pytest.raises(SpecError) as info:
        admit_pods([_pod(f"{volume}/tfk8s/job"), _pod(f"{volume}/tfk8s/link")], _policy(volume))
    assert str(info.value).count("is a symbolic link") == 1
