"""report.html: the summary of report.md, an instance browser and instance pages in one file
(docs/report.md).

The summary (tables with their intervals, figures) is static HTML painted at once. The
instance browser, instance pages and the compare view are drawn by the inlined script
(evaluation/report/templates/report.js) from gzip-compressed chunks decoded on demand: an index (one row per run
and instance, the instances' shared fields and scores, the paired differences), the
prior sessions (each distinct session stored once, however many instances and models show
it, in parts), and each run's steps in parts (payload.py). Instance files do not hold
sessions or ground truth, so those come from the data the runs name in run.json
(``data_source``), or from ``--data_dir`` / ``--data`` (instance_data.py).
"""
from __future__ import annotations

import re
from concurrent.futures import Future
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

from . import statistics as S
from .analysis import Analysis
from .instance_data import load_instance_data
from .payload import Payload
from ..steps.error_type import TYPES as ERROR_TYPES
from ...utils.html_page import chunk_element, chunked_page, esc, gzip_json, markdown_to_html
from ...utils.io import atomic_write_text

REPORT_JS = Path(__file__).resolve().parent / "templates" / "report.js"  # the page's script, the report's own


def _worst_section(payload: Payload, worst: dict) -> str:
    """Links straight to the instance pages of the lowest F1 and judge scores (the index's
    ``worst``)."""
    blocks = []
    for key, title, fmt in (("f1", "Lowest inference F1", lambda v: f"F1 {100 * v:.1f}"),
                            ("j", "Lowest judge score", lambda v: f"score {v:g}")):
        if not worst.get(key, {}).get("rows"):
            continue
        scorer, rows = worst[key]["scorer"], worst[key]["rows"]
        items = []
        for row in rows:
            inst = payload.instances[payload.rows["inst"][row]]
            run = payload.runs[payload.rows["run"][row]]
            value = payload.metrics[scorer][key][row]
            items.append(f'<li><a class="worst-link" href="#i={row}&amp;s={scorer}&amp;from=worst-{key}">{esc(fmt(value))} · '
                         f'{esc(inst["id"])} · {esc(payload.analysis.label(run.model))} '
                         f'({esc(run.setting_label)})</a></li>')
        blocks.append(f'<div class="worst"><h3>{title} <span class="muted">scorer '
                      f'<code>{esc(payload.scorers[scorer])}</code></span></h3><ol>{"".join(items)}</ol></div>')
    n_failed = sum(1 for f in payload.rows["fail"] if f)
    failed = (f'<p><a href="#instances&amp;failed=any">{n_failed} instance result(s) with a failed step</a></p>'
              if n_failed else "<p>No failed step.</p>")
    return (f'<section class="glance"><h2 id="worst-instances">Worst instances</h2>'
            f'<p class="muted">Click one to see why it scored so; every instance is in the '
            f'<a href="#instances">instance browser</a>.</p><div class="worst-grid">{"".join(blocks)}</div>'
            f'{failed}</section>')


def _error_cases_section(payload: Payload) -> str:
    """Table 2's classified inferences, by model and type, each a link to its instance page
    (which shows the classifier's reasoning)."""
    rows = {(run, payload.instances[inst]["id"]): row
            for row, (run, inst) in enumerate(zip(payload.rows["run"], payload.rows["inst"]))}
    blocks = []
    for run_index, classified in payload.classified.items():
        scorer = payload.scorers.index(classified.sample["scorer"]) if classified.sample["scorer"] in payload.scorers else 0
        groups: dict[str, list[str]] = {}
        for instance_id in classified.sample["drawn"]:
            record, row = classified.step(instance_id), rows.get((run_index, instance_id))
            output = (record or {}).get("output") or {}
            kind = "Not classified yet" if record is None else output.get("type") if record["status"] == "done" \
                and output.get("type") in ERROR_TYPES else "Failed"
            f1 = (classified.cases.get(instance_id) or {}).get("f1")
            text = esc(f"F1 {100 * f1:.1f} · {instance_id}" if isinstance(f1, (int, float)) else instance_id)
            groups.setdefault(kind, []).append(
                f'<li><a class="error-case" href="#i={row}&amp;s={scorer}">{text}</a></li>' if row is not None
                else f"<li>{text}</li>")
        run = payload.runs[run_index]
        lists = "".join(f'<h4>{esc(kind)} ({len(groups[kind])})</h4><ol>{"".join(groups[kind])}</ol>'
                        for kind in (*ERROR_TYPES, "Failed", "Not classified yet") if kind in groups)
        blocks.append(f'<div class="worst error-cases"><h3>{esc(payload.analysis.label(run.model))} '
                      f'<span class="muted">classified by <code>{esc(classified.sample["classifier"])}</code></span>'
                      f'</h3>{lists}</div>')
    return (f'<section class="glance"><h3 id="error-type-cases">The classified cases</h3><p class="muted">Each '
            f'drawn inference by model and type: click one to see its sessions, the inferred and true preference '
            f'and the classifier\'s reasoning.</p><div class="worst-grid">{"".join(blocks)}</div></section>')


def _after_section(html: str, anchor: str, insert: str) -> str:
    """``html`` with ``insert`` at the end of the section whose heading has id ``anchor``."""
    start = html.find(f'id="{anchor}"')
    if start < 0:
        return html
    end = html.find("<h2 ", start)
    return html[:end] + insert + html[end:] if end >= 0 else html + insert


def render(payload: Payload, index: dict, report_md: str, figure_dir: Path, notes: list[str], title: str,
           build_id: str | None = None) -> Iterator[str]:
    """The page, in parts (see utils.html_page.chunked_page)."""
    summary_html, headings = markdown_to_html(report_md, figure_dir)
    if payload.classified:
        summary_html = _after_section(summary_html, "error-types-table-2", _error_cases_section(payload))
    toc = "".join(f'<li><a href="#{anchor}">{esc(text)}</a></li>' for level, anchor, text in headings if level == 2)
    note_html = "".join(f'<p class="warning">{esc(n)}</p>' for n in notes)

    def chunks() -> Iterator[str]:
        yield chunk_element("index", gzip_json(index))
        for name, text in payload.chunks:
            yield chunk_element(name, text.result())

    build = f' <span class="muted" id="build">build {esc(build_id)}</span>' if build_id else ""
    body = f"""<header class="top"><span class="brand">CUPID report</span>{build}
<nav><a href="#summary" data-view="summary">Summary</a><a href="#instances" data-view="instances">Instances</a><a href="#compare" data-view="compare">Compare</a></nav>
<span class="muted" id="status"></span></header>
<main>
<section id="view-summary" class="view">{note_html}{_worst_section(payload, index["worst"])}
<nav class="toc"><ul>{toc}</ul></nav>
<article class="markdown">{summary_html}</article></section>
<section id="view-instances" class="view" hidden></section>
<section id="view-instance" class="view" hidden></section>
<section id="view-compare" class="view" hidden></section>
</main>
"""
    return chunked_page(title, body, chunks(), scripts=(REPORT_JS,))


_BUILD = re.compile(r"build `([^`]+)`")


def write_html_report(analysis: Analysis, output_dir: Path, *, data_paths: Iterable[str | Path] | None = None,
                      build_id: str, drawing: Iterable[Future] = ()) -> Path:
    """Write ``output_dir/report.html`` from ``report.md`` (and its figures) in ``output_dir``
    and the runs of ``analysis``; build_report calls it with the cycle collector paused and
    BLAS on one thread. ``build_id``: the build this page belongs to; a report.md of another
    build is said so. The figures' ``drawing`` is waited for once the page's data are made."""
    S.bootstrap_weights.cache_clear()  # the tables' resampling weights (~2 MB each) are done with
    instance_data, notes = load_instance_data(analysis.runs, analysis.results_dir, data_paths)
    for run in analysis.runs:
        notes += run.warnings[:5]
    title = (f"CUPID report · {analysis.results_dir.name} · "
             f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    payload = Payload(analysis, instance_data)
    index = payload.index(notes, title)  # the compare view's paired differences
    for future in drawing:
        future.result()
    report_md = (output_dir / "report.md").read_text(encoding="utf-8")
    found = _BUILD.search(report_md)
    if found is None or found.group(1) != build_id:
        notes.append(f"report.md beside this page is of build {found.group(1) if found else '(none)'}, "
                     f"this page of build {build_id}: build the report again to match them")
    path = output_dir / "report.html"
    atomic_write_text(path, render(payload, index, report_md, output_dir, notes, title, build_id), "latin-1")
    return path
