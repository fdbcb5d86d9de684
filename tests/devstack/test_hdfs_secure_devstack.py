"""The devstack's KDC and Kerberized HDFS (``devstack/up hdfs-secure``): SPNEGO is required, the
user's keytab authenticates, HDFS checks that user's permissions, and delegation tokens work on the
NameNode and the DataNode until cancelled."""
from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
import requests

from tests.staging.test_stage_pods_kerberos import secure_hdfs, token_works  # noqa: F401 - the fixture
from tfk8s_airflow.exceptions import DataError
from tfk8s_airflow.staging import delegation
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.hdfs]


@pytest.fixture
def user_hdfs(monkeypatch, tmp_path, secure_hdfs):  # noqa: F811 - the fixture
    monkeypatch.setenv("KRB5_CONFIG", secure_hdfs["TFK8S_KRB5_CONFIG"])
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", secure_hdfs["TFK8S_KRB5_USER_KEYTAB"])
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'krb5cc'}")
    return WebHdfs(WebHdfsConfig(urls=(secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"],),
                                 user=secure_hdfs["TFK8S_SECURE_HDFS_USER"], kerberos=True))


def test_spnego_is_required_and_simple_auth_refused(secure_hdfs):  # noqa: F811 - the fixture
    url = secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    anonymous = requests.get(f"{url}/webhdfs/v1/tmp?op=GETFILESTATUS", timeout=10)
    assert anonymous.status_code == 401 and anonymous.headers.get("WWW-Authenticate") == "Negotiate"
    named = requests.get(f"{url}/webhdfs/v1/tmp?op=GETFILESTATUS&user.name=hdfs", timeout=10)
    assert named.status_code == 401


def test_user_keytab_authenticates_with_real_permissions(user_hdfs, secure_hdfs):  # noqa: F811 - the fixture
    user = secure_hdfs["TFK8S_SECURE_HDFS_USER"]
    path = f"/user/{user}/t-{uuid.uuid4().hex[:8]}/a.bin"
    data = os.urandom(70_000)
    user_hdfs.client.write(path, data=data)
    assert user_hdfs.status(path)["owner"] == user
    assert user_hdfs.read_bytes(path) == data
    with pytest.raises(DataError, match="ermission denied"):
        user_hdfs.call("writing", "/forbidden", lambda: user_hdfs.client.write("/forbidden/x", data=b"x"))
    user_hdfs.client.delete(path.rsplit("/", 1)[0], recursive=True)


def test_delegation_token_reads_through_the_datanode_until_cancelled(user_hdfs, secure_hdfs):  # noqa: F811
    url = secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    path = f"/tmp/t-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(100_000)
    user_hdfs.client.write(path, data=data)
    token = delegation.obtain(user_hdfs, secure_hdfs["TFK8S_SECURE_HDFS_USER"])
    query = urllib.parse.urlencode({"op": "OPEN", "delegation": token})
    with urllib.request.urlopen(f"{url}/webhdfs/v1{path}?{query}", timeout=10) as resp:  # the DataNode's redirect
        assert resp.read() == data
    assert token_works(url, token) is True
    delegation.cancel(user_hdfs, token)
    assert token_works(url, token) is False
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{url}/webhdfs/v1{path}?{query}", timeout=10)
    delegation.cancel(user_hdfs, token)  # cancelled already: not an error
    user_hdfs.client.delete(path)
