"""An annotation page in the style of the paper's Figure 12: one preference-checklist pair
at a time, the preference beside its entries, each rated Fully, Partially or Not Covered;
the labels saved by download as the file ``cupid-match-agreement score`` reads
(docs/match_agreement.md). One self-contained HTML file (utils/html_page.py's kit, the
script utils/templates/match_annotation.js): no server; the page keeps the annotator's
progress in the browser's local storage, so a reload loses nothing.
"""
from __future__ import annotations

import hashlib
import random
from pathlib import Path

from cupid.evaluation.report.match_agreement import Pair, scorer_pairs
from cupid.utils.html_page import compact_json, esc, page, script_json
from cupid.utils.io import atomic_write_text

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
.annotate { max-width: 1100px; }
.annotate .bar { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; }
.annotate .pair { display: grid; grid-template-columns: 1fr 1.4fr; gap: 16px; align-items: start; }
.annotate .preference { font-size: 15px; background: var(--soft); }
.annotate ol.entries { padding-left: 0; list-style: none; margin: 0; }
.annotate ol.entries li { border-bottom: 1px solid var(--line); padding: 8px 0; }
.annotate .question { color: var(--muted); margin: 4px 0; }
.annotate .choices label { margin-right: 14px; white-space: nowrap; }
.annotate .nav { display: flex; gap: 10px; margin: 12px 0; }
.annotate button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
.annotate button:disabled { opacity: 0.45; cursor: default; }
@media (max-width: 760px) { .annotate .pair { grid-template-columns: 1fr; } }
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


def write_page(pairs: list[Pair], path: str | Path, title: str = "Preference-checklist matching") -> Path:
    data = [{"pair_id": p.pair_id, "preference": p.preference, "checklist": list(p.checklist)} for p in pairs]
    page_id = hashlib.sha256(compact_json(data).encode("utf-8")).hexdigest()[:12]
    body = f"""<main class="annotate">
<div class="bar"><strong>Task <span id="task-no">1</span> of {len(data)}</strong>
<label>Your annotator id <input id="annotator" autocomplete="off" placeholder="e.g. your initials"></label>
<button id="download-csv" type="button">Download CSV</button>
<button id="download-json" type="button">Download JSON</button>
<span id="saved" class="note"></span></div>
<h1>Find Checklist Questions that are Covered by the Preference</h1>
<details class="box" id="instructions" open><summary>Instructions</summary>{INSTRUCTIONS}</details>
<section id="task"><div class="pair">
<div class="box preference"><h3>Preference</h3><p id="preference" class="text"></p></div>
<div class="box"><h3>Checklist Entries</h3><ol id="entries" class="entries"></ol></div></div>
<div class="nav"><button id="back" type="button">Back</button>
<button id="next" type="button" class="primary">Submit &amp; Next Task</button>
<span id="missing" class="note"></span></div></section>
<section id="done" class="box" hidden><h2>All {len(data)} tasks are labelled.</h2>
<p>Save your labels with <b>Download CSV</b> or <b>Download JSON</b> above, and send the file back.
<button id="review" type="button">Review the tasks</button></p></section>
</main>
<script type="application/json" id="pairs" data-page="{esc(page_id)}">{script_json(data)}</script>"""
    path = Path(path)
    atomic_write_text(path, page(title, body, scripts=("match_annotation.js",), extra_head=STYLE))
    return path
