"""report.html in a real browser: headless Chromium (Debian's package) opens the file from
disk, the tests act on the page like a user and assert on what it shows. Screenshots are
saved under tests/artifacts/ (ignored by git); their paths are printed."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from browser import Browser, find_chromium
from cupid.evaluation import report as R
from cupid.utils.html_page import markdown_to_html
from sample_results import BROKEN, UNSCORABLE, build
from cupid.utils.io import read_json
from repo_paths import ARTIFACTS

# CI (.ci/run) sets CUPID_REQUIRE_BROWSER=1: there a missing browser fails instead of skipping.
REQUIRED = os.environ.get("CUPID_REQUIRE_BROWSER") == "1"
needs_chromium = pytest.mark.skipif(find_chromium() is None and not REQUIRED,
                                    reason="chromium is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The README's offline run on data/sample (scripted answers), then the report."""
    out = tmp_path_factory.mktemp("html")
    results = build(out)
    assert R.main([str(results), "--n_bootstrap", "50"]) == 0
    records = {}
    for path in results.rglob("*.json"):
        data = read_json(path)
        if isinstance(data, dict) and "instance_id" in data:
            records[(data["model"], data["instance_id"])] = data
    return {"results": results, "html": results / "report.html", "records": records}


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None and not REQUIRED:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    with Browser() as b:
        yield b


def shot(browser: Browser, name: str) -> Path:
    path = browser.screenshot(ARTIFACTS / f"report_html_{name}.png", full_page=True)
    print(f"screenshot: {path}")
    return path


def open_report(browser: Browser, path: Path) -> None:
    browser.errors.clear()
    browser.open(path)
    browser.wait_for("window.cupidReport && window.cupidReport.ready")


def texts(browser: Browser, selector: str) -> list[str]:
    return browser.evaluate(f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)")


# ---------------------------------------------------------------------------------------
# The file itself
# ---------------------------------------------------------------------------------------
def test_report_html_is_self_contained(sample):
    html = sample["html"].read_text(encoding="latin-1")  # windows-1252: one character per byte
    assert '<meta charset="windows-1252">' in html
    # Outside the data chunks every character is ASCII (the chunks hold raw gzip bytes).
    assert re.sub(r'<script type="application/octet-stream"[^>]*>[^<]*</script>', "", html).isascii()
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)  # nothing fetched
    assert "<script src" not in html and "<link" not in html
    assert html.count('src="data:image/png;base64,') >= 3           # figures inlined
    assert 'id="chunk-index"' in html and 'id="chunk-sessions-0"' in html and 'id="chunk-run0-0"' in html
    # Instance text lives only in the compressed chunks, never as plain text in the page.
    assert "Cedar &amp; Salt" not in html and "Cedar & Salt" not in html


def test_no_html_flag_and_markdown_subset(tmp_path, sample):
    out = tmp_path / "out"
    assert R.main([str(sample["results"]), "--output", str(out), "--no_figures", "--no_html",
                   "--n_bootstrap", "10"]) == 0
    assert (out / "report.md").exists() and not (out / "report.html").exists()
    body, headings = markdown_to_html("# T\n\n| a | b \\| c |\n|---|---|\n| ↳ paper | `x<y` |\n\n- **bold** item\n\n"
                                      "<b>raw</b> [a link](https://example.org)\n")
    assert '<tr class="paper"><td>↳ paper</td>\n<td><code>x&lt;y</code></td>' in body
    assert "<th>b | c</th>" in body and "<li><strong>bold</strong> item</li>" in body
    assert "&lt;b&gt;raw&lt;/b&gt; [a link](https://example.org)" in body  # HTML and links stay text
    assert headings == [(1, "t", "T")]


# ---------------------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------------------
@needs_chromium
def test_summary_shows_tables_figures_and_worst_instances(sample, browser):
    open_report(browser, sample["html"])
    assert browser.evaluate("document.querySelectorAll('#view-summary table.md').length") >= 4
    assert browser.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
    tables = browser.evaluate("[...document.querySelectorAll('#view-summary table.md')].map(t => t.innerText).join(' ')")
    assert re.search(r"\d+\.\d \[\d+\.\d, \d+\.\d\]", tables)  # estimates with their CIs
    assert len(texts(browser, ".worst-link")) >= 2
    shot(browser, "summary")
    assert browser.errors == []


@needs_chromium
def test_worst_instance_in_two_clicks_shows_why(sample, browser):
    """Open the report, click 'Instances', click the first row: the lowest F1 of the run."""
    open_report(browser, sample["html"])
    browser.click('header nav a[data-view="instances"]')
    browser.wait_for("!!document.querySelector('#instances-table tbody tr')")
    browser.click("#instances-table tbody tr")
    browser.wait_for("!!document.querySelector('#panels .panel')")
    f1s = {k: d["evaluations"]["evaluator"]["inference"]["f1"] for k, d in sample["records"].items()
           if (d["evaluations"].get("evaluator") or {}).get("inference")}
    worst = min(f1s.values())
    assert browser.evaluate("document.querySelector('#panels .f1').textContent") == f"{100 * worst:.1f}"
    instance_id = browser.evaluate("document.querySelector('.inst-head h1').textContent")
    assert any(k[1] == instance_id and v == worst for k, v in f1s.items())
    # Why: every section is there.
    for section in ("sec-request", "sec-truth", "sec-inferred", "sec-recall", "sec-precision",
                    "sec-response", "sec-judge", "sec-steps"):
        assert browser.evaluate(f"!!document.querySelector('.{section}')"), section
    assert browser.evaluate("document.querySelectorAll('details.session').length") == 8
    relevant = browser.evaluate("[...document.querySelectorAll('details.session')].map(d => d.dataset.relevant === '1')")
    assert any(relevant) and not all(relevant)
    assert browser.evaluate("[...document.querySelectorAll('details.session')].every(d => !d.open)")
    # Labels beside both checklists, as many as entries.
    labels = texts(browser, "#panels .sec-recall td.lab")
    assert labels and all(label in ("Fully Covered", "Partially Covered", "Not Covered") for label in labels)
    assert texts(browser, "#panels .sec-precision td.lab")
    assert "Tokens" in browser.evaluate("document.querySelector('#panels .metrics').innerText")
    shot(browser, "worst_instance")
    assert browser.errors == []


@needs_chromium
def test_filters_sort_and_search(sample, browser):
    open_report(browser, sample["html"])
    browser.evaluate("location.hash = 'instances'")
    browser.wait_for("!!document.querySelector('#instances-table tbody tr')")
    total = len(sample["records"])
    assert browser.evaluate("document.querySelectorAll('#instances-table tbody tr').length") == total

    def rows():
        return browser.evaluate("document.querySelectorAll('#instances-table tbody tr').length")

    def choose(selector, value):
        browser.evaluate(f"(() => {{ const s = document.querySelector('{selector}'); s.value = {json.dumps(value)};"
                         f" s.dispatchEvent(new Event('change')); }})()")

    choose("#f-type", "contrastive")
    assert rows() == sum(1 for k in sample["records"] if k[1].endswith("__contrastive"))
    choose("#f-type", "")
    choose("#f-model", BROKEN)
    assert rows() == sum(1 for k in sample["records"] if k[0] == BROKEN)
    choose("#f-model", "")
    choose("#f-failed", "judge")
    assert rows() == 1 and texts(browser, "#instances-table tbody td.fail") == ["judge"]
    choose("#f-failed", "")
    # F1 range (percent) under the evaluator's scorer.
    browser.type_into("#f-f1min", "50")
    expected = sum(1 for d in sample["records"].values()
                   if ((d["evaluations"].get("evaluator") or {}).get("inference") or {}).get("f1", -1) >= 0.5)
    assert rows() == expected
    browser.evaluate("document.querySelector('#f-reset').click()")
    # Sort by judge, descending after two clicks.
    browser.click('#instances-table th[data-key="j"]')
    browser.click('#instances-table th[data-key="j"]')
    judges = [t for t in texts(browser, "#instances-table tbody tr td:nth-child(8)") if t != "—"]
    assert judges == sorted(judges, key=float, reverse=True) and len(set(judges)) > 1
    browser.type_into("#f-q", "noor")
    assert rows() == sum(1 for k in sample["records"] if "noor" in k[1])
    shot(browser, "browser_filtered")
    assert browser.errors == []


@needs_chromium
def test_side_by_side_and_failed_step_raw_answers(sample, browser):
    open_report(browser, sample["html"])
    failed = [k for k, d in sample["records"].items()
              if (d["evaluations"]["evaluator"]["steps"].get("judge") or {}).get("status") == "failed"]
    assert len(failed) == 1 and failed[0][0] == BROKEN
    browser.evaluate("location.hash = 'instances&failed=judge'")
    browser.wait_for("document.querySelectorAll('#instances-table tbody tr').length === 1")
    browser.click("#instances-table tbody tr")
    browser.wait_for("!!document.querySelector('#panels .panel')")
    raw = browser.evaluate("document.querySelector('.sec-steps details.raw').innerText")
    assert UNSCORABLE in raw
    assert browser.evaluate("document.querySelector('.sec-steps details.raw').open")
    assert "Judging failed" in browser.evaluate("document.querySelector('.sec-judge').innerText")
    # Side by side with model-a under PrefMatcher on the same instance.
    option = browser.evaluate("[...document.querySelectorAll('#pick-b option')].find(o => o.text.includes('prefmatcher')).value")
    browser.evaluate(f"(() => {{ const s = document.querySelector('#pick-b'); s.value = '{option}';"
                     f" s.dispatchEvent(new Event('change')); }})()")
    browser.wait_for("document.querySelectorAll('#panels .panel').length === 2")
    heads = texts(browser, "#panels .panel > h2")
    assert heads[0].startswith(BROKEN) and heads[1].startswith("model-a") and "prefmatcher" in heads[1]
    assert browser.evaluate("document.querySelector('#panels').classList.contains('two')")
    shot(browser, "side_by_side")
    assert browser.errors == []


@needs_chromium
def test_report_without_instance_data_still_works(sample, tmp_path, browser):
    """A results tree whose data source is gone: the page says so and shows the rest."""
    results = tmp_path / "results"
    for path in sample["results"].rglob("*.json"):
        target = results / path.relative_to(sample["results"])
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text()
        if path.name == "run.json":
            text = json.dumps({**json.loads(text), "data_source": str(tmp_path / "gone")})
        target.write_text(text)
    assert R.main([str(results), "--no_figures", "--n_bootstrap", "10"]) == 0
    open_report(browser, results / "report.html")
    assert "not found" in browser.evaluate("document.querySelector('#view-summary .warning').textContent")
    browser.evaluate("location.hash = 'i=0&s=0'")
    browser.wait_for("!!document.querySelector('#panels .panel')")
    assert "not found" in browser.evaluate("document.querySelector('#sessions').innerText")
    assert browser.errors == []


# ---------------------------------------------------------------------------------------
# python -m synthesis.report
# ---------------------------------------------------------------------------------------
@needs_chromium
def test_synthesis_report_shows_personas_dialogues_and_instances(fake_server, tmp_path, browser):
    from cupid.synthesis.pipeline import SynthesisConfig, run_synthesis
    from cupid.synthesis.report import main as synthesis_report
    from synthesis_responder import ScriptedSynthesis

    fake_server.responder = ScriptedSynthesis()
    url = fake_server.openai_base_url
    out = tmp_path / "synthetic"
    run_synthesis(SynthesisConfig(output_dir=out, n_personas=2, persona_seeds="bundled", n_workers=4,
                                  show_progress=False, model=f"vllm:synth@{url}", user_model=f"vllm:user@{url}",
                                  assistant_model=f"vllm:assistant@{url}", decomposer_model=f"vllm:decomposer@{url}"))
    assert synthesis_report([str(out)]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script src" not in html and not re.search(r"""(src|href)=["']https?://""", html)
    browser.errors.clear()
    browser.open(out / "report.html")
    personas = read_json(out / "personas.json")["personas"]
    assert texts(browser, "section.persona > h2") == [p["persona_id"] for p in personas]
    assert browser.evaluate("document.querySelectorAll('section.persona table.factors tr').length") == 2 * (8 + 1)
    assert browser.evaluate("document.querySelectorAll('details.session').length") == 2 * 13
    assert browser.evaluate("document.querySelectorAll('tr.instance').length") == 6
    # A dialogue: the simulator's scores and the checklist items it referred to.
    pid = personas[0]["persona_id"]
    dialogue = read_json(out / "personas" / pid / "dialogues" / "01.json")
    browser.evaluate(f"document.querySelector('#{pid} details.session[data-session=\"1\"]').open = true")
    shown = browser.evaluate(f"document.querySelector('#{pid} details.session[data-session=\"1\"]').innerText")
    for turn in dialogue["user_turns"]:
        assert f"Simulator score: {turn['score']}/10" in shown
        assert turn["raw"].split("#### Your Message", 1)[1].strip() in shown
    assert "Evaluation, selected items and thinking" in shown
    shot(browser, "synthesis")
    # On a phone (390 px) wide tables scroll in their own box, never the page.
    browser.viewport(390, 844, mobile=True)
    try:
        assert browser.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        shot(browser, "synthesis_phone")
    finally:
        browser.viewport(1400, 1000)
    assert browser.errors == []
    assert synthesis_report([str(tmp_path / "nothing")]) == 1


def test_chunks_are_gzip_of_the_json():
    import gzip

    from cupid.utils import html_page

    value = {"text": "Ünïcode < & \r\n\x00 " * 50, "n": [1, 2.5, None]}
    text = html_page.gzip_json(value)
    assert "<" not in text and "\r" not in text and "\x00" not in text
    # report.js's chunkBytes: 0x01 then the byte + 0x40 stands for that byte
    data = re.sub(b"\x01(.)", lambda m: bytes([m.group(1)[0] - 0x40]), text.encode("latin-1"), flags=re.S)
    assert json.loads(gzip.decompress(data)) == value
