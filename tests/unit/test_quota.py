"""Quota pre-flight arithmetic against ResourceQuota status as the API returns it."""
from tfk8s_airflow.job.builders import quota
from tfk8s_airflow.job.spec import parse_spec

SPEC = parse_spec({"name": "j", "image": "i:1",
                            "ps": {"replicas": 1, "resources": {"cpu": "1", "memory": "1Gi"}},
                            "worker": {"replicas": 4, "resources": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": 1}}})


def rq(hard, used=None, name="team-quota"):
    return {"metadata": {"name": name}, "status": {"hard": hard, "used": used or {}}}


def test_job_requests_sum_every_replica():
    need = quota.job_requests(SPEC)
    assert need["requests.cpu"] == 9 and need["pods"] == 5
    assert need["requests.memory"] == 9 * 2**30 and need["requests.nvidia.com/gpu"] == 4


def test_fits_and_exceeds_with_numbers():
    assert quota.check(SPEC, [rq({"requests.cpu": "10", "pods": "10"}, {"requests.cpu": "1"})]) == []
    problems = quota.check(SPEC, [rq({"requests.cpu": "10", "requests.nvidia.com/gpu": "4"},
                                     {"requests.cpu": "2500m", "requests.nvidia.com/gpu": "1"})])
    assert "requests.cpu requested 9, remaining 7.5" in problems[0]
    assert "requests.nvidia.com/gpu requested 4, remaining 3" in problems[1]


def test_quota_on_cpu_requires_requests():
    bare = parse_spec({"name": "j", "image": "i:1", "worker": 1})
    assert "must request cpu" in quota.check(bare, [rq({"requests.cpu": "4"})])[0]


def test_requests_count_for_requests_and_limits_for_limits():
    spec = parse_spec({"name": "j", "image": "i:1", "worker": {"replicas": 4, "resources": {
        "requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}}})
    need = quota.job_requests(spec)
    assert need["requests.cpu"] == need["cpu"] == 2 and need["limits.cpu"] == 8
    assert need["requests.memory"] == 4 * 2**30 and need["limits.memory"] == 16 * 2**30
    assert quota.check(spec, [rq({"requests.cpu": "3", "limits.cpu": "8"})]) == []
    problems = quota.check(spec, [rq({"requests.cpu": "3", "limits.cpu": "6"})])
    assert problems == ["ResourceQuota team-quota: limits.cpu requested 8, remaining 6 (hard 6, used 0)"]


def test_a_limits_quota_needs_every_role_to_set_a_limit():
    spec = parse_spec({"name": "j", "image": "i:1", "ps": {"replicas": 1, "resources": {"cpu": 1}},
                                "worker": {"replicas": 2, "resources": {"requests": {"cpu": "1"}}}})
    problems = quota.check(spec, [rq({"limits.cpu": "10", "requests.cpu": "10"})])
    assert len(problems) == 1 and "must set a cpu limit" in problems[0] and "worker" in problems[0]
