"""``--list-models``: every provider prefix with its bare names, batch API, reasoning option,
families and dated catalog, the registered names and installed plugins, in 80 columns."""
from __future__ import annotations

import re

from cupid.utils.models.listing import model_listing
from cupid.utils.models.registry import _PROVIDERS, registered_models


def block(listing: str, prefix: str) -> str:
    """The lines of the provider whose heading names ``prefix``."""
    blocks = listing.split("\n\n")
    return next(b for b in blocks if re.match(rf"^([\w-]+:, )*{re.escape(prefix)}:", b))


def test_the_listing_names_every_provider_family_and_model_in_80_columns():
    listing = model_listing()
    assert max(len(line) for line in listing.splitlines()) <= 80
    for prefix in _PROVIDERS:
        assert block(listing, prefix)
    openai = block(listing, "openai")
    assert "bare names: gpt-*/o1*/o3*/o4*; batch API: yes; reasoning option:" in openai
    assert re.search(r"gpt-5\.1 +reasoning_effort none/low/medium/high \(default none\)", openai)
    assert re.search(r"\n +gpt-4o-2024-11-20 +gpt-4\.x +2\.50/10\.00 +128K\n", openai)
    assert re.search(r"\n +o3 +o-series +2\.00/8\.00 +200K", openai)
    assert "catalog of 2026-11-23" in openai
    google = block(listing, "google")
    assert re.search(r"gemini-2\.5-pro +2\.5 Pro +1\.25/10\.00 +1,049K", google)
    assert re.search(r"gemini-2\.0-pro-exp-02-05 +no thinking +unpriced", google)
    served = block(listing, "vllm")
    assert served.startswith("local-server:, vllm:") and "batch API: no" in served
    assert "CUPID_LOCAL_SERVER_URL" in served and "bare names: none (prefix needed)" in served
    assert re.search(r"claude-opus-4-7 +adaptive thinking", block(listing, "anthropic"))
    registered = listing.split("Registered models: --model NAME\n", 1)[1]
    for name in registered_models():
        assert f"\n  {name} " in "\n" + registered
    assert listing.rstrip().endswith("Installed plugins (entry points of the cupid.models group): none")


def test_an_installed_plugin_is_listed(tmp_path, monkeypatch):
    info = tmp_path / "cupid_listed_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cupid-listed-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cupid.models]\nlisted-model = listed_plugin:Listed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "group):\n  listed-model = listed_plugin:Listed" in model_listing()

