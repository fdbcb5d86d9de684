"""Credentials in URIs are never printed."""
import pytest

from tfk8s_airflow.redaction import redact_text, redact_uri


@pytest.mark.parametrize("uri,shown", [
    ("https://user:pass@host/a.tgz", "https://***@host/a.tgz"),
    ("https://ghp_TOKEN@github.com/o/r.tgz", "https://***@github.com/o/r.tgz"),
    ("https://h/a.tgz?X-Amz-Signature=abc&X-Amz-Credential=def#frag",
     "https://h/a.tgz?X-Amz-Signature=***&X-Amz-Credential=***#frag"),
    ("hdfs://nn:8020/code/a.tgz", "hdfs://nn:8020/code/a.tgz"),
    ("https://h/p@q/a.tgz", "https://h/p@q/a.tgz"),  # an @ in the path is not userinfo
])
def test_redact_uri(uri, shown):
    assert redact_uri(uri) == shown


def test_redact_text_finds_every_uri():
    text = "fetching 'https://a:b@h1/x' failed, then http://c@h2/y?t=1 too"
    assert redact_text(text) == "fetching 'https://***@h1/x' failed, then http://***@h2/y?t=*** too"
