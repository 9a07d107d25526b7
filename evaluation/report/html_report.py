"""report.html: the summary of report.md, an instance browser and instance pages in one file.

    python -m evaluation.report RESULTS_DIR            # writes report.html beside report.md
    python -m evaluation.report RESULTS_DIR --data_dir data/sample

The summary (tables with their intervals, figures) is static HTML painted at once. The
instance browser, instance pages and the compare view are drawn by the inlined script
(templates/report.js) from gzip-compressed chunks decoded on demand (all but the index
word-coded first, utils/word_codes.py, with the page's one codebook): an index (one row per
run and instance, the instances' shared fields and scores, the paired differences), the
prior sessions (each distinct session stored once, however many instances and models show
it, in parts), and each run's steps in parts of PART instances. Instance files do
not hold sessions or ground truth, so those come from the data the runs name in run.json
(``data_source``), or from ``--data_dir`` / ``--data``.
"""
from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from evaluation.report.analysis import Analysis
from evaluation.report.compare_data import paired_entries
from evaluation.report import statistics as S
from evaluation.report.statistics import one_blas_thread
from evaluation.report.results import Run, history_of, setting_order
from evaluation.data import InstanceSource
from utils.benchmark.dataset import DataValidationError, Instance
from utils.cycle_collection import paused_cycle_collection
from utils.chunk_packer import ChunkPacker, PackedChunk
from utils.html_page import chunk_element, chunked_page, compact_json, esc, markdown_to_html, write_page
from utils.models.catalog import price_of
from utils.models.usage import cost_at
from utils.word_codes import WordCodebook
from evaluation.report.published import display_name

STEP_FIELDS = ("status", "model", "output", "error", "attempts", "usage")
# Instances per detail chunk and sessions per sessions chunk: an instance page inflates only
# the few chunks it shows (a run's whole chunk at paper scale is ~6 MB of JSON to parse).
PART = 64
SESSION_PART = 64
ROUND = 4
# Every how many chunk texts of the sessions and first run the word codebook counts.
CODEBOOK_SAMPLE_STEP = 2
# Instance results from which the chunks are coded and compressed in a worker process.
IN_PROCESS_ROWS = 1000


# =======================================================================================
# Instance data (sessions, request, ground truth)
# =======================================================================================
def _source_specs(runs: list[Run], data_paths: Iterable[str | Path] | None,
                  results_dir: Path) -> tuple[list[dict], list[str]]:
    """Where to read instances from: the paths given, else each run's manifest."""
    if data_paths:
        return [{"data_path": Path(p)} for p in data_paths], []
    specs, notes, seen = [], [], set()
    for run in runs:
        for manifest in run.manifests:
            source = manifest.get("data_source")
            if isinstance(source, dict):  # {"path": ...} or {"dataset": ..., "split": ...}
                source = source.get("path") or (f"{source['dataset']}[{source.get('split', 'test')}]"
                                                 if source.get("dataset") else None)
            if not source or source in seen:
                continue
            seen.add(source)
            candidates = [Path(source), results_dir / source, results_dir.parent / source]
            found = next((c for c in candidates if c.exists()), None)
            hub = re.fullmatch(r"(?P<dataset>[^\[\]]+)\[(?P<split>[^\[\]]+)\]", str(source))
            if found is not None:
                specs.append({"data_path": found})
            elif hub and "/" in hub.group("dataset"):
                specs.append({"dataset": hub.group("dataset"), "split": hub.group("split"),
                              "revision": (manifest.get("data") or {}).get("revision")})
            else:
                notes.append(f"data source {source!r} (named in run.json) not found; "
                             f"pass --data_dir to show sessions and ground truth")
    return specs, notes


def load_instance_data(runs: list[Run], results_dir: Path,
                       data_paths: Iterable[str | Path] | None = None) -> tuple[dict[str, Instance], list[str]]:
    wanted = {i for run in runs for i in run.instances}
    specs, notes = _source_specs(runs, data_paths, results_dir)
    found: dict[str, Instance] = {}
    # The instance types of a persona share most of their sessions: keep one copy of each.
    shared: dict[Any, Any] = {}
    for spec in specs:
        source = InstanceSource(**spec)
        try:
            for instance in source:
                if instance.instance_id in wanted and instance.instance_id not in found:
                    sessions = tuple(shared.setdefault((s.context_factor, s.contextual_preference,
                                                        tuple((t.role, t.content) for t in s.dialogue)), s)
                                     for s in instance.prior_interactions)
                    found[instance.instance_id] = dataclasses.replace(instance, prior_interactions=sessions)
        except (DataValidationError, OSError, ImportError, ValueError) as exc:
            notes.append(f"data source {source.name}: not read ({exc})")
        except Exception as exc:  # the hub: network, authentication, missing dataset
            notes.append(f"data source {source.name}: not read ({type(exc).__name__}: {exc})")
    missing = len(wanted - set(found))
    if specs and missing:
        notes.append(f"{missing} of {len(wanted)} instances not found in the data; "
                     f"their sessions and ground truth are not shown")
    return found, notes


# =======================================================================================
# The payload
# =======================================================================================
def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(float(value), ROUND)


def _step_cost(step: dict, prices: dict[str | None, Any] | None = None) -> float | None:
    """USD of a step at the catalog's price of its model (``prices``: the prices already
    looked up, by model)."""
    usage = step.get("usage") or {}
    if not usage:
        return None
    model = step.get("model")
    if prices is None:
        prices = {}
    if model not in prices:
        prices[model] = price_of(model)
    return cost_at(prices[model], int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def trim_step(step: dict, prices: dict[str | None, Any] | None = None) -> dict:
    """What the page shows of a step: raw answers only when a parse or call failed (the
    parsed output holds the rest), the sent request only for a failed step."""
    out = {k: step[k] for k in STEP_FIELDS if k in step}
    if step.get("status") != "done" or (step.get("attempts") or 1) > 1:
        out["raw"] = step.get("raw")
        if step.get("status") != "done" and step.get("request") is not None:
            out["request"] = step["request"]
    cost = _step_cost(step, prices)
    if cost is not None:
        out["cost"] = cost
    return out


def _all_steps(data: dict) -> Iterable[tuple[str, dict]]:
    for name, step in (data.get("steps") or {}).items():
        if isinstance(step, dict):
            yield name, step
    for evaluation in (data.get("evaluations") or {}).values():
        if isinstance(evaluation, dict):
            for name, step in (evaluation.get("steps") or {}).items():
                if isinstance(step, dict):
                    yield name, step


def _without_repeated_entries(step: dict, entries: list | None) -> dict:
    """A match step whose results repeat the checklist they label (entry k of ``entries``
    at index k + 1): the page reads the entry from the checklist, so it is left out."""
    output = step.get("output")
    if not entries or not isinstance(output, dict) or not isinstance(output.get("results"), list):
        return step
    results = []
    for r in output["results"]:
        index = r.get("index") if isinstance(r, dict) else None
        if (isinstance(index, int) and 1 <= index <= len(entries) and r.get("entry") == entries[index - 1]):
            r = {k: v for k, v in r.items() if k != "entry"}
        results.append(r)
    return {**step, "output": {**output, "results": results}}


def instance_detail(data: dict, checklist: list | None = None,
                    prices: dict[str | None, Any] | None = None) -> dict:
    """What an instance page shows of one run's instance file (``checklist``: the ground
    truth's, when the instance data are known; ``prices``: the models' prices looked up
    so far, filled as it goes)."""
    prices = {} if prices is None else prices
    evaluations = {}
    for scorer, evaluation in (data.get("evaluations") or {}).items():
        if not isinstance(evaluation, dict):
            continue
        evaluations[scorer] = {
            "evaluator": evaluation.get("evaluator"), "matcher": evaluation.get("matcher"),
            "inference": evaluation.get("inference"), "generation": evaluation.get("generation"),
            "steps": {n: trim_step(s, prices) for n, s in (evaluation.get("steps") or {}).items()
                      if isinstance(s, dict)}}
        steps = evaluations[scorer]["steps"]
        decomposed = (steps.get("decompose") or {}).get("output") or {}
        if "match_precision" in steps and isinstance(decomposed, dict):
            steps["match_precision"] = _without_repeated_entries(steps["match_precision"], decomposed.get("checklist"))
        if "match_recall" in steps:
            steps["match_recall"] = _without_repeated_entries(steps["match_recall"], checklist)
    return {"steps": {n: trim_step(s, prices) for n, s in (data.get("steps") or {}).items() if isinstance(s, dict)},
            "evaluations": evaluations, "history": data.get("history") or {}}


class Payload:
    """The index, the shared sessions (in parts of SESSION_PART) and each run's details (in
    parts of PART instances, by the instance's index)."""

    def __init__(self, runs: list[Run], model_order: list[str], labels: dict[str, str],
                 instance_data: dict[str, Instance], analysis: Analysis | None = None):
        order = {m: k for k, m in enumerate(model_order)}
        self.runs = sorted(runs, key=lambda r: (order.get(r.model, len(order)), setting_order(r.setting)))
        self.scorers = sorted({s for r in self.runs for s in r.scorers}, key=lambda s: ("+" in s, s))
        self.labels = labels
        self.data = instance_data
        self.analysis = analysis
        self.sessions: list[list] = []
        self._session_ids: dict[tuple, int] = {}
        self._session_objects: dict[int, int] = {}
        self._keep: list = []
        self.instances: list[dict] = []
        self._instance_index: dict[str, int] = {}
        self.rows: dict[str, list] = {"inst": [], "run": [], "tok": [], "cost": [], "unpriced": [], "fail": []}
        self.metrics = [{"p": [], "r": [], "f1": [], "j": []} for _ in self.scorers]
        # The chunks in page order (the sessions', then each run's), each coded and
        # compressed by the packer while the next run is read, so no run's details outlive
        # their chunk's text.
        self.chunks: list[tuple[str, PackedChunk]] = []
        self.codebook: WordCodebook | None = None
        rows = sum(len(run.instances) for run in self.runs)
        # Open until close(): the chunks are packed while the rest of the page is made.
        self.packer = ChunkPacker(in_process=rows >= IN_PROCESS_ROWS)
        try:
            for run in self.runs:
                for instance_id in run.ids():
                    self._instance(instance_id, run.instances[instance_id])
            pending = [(f"sessions-{start // SESSION_PART}", compact_json(self.sessions[start:start + SESSION_PART]))
                       for start in range(0, len(self.sessions), SESSION_PART)]
            for run_index, parts in self._run_details():
                pending += [(f"run{run_index}-{part}", compact_json(values)) for part, values in parts]
                self._compress(pending)
                pending = []
            self._compress(pending)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Wait for the chunks' packing to end and release its workers."""
        self.packer.close()

    def __enter__(self) -> "Payload":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _compress(self, texts: list[tuple[str, str]]) -> None:
        """Queue the chunks' texts; the first call's texts (the sessions and the first run)
        are the sample the word codebook is drawn from."""
        if self.codebook is None:
            if not texts:
                return
            self.codebook = WordCodebook.from_texts(text for _, text in texts[::CODEBOOK_SAMPLE_STEP])
        for name, text in texts:
            self.chunks.append((name, self.packer.submit(text, self.codebook)))

    def _session(self, session) -> int:
        # load_instance_data gives equal sessions as one object: most are found by identity.
        index = self._session_objects.get(id(session))
        if index is not None:
            return index
        turns = tuple((0 if t.role == "user" else 1, t.content) for t in session.dialogue)
        key = (session.context_factor, session.contextual_preference, turns)
        if key not in self._session_ids:
            self._session_ids[key] = len(self.sessions)
            self.sessions.append([session.context_factor, session.contextual_preference, [list(t) for t in turns]])
        self._session_objects[id(session)] = self._session_ids[key]
        self._keep.append(session)  # so that no id is reused while the payload is built
        return self._session_ids[key]

    def _instance(self, instance_id: str, data: dict) -> int:
        if instance_id in self._instance_index:
            return self._instance_index[instance_id]
        history = history_of(data)
        entry: dict[str, Any] = {"id": instance_id, "persona": data.get("persona_id"),
                                 "type": data.get("instance_type") or "unknown",
                                 "relevant": history.get("relevant_positions"),
                                 "tokens": history.get("history_tokens")}
        instance = self.data.get(instance_id)
        if instance is not None:
            entry.update(request=instance.current_request, factor=instance.current_context_factor,
                         preference=instance.current_contextual_preference,
                         checklist=list(instance.current_checklist),
                         sessions=[self._session(s) for s in instance.prior_interactions])
            if instance.extra.get("metadata"):
                entry["metadata"] = instance.extra["metadata"]
        self._instance_index[instance_id] = len(self.instances)
        self.instances.append(entry)
        return self._instance_index[instance_id]

    def _run_details(self) -> Iterator[tuple[int, list[tuple[int, dict[str, dict]]]]]:
        """Each run's index and its instance pages' details in parts of PART instances; the
        index rows and metrics are filled as it goes."""
        prices: dict[str | None, Any] = {}  # each model's price, looked up once
        for run_index, run in enumerate(self.runs):
            details: dict[str, dict] = {}
            for instance_id in run.ids():
                data = run.instances[instance_id]
                inst = self._instance(instance_id, data)
                known = self.data.get(instance_id)
                detail = details[str(inst)] = instance_detail(data, list(known.current_checklist) if known else None,
                                                              prices)
                tokens, cost, failed, unpriced = 0, None, [], []
                for name, step in _all_steps(detail):  # trimmed steps carry their cost
                    usage = step.get("usage") or {}
                    tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
                    step_cost = step.get("cost")
                    if step_cost is not None:
                        cost = (cost or 0.0) + step_cost
                    elif usage and name not in unpriced:
                        unpriced.append(name)
                    if step.get("status") == "failed" and name not in failed:
                        failed.append(name)
                self.rows["inst"].append(inst)
                self.rows["run"].append(run_index)
                self.rows["tok"].append(tokens)
                self.rows["cost"].append(None if cost is None else round(cost, 6))
                self.rows["fail"].append(failed or 0)
                self.rows["unpriced"].append(unpriced or 0)
                evaluations = data.get("evaluations") or {}
                for k, scorer in enumerate(self.scorers):
                    evaluation = evaluations.get(scorer) if isinstance(evaluations.get(scorer), dict) else {}
                    inference = evaluation.get("inference") if isinstance(evaluation.get("inference"), dict) else {}
                    generation = evaluation.get("generation") if isinstance(evaluation.get("generation"), dict) else {}
                    self.metrics[k]["p"].append(_num(inference.get("precision")))
                    self.metrics[k]["r"].append(_num(inference.get("recall")))
                    self.metrics[k]["f1"].append(_num(inference.get("f1")))
                    self.metrics[k]["j"].append(_num(generation.get("score")))
            parts: dict[int, dict[str, dict]] = {}
            for key, detail in details.items():
                parts.setdefault(int(key) // PART, {})[key] = detail
            yield run_index, sorted(parts.items())

    def primary(self, task: str) -> int | None:
        key = "f1" if task == "inference" else "j"
        counts = [sum(v is not None for v in m[key]) for m in self.metrics]
        if not counts or max(counts) == 0:
            return None
        # The plain evaluator (the paper's GPT-4o matcher) before a matcher scorer.
        return max(range(len(counts)), key=lambda k: (counts[k] > 0, "+" not in self.scorers[k], counts[k]))

    def index(self, notes: list[str], title: str) -> dict:
        compare = (paired_entries(self.analysis, self.runs, self.scorers) if self.analysis is not None
                   else {"pairs": {}, "rows": []})
        worst = {}
        for key, task in (("f1", "inference"), ("j", "generation")):
            scorer = self.primary(task)
            if scorer is not None:
                worst[key] = {"scorer": scorer, "rows": self.worst(key, scorer)}
        return {"title": title, "notes": notes, "compare": compare, "worst": worst, "part": PART,
                "session_part": SESSION_PART,
                "runs": [{"model": r.model, "label": self.labels.get(r.model, display_name(r.model)),
                          "setting": r.setting, "scorers": [self.scorers.index(s) for s in r.scorers]}
                         for r in self.runs],
                "scorers": self.scorers,
                "primary": {"inference": self.primary("inference"), "generation": self.primary("generation")},
                "instances": self.instances, "rows": self.rows, "metrics": self.metrics}

    def worst(self, key: str, scorer: int | None, n: int = 10) -> list[int]:
        """The rows of the lowest values; equal values go round the runs (each run's lowest
        before any run's second lowest), so ties do not all come from the first run."""
        if scorer is None:
            return []
        values = self.metrics[scorer][key]
        runs = self.rows["run"]
        rank: dict[int, int] = {}
        seen: dict[tuple, int] = {}
        for i in sorted((i for i, v in enumerate(values) if v is not None), key=lambda i: (values[i], i)):
            group = (runs[i], values[i])
            rank[i] = seen.get(group, 0)
            seen[group] = rank[i] + 1
        return sorted(rank, key=lambda i: (values[i], rank[i], runs[i], i))[:n]


# =======================================================================================
# The page
# =======================================================================================
def _worst_section(payload: Payload) -> str:
    """Links straight to the instance pages of the lowest F1 and judge scores."""
    blocks = []
    for key, task, title, fmt in (("f1", "inference", "Lowest inference F1", lambda v: f"F1 {100 * v:.1f}"),
                                  ("j", "generation", "Lowest judge score", lambda v: f"score {v:g}")):
        scorer = payload.primary(task)
        rows = payload.worst(key, scorer)
        if not rows:
            continue
        items = []
        for row in rows:
            inst = payload.instances[payload.rows["inst"][row]]
            run = payload.runs[payload.rows["run"][row]]
            value = payload.metrics[scorer][key][row]
            items.append(f'<li><a class="worst-link" href="#i={row}&amp;s={scorer}&amp;from=worst-{key}">{esc(fmt(value))} · '
                         f'{esc(inst["id"])} · {esc(payload.labels.get(run.model, run.model))} '
                         f'({esc(run.setting)})</a></li>')
        blocks.append(f'<div class="worst"><h3>{title} <span class="muted">scorer '
                      f'<code>{esc(payload.scorers[scorer])}</code></span></h3><ol>{"".join(items)}</ol></div>')
    n_failed = sum(1 for f in payload.rows["fail"] if f)
    failed = (f'<p><a href="#instances&amp;failed=any">{n_failed} instance result(s) with a failed step</a></p>'
              if n_failed else "<p>No failed step.</p>")
    return (f'<section class="glance"><h2 id="worst-instances">Worst instances</h2>'
            f'<p class="muted">Click one to see why it scored so; every instance is in the '
            f'<a href="#instances">instance browser</a>.</p><div class="worst-grid">{"".join(blocks)}</div>'
            f'{failed}</section>')


def render(payload: Payload, index: dict, report_md: str, figure_dir: Path, notes: list[str], title: str) -> Iterator[str]:
    """The page, in parts (see utils.html_page.chunked_page)."""
    summary_html, headings = markdown_to_html(report_md, figure_dir)
    toc = "".join(f'<li><a href="#{anchor}">{esc(text)}</a></li>' for level, anchor, text in headings if level == 2)
    note_html = "".join(f'<p class="warning">{esc(n)}</p>' for n in notes)

    def chunks() -> Iterator[str]:
        yield chunk_element("index", index)
        if payload.codebook is not None:
            yield chunk_element("words", payload.codebook.words)
        for name, text in payload.chunks:
            yield chunk_element(name, text=text.result(), coded=True)

    body = f"""<header class="top"><span class="brand">CUPID report</span>
<nav><a href="#summary" data-view="summary">Summary</a><a href="#instances" data-view="instances">Instances</a><a href="#compare" data-view="compare">Compare</a></nav>
<span class="muted" id="status"></span></header>
<main>
<section id="view-summary" class="view">{note_html}{_worst_section(payload)}
<nav class="toc"><ul>{toc}</ul></nav>
<article class="markdown">{summary_html}</article></section>
<section id="view-instances" class="view" hidden></section>
<section id="view-instance" class="view" hidden></section>
<section id="view-compare" class="view" hidden></section>
</main>
"""
    return chunked_page(title, body, chunks(), scripts=("report.js",))


def write_html_report(results_dir: str | Path, output_dir: str | Path, *, runs: list[Run] | None = None,
                      model_order: list[str] | None = None, labels: dict[str, str] | None = None,
                      data_paths: Iterable[str | Path] | None = None, analysis: Analysis | None = None,
                      before_summary: Callable[[], None] | None = None) -> Path:
    """Write ``output_dir/report.html`` from ``report.md`` (and its figures) in
    ``output_dir`` and the run directories under ``results_dir`` (``before_summary``: called
    once the instance data are made, before report.md and the figures are read)."""
    with paused_cycle_collection():
        return _write_html_report(Path(results_dir), Path(output_dir), runs=runs, model_order=model_order,
                                  labels=labels, data_paths=data_paths, analysis=analysis,
                                  before_summary=before_summary)


def _write_html_report(results_dir: Path, output_dir: Path, *, runs: list[Run] | None, model_order: list[str] | None,
                       labels: dict[str, str] | None, data_paths: Iterable[str | Path] | None,
                       analysis: Analysis | None, before_summary: Callable[[], None] | None) -> Path:
    if runs is None:
        analysis = analysis or Analysis(results_dir)
        runs = analysis.runs
    if not runs:
        raise FileNotFoundError(f"{results_dir}: no run directories (no run.json found)")
    models = model_order or sorted({r.model for r in runs})
    labels = labels or {m: display_name(m) for m in models}
    S.release_caches()  # the tables' resampling weights are not needed past this point
    instance_data, notes = load_instance_data(runs, results_dir, data_paths)
    for run in runs:
        notes += run.warnings[:5]
    title = f"CUPID report · {results_dir.name} · {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}"
    with one_blas_thread(), Payload(runs, models, labels, instance_data, analysis) as payload:
        index = payload.index(notes, title)  # the compare view's paired differences
        if before_summary is not None:
            before_summary()
        md_path = output_dir / "report.md"
        report_md = md_path.read_text(encoding="utf-8") if md_path.exists() else "# CUPID evaluation report\n"
        return write_page(output_dir / "report.html", render(payload, index, report_md, output_dir, notes, title))
