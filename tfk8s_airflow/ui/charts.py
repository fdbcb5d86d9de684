"""The TF jobs view's small charts: loss and examples/s over the steps, from the progress history (pure).

The job's watch keeps the newest :data:`~tfk8s_airflow.k8s.watch.HISTORY` progress points (one per
step increase); the sensor's ``progress`` carries them, and its summary the last of them once the
job ended. Here each series becomes the points of an SVG polyline in a fixed box, computed on the
server, so the page draws a chart with a single ``<polyline>`` and needs no charting library and
no TensorBoard. The history is a record the view reads back from XCom: at most
:data:`MAX_POINTS` of its newest points are drawn, and a value that is not a finite number (a
record of another release, a hand-written XCom) is left out, never drawn as a spike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tfk8s_airflow.job.run.records import ProgressPoint

#: The box every chart is drawn in (SVG user units; the page scales it).
WIDTH, HEIGHT = 240.0, 48.0
#: Room left at the top and the bottom, so the line's stroke is not cut at its extremes.
PAD = 3.0
#: Points drawn at most: the watch keeps as many (``HISTORY``); a longer history is cut to its newest.
MAX_POINTS = 240
#: The series charted: (the point's field, the label the page shows, the digits of its numbers).
SERIES = (("loss", "loss", 4), ("examples_per_sec", "examples/s", 1))


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def chart(points: Sequence[tuple[int, float]], label: str, digits: int) -> dict[str, Any] | None:
    """One series, ``(step, value)`` in step order, as a polyline in the :data:`WIDTH` x :data:`HEIGHT` box.

    The first step is at the left edge, the last at the right; the smallest value at the bottom, the
    largest at the top (a flat series: a line across the middle). None for fewer than two points: a
    line needs two.
    """
    if len(points) < 2:
        return None
    first, last = points[0][0], points[-1][0]
    low = min(v for _, v in points)
    high = max(v for _, v in points)
    span_x = last - first
    span_y = high - low
    coords = []
    for i, (step, value) in enumerate(points):
        x = (step - first) / span_x if span_x > 0 else i / (len(points) - 1)
        y = (value - low) / span_y if span_y > 0 else 0.5
        coords.append(f"{x * WIDTH:.1f},{PAD + (1.0 - y) * (HEIGHT - 2 * PAD):.1f}")
    return {"label": label, "width": WIDTH, "height": HEIGHT, "points": " ".join(coords),
            "min": round(low, digits), "max": round(high, digits), "last": round(points[-1][1], digits),
            "from_step": first, "to_step": last, "count": len(points)}


def charts(history: Sequence[ProgressPoint]) -> dict[str, dict[str, Any] | None]:
    """``{"loss": chart or None, "examples_per_sec": chart or None}`` of a progress history."""
    newest = list(history)[-MAX_POINTS:]
    out: dict[str, dict[str, Any] | None] = {}
    for name, label, digits in SERIES:
        series: list[tuple[int, float]] = []
        for p in newest:
            value = _finite(getattr(p, name, None))
            if value is None or isinstance(p.step, bool) or not isinstance(p.step, int):
                continue
            if series and p.step <= series[-1][0]:
                continue  # the watch appends on a step increase only; anything else is not drawn backwards
            series.append((p.step, value))
        out[name] = chart(series, label, digits)
    return out
