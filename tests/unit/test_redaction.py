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


def test_a_uri_in_a_sentence_ends_before_its_full_stop():
    assert redact_text("could not fetch https://h/a.tgz?sig=abc.") == "could not fetch https://h/a.tgz?sig=***."


def test_the_secrets_of_named_uris_are_hidden_anywhere_in_the_text():
    uri = "https://bob:hunter22@h/a.tgz?X-Amz-Signature=AMZ44444&n=1"
    body = "denied: signature AMZ44444 for bob (password hunter22)"
    assert redact_text(body, uri) == "denied: signature *** for bob (password ***)"
    assert redact_text(body) == body  # no URI named: only URIs in the text are redacted
