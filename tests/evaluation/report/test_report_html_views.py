"""report.html's compare view, navigation, URL state, Markdown safety and phone layout, in
headless Chromium (see test_report_html.py). Each test saves a screenshot under
tests/artifacts/."""
from __future__ import annotations

import json
import re
import shutil

from cupid.evaluation import report as R
from cupid.evaluation.report import statistics as S
from cupid.evaluation.report.analysis import Analysis
from cupid.evaluation.report.format import fmt_ci, fmt_p, fmt_pct, fmt_score
from cupid.evaluation.report.html_report import REPORT_JS
from cupid.evaluation.report.payload import Payload
from cupid.evaluation.report.results import load_runs, outcome
from tests.evaluation.report.test_report_html import browser, needs_chromium, open_report, sample, shot, texts  # noqa: F401  (fixtures)
from cupid.utils.html_page import markdown_to_html
from cupid.utils.io import read_json

HOSTILE = ("### Why it scored so\n\n**Bold claim** and *an aside*, with `inline <b>code</b>`.\n\n"
           "- first <script>window.__pwned = 'script'</script>\n- second <img src=x onerror=\"window.__pwned = 'img'\">\n\n"
           "```\n<script>window.__pwned = 'fence'</script>\n```\n"
           "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe> <a href=\"javascript:window.__pwned='a'\">link</a>")


def goto(browser, hash_: str, ready: str) -> None:
    browser.evaluate(f"location.hash = {json.dumps(hash_)}")
    browser.wait_for(ready)


def choose(browser, selector: str, value: str) -> None:
    browser.evaluate(f"(() => {{ const s = document.querySelector({json.dumps(selector)}); s.value = {json.dumps(value)};"
                     f" s.dispatchEvent(new Event('change')); }})()")


# ---------------------------------------------------------------------------------------
# Without a browser
# ---------------------------------------------------------------------------------------
def test_fenced_commands_become_copyable_blocks(sample):
    body, _ = markdown_to_html("- **Table 1** lacks x.\n\n  ```\n  python -m a --x <1>\n  python -m b\n  ```\n\nafter")
    assert ('<div class="code-block"><pre><code>python -m a --x &lt;1&gt;\npython -m b</code></pre>'
            '<button type="button" class="copy">Copy</button></div>') in body
    html = sample["html"].read_text(encoding="latin-1")
    assert html.count('class="code-block"') >= 1 and "<code>cupid-eval" in html


def test_worst_ties_go_round_the_runs(sample):
    payload = Payload(Analysis(sample["results"]), {})
    k = payload.primary("inference")
    values = payload.metrics[k]["f1"]
    for i in range(len(values)):  # every scored row ties at 0
        values[i] = 0.0 if values[i] is not None else None
    worst = payload.worst("f1", k, n=4)
    by_run = [payload.rows["run"][i] for i in worst]
    assert len(set(by_run)) == len({payload.rows["run"][i] for i, v in enumerate(values) if v is not None})
    values[worst[-1]] = -1.0  # a strictly lower value still comes first, whatever its run
    assert payload.worst("f1", k, n=4)[0] == worst[-1]


# ---------------------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------------------
@needs_chromium
def test_compare_view_shows_the_summary_numbers_and_opens_instances(sample, browser):
    open_report(browser, sample["html"])
    # The summary's model-a vs model-b F1 row links to its compare view.
    rows = browser.evaluate("[...document.querySelectorAll('#paired-differences ~ .table-wrap tbody tr')]"
                            ".map(tr => [...tr.cells].map(td => td.innerText))")
    f1_row = next(r for r in rows if r[0] == "model-a" and r[1] == "model-b" and r[2] == "F1 (micro)")
    index = rows.index(f1_row)
    browser.click(f"#paired-differences ~ .table-wrap tbody tr:nth-child({index + 1}) a.compare-link")
    browser.wait_for("!!document.querySelector('#compare-table tbody tr')")
    shown = browser.evaluate("[...document.querySelector('#cmp-paired tr[data-metric=f1]').cells].map(td => td.innerText)")
    assert shown[1:6] == [f1_row[4], f1_row[5], f1_row[6], f1_row[7], f1_row[3]]
    # ... and they are statistics.py's paired bootstrap of the per-instance files, resampling personas.
    runs = {r.model: r for r in load_runs(sample["results"])}
    for task, metric, key, fmt in (("inference", "micro_f1", "f1", fmt_pct), ("generation", "mean", "j", fmt_score)):
        a, b = (outcome(runs[m], "evaluator", task).values for m in ("model-a", "model-b"))
        personas = {i: runs["model-a"].instances[i]["persona_id"] for i in a}
        d = S.paired_bootstrap(a, b, metric, clusters=personas, n_bootstrap=50, seed=0)
        cells = browser.evaluate(f"[...document.querySelector('#cmp-paired tr[data-metric={key}]').cells].map(td => td.innerText)")
        assert cells[1:6] == [fmt(d.value_a), fmt(d.value_b), fmt_ci(S.Estimate(d.difference, d.low, d.high, d.n), fmt),
                              fmt_p(d.p_value, 50), str(d.n)]
    # Counts of A better / tie / B better add up to the shared instances scored on both.
    f1 = {(m, i): d["evaluations"]["evaluator"]["inference"]["f1"] for (m, i), d in sample["records"].items()
          if (d["evaluations"].get("evaluator") or {}).get("inference")}
    shared = [i for (m, i) in f1 if m == "model-a" and ("model-b", i) in f1]
    diffs = {i: f1[("model-a", i)] - f1[("model-b", i)] for i in shared}
    counts = browser.evaluate("[...document.querySelectorAll('#cmp-counts .count b')].map(b => +b.textContent)")
    assert counts == [sum(d > 1e-9 for d in diffs.values()), sum(abs(d) <= 1e-9 for d in diffs.values()),
                      sum(d < -1e-9 for d in diffs.values())]
    # Filter "B better", sorted by ΔF1 ascending: B's biggest wins first; the URL holds the state.
    choose(browser, "#cmp-who", "b")
    got = [float(t) for t in texts(browser, "#compare-table tbody td:nth-child(5)")]
    assert len(got) == counts[2] and got == sorted(got) and all(g < 0 for g in got)
    assert "who=b" in browser.evaluate("location.hash")
    assert browser.evaluate("document.querySelectorAll('svg.scatter .pt').length") == counts[2]
    shot(browser, "compare")
    # A row opens both runs side by side; previous/next walk the compared list.
    first_id = texts(browser, "#compare-table tbody tr:first-child td:first-child")[0]
    browser.click("#compare-table tbody tr:first-child td:nth-child(2)")
    browser.wait_for("document.querySelectorAll('#panels .panel').length === 2")
    assert browser.evaluate("document.querySelector('.inst-head h1').textContent") == first_id
    heads = texts(browser, "#panels .panel > h2")
    assert heads[0].startswith("model-a") and heads[1].startswith("model-b")
    assert f"1 of {counts[2]}" in browser.evaluate("document.querySelector('.list-nav').innerText")
    if counts[2] > 1:
        browser.click("#next")
        browser.wait_for(f"document.querySelector('.list-nav').innerText.includes('2 of {counts[2]}')")
        assert browser.evaluate("document.querySelectorAll('#panels .panel').length") == 2
    # Back to the compare view with its filter.
    browser.evaluate("document.querySelector('.list-nav a').click()")
    browser.wait_for("!document.getElementById('view-compare').hidden && location.hash.startsWith('#compare')")
    assert browser.evaluate("document.querySelector('#cmp-who').value") == "b"
    assert len(texts(browser, "#compare-table tbody tr")) == counts[2]
    assert browser.errors == []


@needs_chromium
def test_url_state_navigation_and_every_run_of_an_instance(sample, browser):
    open_report(browser, sample["html"])
    goto(browser, "instances", "!!document.querySelector('#instances-table tbody tr')")
    choose(browser, "#f-type", "contrastive")
    browser.click('#instances-table th[data-key="j"]')
    state_hash = browser.evaluate("location.hash")
    assert "type=contrastive" in state_hash and "sort=j" in state_hash
    expected = browser.evaluate("[...document.querySelectorAll('#instances-table tbody tr')].map(tr => tr.dataset.row)")
    # The URL alone restores the view: a fresh load shows the same rows in the same order.
    browser.open("about:blank")
    browser.open(sample["html"].resolve().as_uri() + state_hash)
    browser.wait_for("window.cupidReport && window.cupidReport.ready && !!document.querySelector('#instances-table tbody tr')")
    assert browser.evaluate("document.querySelector('#f-type').value") == "contrastive"
    assert browser.evaluate("[...document.querySelectorAll('#instances-table tbody tr')].map(tr => tr.dataset.row)") == expected
    # Open the second row: previous and next walk the filtered list.
    browser.click("#instances-table tbody tr:nth-child(2) td:nth-child(2)")
    browser.wait_for("!!document.querySelector('#panels .panel')")
    assert f"2 of {len(expected)}" in browser.evaluate("document.querySelector('.list-nav').innerText")
    browser.click("#prev")
    browser.wait_for(f"document.querySelector('#panels .panel').dataset.row === '{expected[0]}'")
    browser.click("#next")
    browser.wait_for(f"document.querySelector('#panels .panel').dataset.row === '{expected[1]}'")
    # Every run that has this instance, with its scores; one click puts one beside.
    instance_id = browser.evaluate("document.querySelector('.inst-head h1').textContent")
    listed = browser.evaluate("[...document.querySelectorAll('.sec-runs tr')].slice(1).map(tr => [...tr.cells].map(td => td.innerText))")
    expected_runs = {}
    for (model, iid), data in sample["records"].items():
        if iid == instance_id:
            for scorer, ev in data["evaluations"].items():
                f1 = (ev.get("inference") or {}).get("f1")
                expected_runs[(model, scorer)] = "—" if f1 is None else f"{100 * f1:.1f}"
    assert {(row[0].split(" · ")[0], row[1]): row[2] for row in listed} == expected_runs
    browser.evaluate("document.querySelector('.sec-runs a.beside').click()")
    browser.wait_for("document.querySelectorAll('#panels .panel').length === 2")
    assert "from=instances" in browser.evaluate("location.hash")
    shot(browser, "navigation")
    # "← Instances" returns to the filtered, sorted list.
    browser.evaluate("document.querySelector('.list-nav a').click()")
    browser.wait_for("!!document.querySelector('#instances-table tbody tr')")
    assert browser.evaluate("[...document.querySelectorAll('#instances-table tbody tr')].map(tr => tr.dataset.row)") == expected
    # The worst list: its links carry the list, so previous/next walk it.
    goto(browser, "summary", "!document.getElementById('view-summary').hidden")
    n_worst = len(texts(browser, "#view-summary .worst:first-child .worst-link"))
    browser.click(".worst-link")
    # (the previous instance page is still in the DOM until the new one replaces it)
    browser.wait_for(f"!document.getElementById('view-instance').hidden && !!document.querySelector('.list-nav') && "
                     f"document.querySelector('.list-nav').innerText.includes('1 of {n_worst} in the lowest F1')")
    # Each command block of "What this report cannot show yet" copies its commands.
    commands = browser.evaluate("document.querySelector('.code-block pre').textContent")
    assert commands.count("cupid-eval") == len(commands.splitlines()) >= 1
    browser.evaluate("document.querySelector('.code-block .copy').click()")
    browser.wait_for("document.querySelector('.code-block .copy').textContent !== 'Copy'")
    if browser.evaluate("document.querySelector('.code-block .copy').textContent") != "Copied":
        assert browser.evaluate("window.getSelection().toString()") == commands
    # Anchors land below the sticky header.
    goto(browser, "paired-differences", "!document.getElementById('view-summary').hidden")
    browser.wait_for("document.getElementById('paired-differences').getBoundingClientRect().top < 200")
    header = browser.evaluate("document.querySelector('header.top').getBoundingClientRect().bottom")
    assert browser.evaluate("document.getElementById('paired-differences').getBoundingClientRect().top") >= header
    assert browser.errors == []


@needs_chromium
def test_model_text_is_markdown_and_never_markup(sample, tmp_path, browser):
    """A hostile answer: no script runs, no element it names exists; its Markdown is drawn."""
    results = tmp_path / "results"
    shutil.copytree(sample["results"], results)
    target = None
    for path in sorted(results.rglob("*.json")):
        data = read_json(path)
        if isinstance(data, dict) and data.get("model") == "model-a" and "instance_id" in data:
            data["steps"]["infer"]["output"]["preference"] = HOSTILE
            data["evaluations"]["evaluator"]["steps"]["judge"]["output"]["analysis"] = HOSTILE
            path.write_text(json.dumps(data))
            target = data["instance_id"]
            break
    assert target is not None
    assert R.main([str(results), "--no_figures", "--n_bootstrap", "10"]) == 0
    open_report(browser, results / "report.html")
    goto(browser, "instances", "!!document.querySelector('#instances-table tbody tr')")
    browser.type_into("#f-q", target + " model-a")
    browser.wait_for("document.querySelectorAll('#instances-table tbody tr').length === 1")
    browser.click("#instances-table tbody tr td:nth-child(2)")
    browser.wait_for("!!document.querySelector('#panels .sec-judge .md-text')")
    for section in (".sec-judge", ".sec-inferred"):
        box = f"document.querySelector('#panels {section} .md-text')"
        assert browser.evaluate(f"{box}.querySelector('.md-h').textContent") == "Why it scored so"
        assert browser.evaluate(f"{box}.querySelector('strong').textContent") == "Bold claim"
        assert browser.evaluate(f"{box}.querySelector('em').textContent") == "an aside"
        assert browser.evaluate(f"{box}.querySelectorAll('li').length") == 2
        assert browser.evaluate(f"{box}.querySelector('p code').textContent") == "inline <b>code</b>"
        assert browser.evaluate(f"{box}.querySelector('pre code').textContent") == "<script>window.__pwned = 'fence'</script>"
        assert "<img src=x onerror=" in browser.evaluate(f"{box}.innerText")
    assert browser.evaluate("document.querySelectorAll('#view-instance script, #view-instance img, #view-instance iframe, "
                            "#view-instance .md-text b, #view-instance a[href^=javascript]').length") == 0
    browser.evaluate("for (const a of document.querySelectorAll('#view-instance .md-text *')) a.click && a.click()")
    browser.evaluate("new Promise(r => setTimeout(r, 300))")
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    shot(browser, "markdown_safety")
    assert browser.errors == []


@needs_chromium
def test_phone_width_has_no_page_wide_scroll(sample, browser):
    open_report(browser, sample["html"])
    browser.viewport(390, 844, mobile=True)
    try:
        def overflow() -> int:
            return browser.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")

        browser.evaluate("location.hash = 'summary'")
        assert browser.evaluate("document.documentElement.clientWidth") == 390
        assert overflow() <= 0
        # Wide tables scroll in their own box; figures keep a legible width in theirs.
        assert browser.evaluate("[...document.querySelectorAll('#view-summary .table-wrap')].some(w => w.scrollWidth > w.clientWidth)")
        assert browser.evaluate("Math.min(...[...document.querySelectorAll('#view-summary figure img')].map(i => i.getBoundingClientRect().width))") >= 600
        shot(browser, "phone_summary")
        goto(browser, "instances", "!!document.querySelector('#instances-table tbody tr')")
        assert overflow() <= 0
        goto(browser, "i=0&s=0", "!!document.querySelector('#panels .panel')")
        browser.evaluate("document.querySelector('#panels .sec-steps details.raw') && (document.querySelector('#panels .sec-steps details.raw').open = true)")
        assert overflow() <= 0
        shot(browser, "phone_instance")
        goto(browser, "compare", "!!document.querySelector('#compare-table tbody tr')")
        assert overflow() <= 0
        shot(browser, "phone_compare")
    finally:
        browser.viewport(1400, 1000)
    assert browser.errors == []


@needs_chromium
def test_every_byte_value_survives_the_page(tmp_path, browser):
    """The chunks are raw bytes in a windows-1252 page: the HTML parser's changes (NUL, CR,
    '<') and the encoding's 0x80-0x9F characters must all come back as the bytes written."""
    from cupid.utils.html_page import byte_text, chunk_element, chunked_page
    from cupid.utils.io import atomic_write_text

    data = bytes(range(256)) + b"</script><!--\r\n\r\x00\x01" + bytes(range(255, -1, -1))
    path = tmp_path / "bytes.html"
    atomic_write_text(path, chunked_page("bytes · ünïcode", "<p>café ↳</p>", [chunk_element("x", byte_text(data))],
                                         scripts=(REPORT_JS,)), "latin-1")
    browser.errors.clear()
    browser.open(path)
    got = browser.evaluate("Array.from(window.cupidReport.chunkBytes(document.getElementById('chunk-x').textContent))")
    assert bytes(got) == data
    assert browser.evaluate("document.querySelector('p').textContent") == "café ↳"
    assert browser.evaluate("document.title") == "bytes · ünïcode"
    browser.errors.clear()  # the page has no index chunk: its status line says so


def test_every_chunk_reads_back(sample):
    """Each chunk of the payload (compressed on threads) reads back as an instance page's
    details or a part of the sessions."""
    import gzip

    def read_chunk(text: str):  # report.js's chunkBytes, then the gzip member's JSON
        data = re.sub(b"\x01(.)", lambda m: bytes([m.group(1)[0] - 0x40]), text.encode("latin-1"), flags=re.S)
        return json.loads(gzip.decompress(data))

    payload = Payload(Analysis(sample["results"]), {})
    details = {name: read_chunk(text.result()) for name, text in payload.chunks}
    some_run = next(v for k, v in details.items() if k.startswith("run"))
    assert all("steps" in detail and "evaluations" in detail for detail in some_run.values())
