"""Acceptance: WebHDFS against the devstack's real NameNode and DataNode (issue 3)."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from urllib.parse import urlparse

import pytest
import requests
from hdfs.util import HdfsError

from tests.fixtures.data import crc32c, hdfs_md5_crc_checksum

# serial: it stops the NameNode every HDFS test uses, and bounds the time of devstack/up.
pytestmark = [pytest.mark.hdfs, pytest.mark.serial]


def test_write_list_read_back_and_checksum(hdfs_server, hdfs_dir):
    client = hdfs_server.client()
    big = os.urandom(3 * 1024 * 1024 + 17)  # several 512-byte checksum chunks, odd tail
    client.write(f"{hdfs_dir}/part-0000.bin", data=big)
    client.write(f"{hdfs_dir}/part-0001.bin", data=big)  # same bytes, other name
    client.write(f"{hdfs_dir}/sub/_SUCCESS", data=b"")
    client.write(f"{hdfs_dir}/sub/notes.txt", data="ünïcode\n", encoding="utf-8")

    assert client.list(hdfs_dir) == ["part-0000.bin", "part-0001.bin", "sub"]
    assert client.list(f"{hdfs_dir}/sub") == ["_SUCCESS", "notes.txt"]
    status = client.status(f"{hdfs_dir}/part-0000.bin")
    assert (status["type"], status["length"], status["owner"]) == ("FILE", len(big), hdfs_server.user)
    files = {os.path.relpath(os.path.join(root, name), hdfs_dir)
             for root, _dirs, names in client.walk(hdfs_dir) for name in names}
    assert files == {"part-0000.bin", "part-0001.bin", "sub/_SUCCESS", "sub/notes.txt"}

    with client.read(f"{hdfs_dir}/part-0000.bin") as reader:
        assert reader.read() == big
    with client.read(f"{hdfs_dir}/sub/notes.txt", encoding="utf-8") as reader:
        assert reader.read() == "ünïcode\n"
    with client.read(f"{hdfs_dir}/part-0000.bin", offset=1000, length=24) as reader:
        assert reader.read() == big[1000:1024]

    # GETFILECHECKSUM (served by the DataNode behind a 307 redirect).
    first = client.checksum(f"{hdfs_dir}/part-0000.bin")
    second = client.checksum(f"{hdfs_dir}/part-0001.bin")
    assert first["algorithm"] == "MD5-of-0MD5-of-512CRC32C"
    assert first["length"] == 28
    assert first == second  # same bytes, same checksum
    flipped = bytearray(big)
    flipped[-1] ^= 0xFF
    client.write(f"{hdfs_dir}/part-0001.bin", data=bytes(flipped), overwrite=True)
    assert client.checksum(f"{hdfs_dir}/part-0001.bin")["bytes"] != first["bytes"]


@pytest.mark.parametrize("size, block_size", [
    (1, 128 * 1024 * 1024),
    (5000, 128 * 1024 * 1024),           # one block, partial last chunk
    (3 * 1024 * 1024 + 7, 1024 * 1024),  # four blocks: crcPerBlock and buffer padding
])
def test_checksum_matches_local_computation(hdfs_server, hdfs_dir, size, block_size):
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    data = os.urandom(size)
    client = hdfs_server.client()
    client.write(f"{hdfs_dir}/f", data=data, blocksize=block_size)
    reported = client.checksum(f"{hdfs_dir}/f")
    expected = hdfs_md5_crc_checksum(data, block_size=block_size)
    assert reported["algorithm"] == expected["algorithm"]
    assert reported["length"] == expected["length"]
    assert reported["bytes"].startswith(expected["bytes"])


def test_datanode_redirect_names_this_machine_and_http_listens_for_pods(hdfs_server, hdfs_dir):
    """WebHDFS reads redirect to the DataNode by this machine's host name, which resolves
    here and (through the real node's CoreDNS) to the host address in every pod; the
    NameNode's and the DataNode's HTTP listen on all addresses, so the real node's bridge
    reaches them too (pods fetching from HDFS: tests/realpods/test_code_fetch.py)."""
    hdfs_server.client().write(f"{hdfs_dir}/f", data=b"x")
    resp = requests.get(f"{hdfs_server.url}/webhdfs/v1{hdfs_dir}/f",
                        params={"op": "OPEN", "user.name": hdfs_server.user},
                        allow_redirects=False, timeout=10)
    assert resp.status_code == 307
    location = urlparse(resp.headers["Location"])
    assert location.hostname == socket.gethostname()
    assert hdfs_server.env["TFK8S_HDFS_DATANODE_URL"] == f"http://{location.hostname}:{location.port}"
    assert requests.get(resp.headers["Location"], timeout=10).content == b"x"
    assert hdfs_server.env["TFK8S_HDFS_BIND_HOST"] == "0.0.0.0"
    for port in (urlparse(hdfs_server.url).port, location.port):
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                                   timeout=10).stdout.split()
        assert f"0.0.0.0:{port}" in listening, listening


def test_real_permission_denied_for_an_ordinary_user(hdfs_server, hdfs_dir):
    root = hdfs_server.superclient()
    private = f"{hdfs_dir}/private"
    root.makedirs(private)
    root.write(f"{private}/secret.txt", data=b"s3cret")
    root.set_owner(private, owner="someone-else", group="someone-else")
    root.set_permission(private, "700")

    client = hdfs_server.client()  # the ordinary user, not the owner
    with pytest.raises(HdfsError) as listing:
        client.list(private)
    assert listing.value.exception == "AccessControlException"
    assert f"Permission denied: user={hdfs_server.user}, access=READ_EXECUTE" in listing.value.message
    with pytest.raises(HdfsError, match="Permission denied") as reading, client.read(f"{private}/secret.txt") as reader:
        reader.read()
    assert reading.value.exception == "AccessControlException"
    with pytest.raises(HdfsError, match="Permission denied"):
        client.write(f"{private}/new.txt", data=b"x")
    # The owner's data is untouched and the superuser still reads it.
    with root.read(f"{private}/secret.txt") as reader:
        assert reader.read() == b"s3cret"
    assert root.list(private) == ["secret.txt"]


def test_shared_tree_layout(hdfs_server):
    root = hdfs_server.superclient()
    for path, mode, owner in (("/tmp", "1777", hdfs_server.superuser),
                              ("/data", "1777", hdfs_server.superuser),
                              (f"/user/{hdfs_server.user}", "755", hdfs_server.user)):
        status = root.status(path)
        assert (status["type"], status["permission"], status["owner"]) == ("DIRECTORY", mode, owner), path


def test_namenode_can_be_stopped_and_restarted(hdfs_server, hdfs_dir):
    client = hdfs_server.client()
    client.write(f"{hdfs_dir}/kept.bin", data=b"survives a restart")
    started = time.monotonic()
    with hdfs_server.stopped():
        assert not hdfs_server.is_up()
        with pytest.raises(requests.exceptions.ConnectionError):
            hdfs_server.client(timeout=5).status(hdfs_dir)
    assert hdfs_server.is_up()
    assert time.monotonic() - started < 90
    with client.read(f"{hdfs_dir}/kept.bin") as reader:
        assert reader.read() == b"survives a restart"


def test_env_exports_and_fast_idempotent_up(hdfs_server):
    import json

    from tests.fixtures.data import DEVSTACK

    conn = json.loads(os.environ["AIRFLOW_CONN_WEBHDFS_DEFAULT"])
    assert conn == {"conn_type": "webhdfs", "host": "127.0.0.1",
                    "port": urlparse(hdfs_server.url).port, "login": hdfs_server.user}
    assert os.environ["TFK8S_WEBHDFS_URL"] == hdfs_server.url
    started = time.monotonic()
    subprocess.run([str(DEVSTACK / "up"), "hdfs"], check=True, capture_output=True, timeout=60)
    assert time.monotonic() - started < 5
