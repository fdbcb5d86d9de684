"""The URIs of what the package reads and writes, and their OpenLineage dataset names: one rule for both.

Why one module: an Asset's URI (Airflow's ``Asset(uri=...)``, an asset event's extra) and the dataset an
OpenLineage event names must say the same thing, or a lineage graph shows the staged partition twice.

- An HDFS partition: ``hdfs://<namenode host>:<port>/<path>``, the NameNode as the WebHDFS connection names
  it (its first URL's host and port). OpenLineage: namespace ``hdfs://<host>:<port>``, name the path without
  its leading slash, as the apache-hdfs provider converts the same URIs (so either provider's converter
  gives one dataset).
- The volume copy, the model directory and the promoted model: paths on the shared volume, as the pods see
  them (the staging result's ``data_root``, a volume's ``host_path``, the serving root), ``file://<path>``.
  OpenLineage: namespace ``file``, name the path, as Airflow's common-io provider converts ``file`` URIs.

Pure (no Airflow): :mod:`tfk8s_airflow.lineage` builds the Asset and OpenLineage objects from these.
"""

from __future__ import annotations

import posixpath
from urllib.parse import SplitResult, quote, unquote, urlsplit

__all__ = ["FILE", "HDFS", "dataset_name", "hdfs_uri", "location_uri", "sanitize_hdfs_uri", "volume_uri"]

HDFS = "hdfs"
FILE = "file"


def _clean(path: str) -> str:
    """An absolute, normalized POSIX path (no ``..``, no trailing slash), percent-encoded for a URI."""
    path = posixpath.normpath("/" + str(path).lstrip("/"))
    return quote(path, safe="/=*?,:@+-._~")


def hdfs_uri(namenode: str, path: str) -> str:
    """``hdfs://host:port/path`` of ``path`` on the NameNode ``namenode`` (a WebHDFS URL such as
    ``http://nn:9870``, or ``host:port``). ValueError for a NameNode without a host."""
    netloc = urlsplit(namenode if "://" in namenode else f"//{namenode}").netloc.rpartition("@")[2]
    if not netloc:
        raise ValueError(f"no NameNode host in {namenode!r}")
    return f"{HDFS}://{netloc}{_clean(path)}"


def volume_uri(path: str) -> str:
    """``file:///path`` of a path on the shared volume (absolute, as the pods see it)."""
    if not str(path).startswith("/"):
        raise ValueError(f"a volume path must be absolute, got {path!r}")
    return f"{FILE}://{_clean(path)}"


def location_uri(location: str, namenode: str | None = None) -> str | None:
    """The URI of a location as the package writes them: ``hdfs://...`` kept, ``hdfs:/path`` (or ``hdfs:///path``)
    on ``namenode``, an absolute path on the volume; None when it cannot be named (an HDFS path without a
    NameNode, a relative path)."""
    text = str(location)
    if text.startswith(f"{HDFS}://") and urlsplit(text).netloc:
        return f"{HDFS}://{urlsplit(text).netloc}{_clean(unquote(urlsplit(text).path))}"
    if text.startswith(f"{HDFS}:"):
        return hdfs_uri(namenode, text[len(HDFS) + 1:]) if namenode else None
    if text.startswith(f"{FILE}://"):
        return volume_uri(unquote(urlsplit(text).path))
    return volume_uri(text) if text.startswith("/") else None


def dataset_name(uri: str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of one of these URIs. ValueError for another scheme."""
    parts = urlsplit(uri)
    path = unquote(parts.path)
    if parts.scheme == HDFS:
        return f"{HDFS}://{parts.netloc}", path.lstrip("/") or "/"
    if parts.scheme == FILE:
        return (f"{FILE}://{parts.netloc}" if parts.netloc else FILE), path
    raise ValueError(f"not an hdfs:// or file:// URI: {uri!r}")


def sanitize_hdfs_uri(uri: SplitResult) -> SplitResult:
    """Airflow's check of an ``hdfs://`` Asset URI (the provider metadata's ``asset-uris`` handler): it names a
    NameNode and a path."""
    if not uri.netloc:
        raise ValueError("an hdfs:// Asset URI must name the NameNode: hdfs://<host>:<port>/<path>")
    if not uri.path or uri.path == "/":
        raise ValueError("an hdfs:// Asset URI must name a path: hdfs://<host>:<port>/<path>")
    return uri

