"""Promotion: only improving models, idempotent per version, concurrent-safe."""
import json
import threading

import pytest

from tfk8s_airflow.exceptions import ModelMissingError
from tfk8s_airflow.volume import promotion


def model(tmp_path, name, content="weights"):
    d = tmp_path / "models" / name
    d.mkdir(parents=True)
    (d / "saved_model.pb").write_text(content)
    return d


def test_first_then_only_better(tmp_path):
    serving = tmp_path / "serving"
    r1 = promotion.promote(model(tmp_path, "a"), serving, "2026-01-01", {"accuracy": 0.80})
    assert r1["promoted"] and r1["reason"] == "first model"
    r2 = promotion.promote(model(tmp_path, "b"), serving, "2026-01-02", {"accuracy": 0.75})
    assert not r2["promoted"] and "does not beat" in r2["reason"]
    assert not (serving / "versions" / "2026-01-02").exists()
    r3 = promotion.promote(model(tmp_path, "c", "better"), serving, "2026-01-03", {"accuracy": 0.90})
    assert r3["promoted"] and r3["previous"] == "2026-01-01"
    cur = promotion.current(serving)
    assert cur["version"] == "2026-01-03" and cur["value"] == 0.90
    assert (serving / "versions" / "2026-01-03" / "saved_model.pb").read_text() == "better"
    promoted = json.loads((serving / "versions" / "2026-01-03" / "promotion.json").read_text())
    assert promoted["metrics"] == {"accuracy": 0.90}


def test_idempotent_for_the_same_version(tmp_path):
    serving = tmp_path / "serving"
    m = model(tmp_path, "a")
    promotion.promote(m, serving, "2026-01-01", {"accuracy": 0.8})
    again = promotion.promote(m, serving, "2026-01-01", {"accuracy": 0.8})
    assert again["promoted"] and again.get("already")


def test_missing_model(tmp_path):
    with pytest.raises(ModelMissingError):
        promotion.promote(tmp_path / "nope", tmp_path / "serving", "v", {"accuracy": 1.0})


def test_concurrent_promotions_keep_the_best(tmp_path):
    serving = tmp_path / "serving"
    models = [(model(tmp_path, f"m{i}"), f"v{i}", 0.5 + i / 100) for i in range(12)]
    threads = [threading.Thread(target=promotion.promote, args=(m, serving, v, {"accuracy": acc}))
               for m, v, acc in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert promotion.current(serving)["version"] == "v11"
    assert not [p for p in (serving / "versions").iterdir() if p.name.startswith(".")]
