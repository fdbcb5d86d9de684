"""The WebHDFS data path (reads and checksums over urllib3) against the devstack HDFS.

Boundary fakes, for what the devstack's HDFS cannot be made to do: a NameNode that answers
``StandbyException`` (the devstack runs a single NameNode without HA, and a real one cannot
be made standby there), to prove the failover to the next NameNode; and a NameNode that
redirects to a DataNode that is down (the devstack's DataNode lives in the NameNode's JVM).
Both are loopback HTTP servers answering exactly what HDFS answers.
"""
from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tfk8s_airflow.exceptions import HdfsUnavailableError, MissingInputError
from tfk8s_airflow.hdfschecksum import checksums_match
from tfk8s_airflow.staging.checksums import hdfs_md5_crc_checksum
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.hdfs]
MiB = 1 << 20
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port


def webhdfs(server, urls=None, timeout: float = 5.0) -> WebHdfs:
    return WebHdfs(WebHdfsConfig(urls=tuple(urls or [server.url]), user=server.user,
                                 timeout=timeout))


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def redirect_to_dead_datanode() -> Iterator[str]:
    class Redirect(_Quiet):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(307)
            self.send_header("Location", f"{DEAD}/webhdfs/v1/x?op=OPEN&offset=0")
            self.send_header("Content-Length", "0")
            self.end_headers()

    yield from _serve(Redirect)


@pytest.fixture
def standby_namenode() -> Iterator[str]:
    class Standby(_Quiet):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.dumps({"RemoteException": {
                "exception": "StandbyException", "javaClassName":
                    "org.apache.hadoop.ipc.StandbyException",
                "message": "Operation category READ is not supported in state standby"}})
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    yield from _serve(Standby)


def test_read_streams_the_bytes_and_names_the_datanode(hdfs_server, hdfs_dir):
    data = bytes(range(256)) * (3 * MiB // 256) + b"tail"
    hdfs_server.client().write(f"{hdfs_dir}/f", data=data, overwrite=True)
    hdfs = webhdfs(hdfs_server)
    assert hdfs.streams is not None  # the urllib3 path, not the hdfs package's client
    with hdfs.open_chunks(f"{hdfs_dir}/f", chunk_size=MiB) as chunks:
        pieces = list(chunks)
        datanode = chunks.datanode
    assert b"".join(pieces) == data and max(len(p) for p in pieces) == MiB
    assert datanode and urlsplit(datanode).netloc != urlsplit(hdfs_server.url).netloc
    assert "namenoderpcaddress=" in datanode  # the NameNode's redirect, kept for the checksum
    with hdfs.open_chunks(f"{hdfs_dir}/f", offset=len(data) - 4) as chunks:
        assert b"".join(chunks) == b"tail"


def test_checksum_from_the_datanode_needs_no_namenode(hdfs_server, hdfs_dir):
    data = b"x" * 700_000
    hdfs_server.client().write(f"{hdfs_dir}/f", data=data, overwrite=True)
    live = webhdfs(hdfs_server)
    with live.open_chunks(f"{hdfs_dir}/f") as chunks:
        b"".join(chunks)
        datanode = chunks.datanode
    via_namenode = live.checksum(f"{hdfs_dir}/f")
    assert checksums_match(hdfs_md5_crc_checksum(data), via_namenode)
    # Only a dead NameNode configured: the answer can only have come from the DataNode.
    assert webhdfs(hdfs_server, urls=[DEAD]).checksum(f"{hdfs_dir}/f", datanode) == via_namenode


def test_checksum_falls_back_to_the_namenode_when_the_datanode_is_gone(hdfs_server, hdfs_dir):
    hdfs_server.client().write(f"{hdfs_dir}/f", data=b"abc", overwrite=True)
    hdfs = webhdfs(hdfs_server)
    gone = f"{DEAD}/webhdfs/v1{hdfs_dir}/f?op=OPEN&namenoderpcaddress=127.0.0.1:8020&offset=0"
    assert hdfs.checksum(f"{hdfs_dir}/f", gone) == hdfs.checksum(f"{hdfs_dir}/f")


def test_missing_file_is_a_missing_input(hdfs_server, hdfs_dir):
    with pytest.raises(MissingInputError, match=f"HDFS path does not exist: {hdfs_dir}/nope"), \
            webhdfs(hdfs_server).open_chunks(f"{hdfs_dir}/nope"):
        pass


def test_a_read_left_midway_does_not_poison_the_next(hdfs_server, hdfs_dir):
    """A half-read response's connection is closed, not handed to the next request with
    the rest of the file still in it."""
    client = hdfs_server.client()
    client.write(f"{hdfs_dir}/big", data=b"a" * (4 * MiB), overwrite=True)
    client.write(f"{hdfs_dir}/small", data=b"small", overwrite=True)
    hdfs = webhdfs(hdfs_server)
    for _ in range(3):
        with hdfs.open_chunks(f"{hdfs_dir}/big", chunk_size=64 * 1024) as chunks:
            assert next(iter(chunks)) == b"a" * 65536
        assert hdfs.read_bytes(f"{hdfs_dir}/small") == b"small"
        assert hdfs.checksum(f"{hdfs_dir}/small")["algorithm"].endswith("CRC32C")


def test_standby_namenode_is_passed_over_and_the_live_one_remembered(hdfs_server, hdfs_dir,
                                                                    standby_namenode):
    hdfs_server.client().write(f"{hdfs_dir}/f", data=b"served", overwrite=True)
    hdfs = webhdfs(hdfs_server, urls=[DEAD, standby_namenode, hdfs_server.url])
    assert hdfs.read_bytes(f"{hdfs_dir}/f") == b"served"
    assert hdfs.streams is not None and hdfs.streams.urls[0] == hdfs_server.url


def test_only_standby_namenodes_is_unavailable_not_missing(hdfs_server, hdfs_dir,
                                                           standby_namenode):
    with pytest.raises(HdfsUnavailableError, match="not serving .*StandbyException"):
        webhdfs(hdfs_server, urls=[standby_namenode]).read_bytes(f"{hdfs_dir}/f")
    with pytest.raises(HdfsUnavailableError, match="no WebHDFS NameNode answered") as err:
        webhdfs(hdfs_server, urls=[DEAD, standby_namenode], timeout=2).checksum(f"{hdfs_dir}/f")
    assert DEAD in str(err.value) and "StandbyException" in str(err.value)


def test_a_dead_datanode_is_named_not_taken_for_the_namenodes(hdfs_server,
                                                              redirect_to_dead_datanode):
    hdfs = webhdfs(hdfs_server, urls=[redirect_to_dead_datanode], timeout=2)
    with pytest.raises(HdfsUnavailableError, match=r"DataNode 127.0.0.1:9 did not answer.*"
                                                    r"the NameNode sent the request for /x"):
        hdfs.read_bytes("/x")
