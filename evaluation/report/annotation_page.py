"""An annotation page in the style of the paper's Figure 12: one preference-checklist pair
at a time, the preference beside its entries, each rated Fully, Partially or Not Covered;
the labels saved by download as the file ``cupid-match-agreement score`` reads
(docs/match_agreement.md). One self-contained HTML file (utils/html_page.py's annotation kit,
the script utils/templates/annotate.js): no server; the page keeps the annotator's progress in
the browser's local storage, so a reload loses nothing.
"""
from __future__ import annotations

import hashlib
import random
from pathlib import Path

import orjson

from .agreement import LABELS, Pair, scorer_pairs
from ...utils.csv_file import INERT_STARTS
from ...utils.html_page import annotation_page, esc, radios, script_json
from ...utils.io import atomic_write_text

# The instructions of the paper's Figure 12 (Kim et al., COLM 2025, Appendix A.1).
INSTRUCTIONS = """
<p>In this task, you will be presented with Checklist and User Preference. The preference describes an aspect of
AI outputs that will be assessed and should be met in order to satisfy a user. The checklist contains questions that
are used to evaluate more specific aspects of the AI outputs.</p>
<p>On the left, you will see the preference. On the right, you will see each entry from the checklist. You should
determine whether each checklist entry is covered by the preference.</p>
<p><b>Covered</b> = Assessing whether an AI response satisfies a preference will evaluate or consider the same or
similar aspects as evaluating the response on the checklist question, even if the question and preference use
different wording or phrasing.</p>
<ol>
<li><b>Fully Covered:</b> The preference fully covers or evaluates the checklist entry. Evaluating on the preference
will also evaluate the checklist entry.</li>
<li><b>Partially Covered:</b> The preference partially covers or evaluates the checklist entry. Evaluating on the
preference may evaluate some aspects of the checklist entry.</li>
<li><b>Not Covered:</b> The preference does not cover or evaluate the checklist entry.</li>
</ol>
<p>A preference and checklist entry can refer to the subject matter differently (e.g., "response" vs "report") but
still evaluate the same aspects. Ignore the differences in wording and focus on the underlying aspects being
evaluated.</p>"""

STYLE = """<style>
.task .pair { display: grid; grid-template-columns: 1fr 1.4fr; gap: 16px; align-items: start; }
.task .preference { font-size: 15px; background: var(--soft); }
.task ol.entries { padding-left: 0; list-style: none; margin: 0; }
.task .question { color: var(--muted); margin: 4px 0; } .task .choices label { white-space: nowrap; }
@media (max-width: 760px) { .task .pair { grid-template-columns: 1fr; } }
</style>
"""


def sample_pairs(results_dir: str | Path, n_pairs: int, seed: int = 0) -> list[Pair]:
    """``n_pairs`` distinct pairs (by content) that some scorer under ``results_dir`` labelled,
    drawn with ``seed``; all of them when there are fewer."""
    pairs: dict[str, Pair] = {}
    for labelled in scorer_pairs(results_dir).values():
        for key, pair in labelled.items():
            pairs.setdefault(key, pair)
    keys = sorted(pairs)
    return [pairs[k] for k in random.Random(seed).sample(keys, min(n_pairs, len(keys)))]


CHOICES = tuple((label, label) for label in reversed(LABELS))  # as Figure 12 orders them: Fully first


def _pair_html(pair: Pair) -> str:
    entries = "".join(f'<li class="entry" data-entry="{k}"><div class="text">({k + 1}) {esc(entry)}</div>'
                      f'<div class="question">({k + 1}) is Covered in Criterion?</div>'
                      f'<div class="choices">{radios(f"{pair.pair_id}-{k}", CHOICES)}</div></li>'
                      for k, entry in enumerate(pair.checklist))
    return (f'<section class="task" data-task="{esc(pair.pair_id)}" hidden><div class="pair">'
            f'<div class="box preference"><h3>Preference</h3><p class="text">{esc(pair.preference)}</p></div>'
            f'<div class="box"><h3>Checklist Entries</h3><ol class="entries">{entries}</ol></div></div></section>')


def write_page(pairs: list[Pair], path: str | Path, title: str = "Preference-checklist matching") -> Path:
    data = [{"pair_id": p.pair_id, "preference": p.preference, "checklist": list(p.checklist)} for p in pairs]
    page_id = hashlib.sha256(orjson.dumps(data)).hexdigest()[:12]
    header = (f'<header class="top"><span class="brand">Task <span id="task-no">1</span> of {len(data)}</span>'
              f'<label>Your annotator id <input id="annotator" autocomplete="off" placeholder="e.g. your initials">'
              f'</label></header>')
    intro = (f"<h1>Find Checklist Questions that are Covered by the Preference</h1>"
             f"<details class='box' open><summary>Instructions</summary>{INSTRUCTIONS}</details>")
    done = (f'<section id="done" class="box" hidden><h2>All {len(data)} tasks are labelled.</h2><p>Save your labels '
            f'with <b>Download CSV</b> or <b>Download JSON</b>, and send the file back. <button id="review" '
            f'type="button">Review the tasks</button></p></section>'
            f'<script type="application/json" id="pairs">{script_json(data)}</script>')
    meta = {"page": f"match-{page_id}", "entry": "checklist entry", "file_prefix": "match_labels_",
            "csv_inert_starts": "".join(INERT_STARTS)}  # the CSV download's rule: utils/csv_file.py's
    downloads = {"download-csv": ("csv", "Download CSV"), "download-json": ("json", "Download JSON")}
    path = Path(path)
    atomic_write_text(path, annotation_page(title, header, [intro, *map(_pair_html, pairs)], meta, downloads,
                                            extra_head=STYLE, end=done))
    return path
