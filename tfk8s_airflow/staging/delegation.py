"""HDFS delegation tokens for copy pods with a Kerberos WebHDFS connection.

The Airflow side holds the Kerberos credentials (a ticket cache or a keytab the deployment keeps);
the copy pods hold none. Before the pods start, the task asks the NameNode for a delegation token
over WebHDFS with SPNEGO (``GETDELEGATIONTOKEN``, renewer: the connection's login, if any); the pods
read it from a Secret (:mod:`tfk8s_airflow.k8s.tokensecret`) and send it as ``delegation=``; when the
copy ends, fails or is cancelled the task cancels it (``CANCELDELEGATIONTOKEN``), so a token that
leaked from the Secret is worthless afterwards.

The token is a credential: never log it, never put it in a pod spec, a trigger's arguments or an
XCom. Error messages here never include it.
"""

from __future__ import annotations

import base64
from typing import Any

import requests

from tfk8s_airflow.exceptions import DataError, HdfsUnavailableError, StagingError

__all__ = ["obtain", "cancel", "handle", "TOKEN_LIMIT"]

#: A WebHDFS delegation token's URL string is ~100-200 characters; anything far larger is not one.
TOKEN_LIMIT = 4096


def _session(hdfs: Any) -> requests.Session:
    """The Kerberos connection's requests session (SPNEGO authentication on every request)."""
    if not hdfs.config.kerberos:
        raise StagingError("delegation tokens are for Kerberos WebHDFS connections (extra.kerberos)")
    session: requests.Session = hdfs.client._session  # the hdfs package's KerberosClient session
    return session


def _call(hdfs: Any, method: str, op: str, params: dict[str, str], what: str) -> dict[str, Any]:
    """One WebHDFS ``op`` on ``/`` against the NameNodes in order (a standby or an unreachable one
    is skipped). The response's JSON, or an error naming ``what`` (never the token)."""
    session = _session(hdfs)
    timeout = (min(hdfs.config.timeout, 10.0), hdfs.config.timeout)
    failures: list[str] = []
    for base in hdfs.config.urls:
        try:
            resp = session.request(method, f"{base}/webhdfs/v1/", params={"op": op, **params}, timeout=timeout)
        except (requests.ConnectionError, requests.Timeout) as exc:
            failures.append(f"{base}: {type(exc).__name__}")
            continue
        if resp.status_code == 200:
            try:
                doc = resp.json() if resp.content else {}
            except ValueError:
                raise StagingError(f"HDFS answered {what} with no JSON ({base})") from None
            return doc if isinstance(doc, dict) else {}
        try:
            remote = resp.json().get("RemoteException") or {}
        except ValueError:
            remote = {}
        kind, message = remote.get("exception", ""), str(remote.get("message", resp.reason))[:300]
        if kind == "StandbyException":
            failures.append(f"{base}: standby")
            continue
        if resp.status_code in (401, 403) and kind != "InvalidToken":
            raise DataError(f"HDFS refused {what} at {base} (HTTP {resp.status_code} {kind}): {message}; the "
                            "Airflow side needs a valid Kerberos ticket (kinit, or the deployment's keytab)")
        raise StagingError(f"HDFS refused {what} at {base} (HTTP {resp.status_code} {kind}): {message}")
    raise HdfsUnavailableError(f"no WebHDFS NameNode answered {what}: {'; '.join(failures)}")


def obtain(hdfs: Any, renewer: str | None) -> str:
    """A new delegation token (its URL string) for the Kerberos connection of ``hdfs``."""
    params = {"renewer": renewer} if renewer else {}
    doc = _call(hdfs, "GET", "GETDELEGATIONTOKEN", params, "a delegation token")
    token = (doc.get("Token") or {}).get("urlString") if isinstance(doc.get("Token"), dict) else None
    if not isinstance(token, str) or not token or len(token) > TOKEN_LIMIT or not token.isascii():
        raise StagingError("HDFS answered GETDELEGATIONTOKEN without a token")
    return token


def cancel(hdfs: Any, token: str) -> None:
    """Cancel ``token`` (SPNEGO as its owner). A token HDFS no longer knows counts as cancelled."""
    try:
        _call(hdfs, "PUT", "CANCELDELEGATIONTOKEN", {"token": token}, "cancelling the delegation token")
    except StagingError as exc:
        if "InvalidToken" in str(exc):  # unknown to HDFS: cancelled already, or expired
            return
        raise


def _read_vint(raw: bytes, at: int) -> tuple[int, int]:
    """A non-negative Hadoop ``WritableUtils`` variable-length integer at ``at``: (value, the offset after)."""
    first = raw[at] - 256 if raw[at] > 127 else raw[at]
    if first >= -112:
        return first, at + 1
    size = -111 - first if first >= -120 else -119 - first
    if first < -120 or at + size > len(raw):  # a negative length, or past the end: not a token
        raise ValueError("not a delegation token")
    return int.from_bytes(raw[at + 1:at + size], "big"), at + size


def _write_vint(value: int) -> bytes:
    if value <= 127:
        return bytes([value])
    body = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return bytes([256 - 112 - len(body)]) + body


def handle(token: str) -> str:
    """``token`` (its URL string) without its password: no credential (HDFS refuses it as ``delegation=``),
    yet the token's owner, authenticated with Kerberos, cancels the token with it (the NameNode checks who
    cancels and finds the token by its identifier). What the task may keep where a credential may not be: it
    cancels a token whose Secret is gone (a lease that ran out took it)."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        size, at = _read_vint(raw, 0)
        identifier, at = raw[at:at + size], at + size
        password_size, after = _read_vint(raw, at)
        rest = raw[after + password_size:]
    except (ValueError, IndexError):
        raise StagingError("HDFS answered GETDELEGATIONTOKEN with a token that does not read as one") from None
    if len(identifier) != size or not rest:
        raise StagingError("HDFS answered GETDELEGATIONTOKEN with a token that does not read as one")
    return base64.urlsafe_b64encode(_write_vint(size) + identifier + _write_vint(0) + rest).decode().rstrip("=")
