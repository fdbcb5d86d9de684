"""One request of the TF jobs view asks for a bounded page (issue 37): ``GET /tfk8s/api/jobs?limit=``
is refused above :data:`~tfk8s_airflow.ui.sources.MAX_LIMIT` (422, naming ``limit`` and the maximum),
before any job is read or any pod listed; the maximum itself is served.

Through the view's real FastAPI app and handler, in process: Airflow's own auth manager (the
SimpleAuthManager of the test's Airflow home) signs the caller's token and ``get_user`` checks it, and
the session is Airflow's, on the migrated test database (shared by the session's tests). The per-page
bound on the pods listed is proven against a real API server in tests/security/test_view_bounded.py.
"""
from __future__ import annotations

import secrets

import pytest

from tfk8s_airflow.ui.sources import DEFAULT_LIMIT, MAX_LIMIT


@pytest.fixture
def view(airflow_db, monkeypatch):
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(32))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "reader:viewer")
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    from tfk8s_airflow.ui.app import app

    token = init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="reader", role="viewer"))
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


def test_a_page_asks_for_at_most_max_limit_jobs(view):
    assert (DEFAULT_LIMIT, MAX_LIMIT) == (50, 500)
    too_many = view.get("/api/jobs", params={"limit": MAX_LIMIT + 1})
    assert too_many.status_code == 422, too_many.text
    (detail,) = too_many.json()["detail"]
    assert detail["loc"] == ["query", "limit"] and detail["ctx"] == {"le": MAX_LIMIT}, detail
    assert view.get("/api/jobs", params={"limit": 0}).status_code == 422
    served = view.get("/api/jobs", params={"limit": MAX_LIMIT})
    # Admitted: whatever runs the session's database holds (other tests' runs), at most MAX_LIMIT of them.
    assert served.status_code == 200, served.text
    assert served.json()["user"] == "reader" and len(served.json()["jobs"]) <= MAX_LIMIT, served.text
