"""The cache key's format is pinned: a key that changes between versions silently orphans
every answer already paid for in a user's cache. A deliberate change of format updates
these digests knowingly (and says so to users: their caches start empty)."""
from __future__ import annotations

import dataclasses

import pytest

from cupid.utils.models.request import Request, normalise_endpoint

REQUEST = Request("Système", ({"role": "user", "content": "Café ☕"},), temperature=0.0, max_tokens=16,
                  json_schema={"type": "object", "properties": {"b": {}, "a": {}}})


def test_cache_key_digests_are_stable():
    assert REQUEST.cache_key("gpt-4o") == \
        "e25245e074358545485a3924837200b9f017319ec39d7e009ad3fe5b4929f381"
    assert REQUEST.cache_key("gpt-4o", "openai", "https://api.openai.com/v1") == \
        "3392e7818b612abb66af8a99e5dc054eba39bcd38b2390801bb9fde5dc1fec7d"
    assert dataclasses.replace(REQUEST, seed=7).cache_key("gpt-4o") == \
        "f4ec623b917ec3862bea4fb72b43ec8b33b975984aea4cbc4c58807b04e00cf9"


def test_cache_key_does_not_depend_on_dict_order():
    reordered = dataclasses.replace(REQUEST, json_schema={"properties": {"a": {}, "b": {}}, "type": "object"})
    assert reordered.cache_key("gpt-4o") == REQUEST.cache_key("gpt-4o")


@pytest.mark.parametrize("url, normalised", [
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
    ("HTTP://Example.COM:80/v1//", "http://example.com/v1"),
    ("https://[::1]:443/v1", "https://[::1]/v1"),
    ("https://[::1]:8443/v1", "https://[::1]:8443/v1"),
    ("http://h/vX/", "http://h/vX"),
    ("http://h:1/v1?x=1", "http://h:1/v1?x=1"),
    ("https://user:pw@h/v1", "https://h/v1"),
    ("http://user@/v1", "http:///v1"),
    ("http://b/v1, http://a/v1/", "http://a/v1,http://b/v1"),
    ("localhost:8000/", "localhost:8000"),   # no scheme: kept as written, less its trailing slash
    ("/v1/", "/v1"),
    ("proxy/X/", "proxy/X"),
    ("", None),
    (None, None),
])
def test_normalise_endpoint(url, normalised):
    assert normalise_endpoint(url) == normalised
