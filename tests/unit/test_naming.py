"""Names: always valid DNS labels with room for suffixes, stable per run, distinct across runs."""
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tfk8s_airflow.job import naming

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
ids = st.text(min_size=0, max_size=300)


@settings(max_examples=500, deadline=None)
@given(base=ids, run_id=ids, group=ids)
def test_job_name_always_valid_with_longest_suffix(base, run_id, group):
    job = naming.job_name(base, run_id, group)
    assert DNS_LABEL.match(job), job
    assert len(job) <= naming.JOB_NAME_MAX
    for role, index in (("evaluator", 0), ("worker", 511), ("chief", 0), ("ps", 99)):
        pod = naming.pod_name(job, role, index)
        assert len(pod) <= 63 and DNS_LABEL.match(pod), pod
    assert len(naming.configmap_name(job)) <= 63


@settings(max_examples=200, deadline=None)
@given(base=ids, run_id=ids, group=ids)
def test_job_name_is_stable_for_same_inputs(base, run_id, group):
    assert naming.job_name(base, run_id, group) == naming.job_name(base, run_id, group)


def test_no_collisions_across_many_distinct_run_ids():
    # 20,000 backfill-like run ids of one DAG: every job name distinct.
    run_ids = [f"backfill__2020-01-01T00:00:00+00:00#{i}" for i in range(10_000)]
    run_ids += [f"scheduled__{2000 + i // 365}-{i % 12 + 1:02d}-{i % 28 + 1:02d}T{i % 24:02d}:00:00+00:00/{i}"
                for i in range(10_000)]
    names = {naming.job_name("tfk8s_retrain_daily", r, "train") for r in run_ids}
    assert len(names) == len(set(run_ids))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=80), min_size=2, max_size=50, unique=True))
def test_distinct_unicode_run_ids_give_distinct_names(run_ids):
    names = [naming.job_name("dag", r) for r in run_ids]
    assert len(set(names)) == len(names)


def test_readable_prefix_and_letter_start():
    assert naming.job_name("MNIST_Train", "r1").startswith("mnist-train-")
    assert naming.job_name("123", "r1").startswith("j-123-")
    assert naming.job_name("", "r1")[0].isalpha()
    assert naming.job_name("日本語", "r1")[0].isalpha()


def test_group_changes_the_name():
    assert naming.job_name("dag", "run", "a") != naming.job_name("dag", "run", "b")


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=400))
def test_sanitized_label_values_are_valid(value):
    out = naming.sanitize_label_value(value)
    assert naming.is_label_value(out), out


def test_valid_label_values_pass_through_and_long_ones_keep_uniqueness():
    assert naming.sanitize_label_value("worker") == "worker"
    a = naming.sanitize_label_value("x" * 100 + "a")
    b = naming.sanitize_label_value("x" * 100 + "b")
    assert a != b and len(a) <= 63
    assert naming.sanitize_label_value("manual__2026-01-01T00:00:00+00:00") != "manual__2026-01-01T00:00:00+00:00"
