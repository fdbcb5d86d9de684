"""The TF jobs view's progress bar and small charts, computed on the server from the progress history."""
import math

from tests.unit.test_ui_rows import record, sources
from tfk8s_airflow.job.run.records import JobProgress, ProgressPoint
from tfk8s_airflow.ui.charts import HEIGHT, MAX_POINTS, PAD, WIDTH, charts
from tfk8s_airflow.ui.rows import JobSources, Links, job_row, mark_task, percent


def xy(chart):
    return [tuple(map(float, p.split(","))) for p in chart["points"].split()]


def test_loss_and_examples_per_second_become_polylines_from_the_first_step_to_the_last():
    history = [ProgressPoint(100.0 + i, 100 * (i + 1), loss=2.0 / (i + 1), examples_per_sec=500.0 + 10 * i)
               for i in range(5)]
    got = charts(history)
    loss, rate = got["loss"], got["examples_per_sec"]
    assert (loss["from_step"], loss["to_step"], loss["count"]) == (100, 500, 5)
    assert (loss["min"], loss["max"], loss["last"]) == (0.4, 2.0, 0.4)
    assert (rate["min"], rate["max"], rate["last"]) == (500.0, 540.0, 540.0)
    points = xy(loss)
    assert [x for x, _ in points] == [0.0, WIDTH / 4, WIDTH / 2, 3 * WIDTH / 4, WIDTH]
    # The largest loss at the top of the box, the smallest at the bottom (SVG's y grows downwards).
    assert points[0][1] == PAD and points[-1][1] == HEIGHT - PAD
    assert [y for _, y in points] == sorted(y for _, y in points)  # loss falls: the line goes down
    assert [y for _, y in xy(rate)] == sorted((y for _, y in xy(rate)), reverse=True)  # the rate rises


def test_steps_place_the_points_not_their_order():
    history = [ProgressPoint(1.0, 0, loss=1.0), ProgressPoint(2.0, 90, loss=0.5), ProgressPoint(3.0, 100, loss=0.4)]
    assert [x for x, _ in xy(charts(history)["loss"])] == [0.0, 0.9 * WIDTH, WIDTH]


def test_fewer_than_two_points_draw_no_chart_and_a_flat_series_draws_a_line_across_the_middle():
    assert charts([]) == {"loss": None, "examples_per_sec": None}
    assert charts([ProgressPoint(1.0, 10, loss=1.0, examples_per_sec=5.0)]) == {"loss": None, "examples_per_sec": None}
    flat = charts([ProgressPoint(1.0, 10, loss=0.3), ProgressPoint(2.0, 20, loss=0.3)])
    assert {y for _, y in xy(flat["loss"])} == {HEIGHT / 2} and flat["examples_per_sec"] is None


def test_values_that_are_no_finite_number_and_steps_that_go_back_are_left_out():
    history = [ProgressPoint(1.0, 10, loss=1.0), ProgressPoint(2.0, 20, loss=float("nan")),
               ProgressPoint(3.0, 30, loss=float("inf")), ProgressPoint(4.0, 40, loss="0.5"),  # type: ignore[arg-type]
               ProgressPoint(4.5, 45, loss=0.5), ProgressPoint(5.0, 35, loss=0.1),
               ProgressPoint(6.0, 50, loss=True), ProgressPoint(7.0, 60, loss=0.2)]  # type: ignore[arg-type]
    loss = charts(history)["loss"]
    assert (loss["count"], loss["from_step"], loss["to_step"], loss["min"], loss["max"]) == (3, 10, 60, 0.2, 1.0)
    assert all(math.isfinite(v) for p in xy(loss) for v in p)


def test_a_history_longer_than_the_watch_keeps_is_cut_to_its_newest_points():
    history = [ProgressPoint(float(i), i, loss=1.0 / (i + 1)) for i in range(MAX_POINTS + 60)]
    loss = charts(history)["loss"]
    assert loss["count"] == MAX_POINTS and loss["from_step"] == 60 and loss["to_step"] == MAX_POINTS + 59


def test_the_row_carries_the_bar_and_the_charts_of_the_progress_the_sensor_pushed():
    history = tuple(ProgressPoint(float(i), 50 * i, loss=1.0 - i / 10, examples_per_sec=800.0 + i) for i in range(1, 5))
    progress = JobProgress(job="j", namespace="ns", state="running", updated_at=4.0, step=200, target_step=800,
                           loss=0.6, examples_per_sec=804.0, history=history)
    got = job_row(sources(progress=progress), Links())["progress"]
    assert got["percent"] == 25.0
    assert got["charts"]["loss"]["count"] == 4 and got["charts"]["examples_per_sec"]["last"] == 804.0
    # The summary's progress (the job ended) keeps its history: the charts stay after the job.
    summary = {"state": "succeeded", "reason": "done", "progress": progress.to_xcom()}
    from tfk8s_airflow.ui.sources import final_progress
    ended = job_row(sources(run_state="success", summary=summary, progress=final_progress(summary)), Links())
    assert ended["progress"]["charts"] == got["charts"]


def test_the_bar_is_the_step_over_the_target_within_0_and_100():
    assert [percent(s, t) for s, t in ((0, 100), (33, 99), (150, 100), (5, None), (None, 10), (5, 0))] == \
        [0.0, 33.3, 100.0, None, None, None]


def rows_of_two_jobs():
    rec = record()
    a = job_row(sources(), Links())
    b = job_row(JobSources(dag_id="d", run_id="r", run_state="running", prefix="eval.", record=rec), Links())
    return [a, b]


def test_a_replica_task_marks_its_job_and_that_replica_only():
    got = mark_task(rows_of_two_jobs(), "eval.replica", 2)
    assert [r["group"] for r in got] == ["eval", "train"]  # the task's job first
    assert [r["marked"] for r in got] == [True, False]
    assert [r["marked"] for r in got[0]["replicas"]] == [False, False, True]
    assert not any(r["marked"] for r in got[1]["replicas"])


def test_another_task_of_a_group_marks_its_job_and_no_replica_and_a_task_of_no_job_marks_nothing():
    got = mark_task(rows_of_two_jobs(), "train.wait", 1)
    assert [(r["group"], r["marked"]) for r in got] == [("train", True), ("eval", False)]
    assert not any(r["marked"] for row in got for r in row["replicas"])
    none = mark_task(rows_of_two_jobs(), "publish", -1)
    assert [r["group"] for r in none] == ["train", "eval"] and not any(r["marked"] for r in none)
    # A task whose id merely starts like a group's is not of it.
    assert not any(r["marked"] for r in mark_task(rows_of_two_jobs(), "training.replica", 0))
