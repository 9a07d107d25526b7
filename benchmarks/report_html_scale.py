"""How big and how fast is report.html for a paper-scale run (10 models x 756 instances)?

Builds a synthetic results tree in the format of docs/results_format.md: 252 personas x 3
instance types, each instance with 8 prior sessions of ~1,000 tokens drawn from its
persona's 12 (so ~8k tokens of history, shared by the 10 models), every step's output and
raw answer at realistic lengths (inference analysis ~300 tokens, response ~700, judge
analysis ~350), 1% of instances with a failed step. Then runs ``python -m evaluation.report``
in a subprocess (wall time and peak resident memory, ``--repeat`` times), and opens
report.html in headless Chromium: time to the load event, first contentful paint, the
instance browser's data ready, opening one instance page, and the compare view of two runs.
Prints each figure's best and median over the repeats (the machine may be shared).

    python benchmarks/report_html_scale.py [--models 10] [--instances 756] [--repeat 3] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests" / "support"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cupid.utils.dataset import safe_name  # noqa: E402

# A Zipf-distributed vocabulary of 4,000 made-up words: gzip compresses it about as well as
# English prose (~2.7x), not as well as a handful of repeated words would.
_SYLLABLES = [c + v for c in "bcdfghklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ea", "ou")]
_VOCAB_RNG = random.Random(1)
WORDS = ["".join(_VOCAB_RNG.choice(_SYLLABLES) for _ in range(1 + k % 3 + (k > 200))) for k in range(4000)]
WEIGHTS = [1 / (k + 1) for k in range(len(WORDS))]
TYPES = ("consistent", "contrastive", "changing")
LABELS = ("Fully Covered", "Partially Covered", "Not Covered")


def text(rng: random.Random, n_tokens: int) -> str:
    words = rng.choices(WORDS, WEIGHTS, k=int(n_tokens * 0.75))
    return " ".join(words).capitalize() + "."


def build_data(rng: random.Random, n_instances: int, path: Path) -> list[dict]:
    rows = []
    for p in range(n_instances // 3 + (n_instances % 3 > 0)):
        persona = f"persona-{p:03d}"
        factors = [f"Factor {p}-{k}" for k in range(8)]
        prefs = {f: text(rng, 40) for f in factors}
        sessions = []
        for k in range(12):
            factor = factors[k % 8]
            dialogue = [{"role": "user" if t % 2 == 0 else "assistant", "content": text(rng, 200)} for t in range(5)]
            sessions.append({"context_factor": factor, "contextual_preference": prefs[factor], "dialogue": dialogue})
        checklist = [text(rng, 15) + "?" for _ in range(3)]
        for t, itype in enumerate(TYPES):
            if len(rows) >= n_instances:
                break
            keep = sorted(rng.sample(range(12), 8))
            if 0 not in keep:
                keep[0] = 0
            rows.append({"persona_id": persona, "instance_type": itype, "current_request": text(rng, 60),
                         "current_context_factor": factors[0], "current_contextual_preference": prefs[factors[0]],
                         "current_checklist": checklist, "prior_interactions": [sessions[k] for k in keep]})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return rows


def step(rng, model, output, raw_text, failed=False):
    return {"status": "failed" if failed else "done", "model": model, "prompt_version": "abc",
            "output": None if failed else output, "raw": [raw_text] * (3 if failed else 1),
            "error": "unparseable answer: no 'Evaluation Score' section" if failed else None,
            "attempts": 3 if failed else 1,
            "usage": {"prompt_tokens": rng.randint(6000, 10000), "completion_tokens": rng.randint(100, 900)},
            "finished_at": "2025-01-01T00:00:00+00:00"}


def build_results(rng: random.Random, rows: list[dict], n_models: int, root: Path, data: Path) -> None:
    evaluator = "gpt-4o-2024-11-20"
    for m in range(n_models):
        model = f"model-{m:02d}"
        directory = root / safe_name(model)
        directory.mkdir(parents=True)
        (directory / "run.json").write_text(json.dumps({"model": model, "setting": "default", "data_source": str(data),
                                                        "prompt_versions": {}, "created": "2025-01-01T00:00:00+00:00"}))
        for row in rows:
            iid = f"{row['persona_id']}__{row['instance_type']}"
            analysis, preference, response = text(rng, 300), text(rng, 50), text(rng, 700)
            inferred = [text(rng, 15) + "?" for _ in range(rng.randint(2, 5))]
            prec = [{"index": i + 1, "entry": e, "label": rng.choice(LABELS)} for i, e in enumerate(inferred)]
            rec = [{"index": i + 1, "entry": e, "label": rng.choice(LABELS)} for i, e in enumerate(row["current_checklist"])]
            value = {"Fully Covered": 1, "Partially Covered": 0.5, "Not Covered": 0}
            pm, tm = sum(value[r["label"]] for r in prec), sum(value[r["label"]] for r in rec)
            p, r = pm / len(prec), tm / len(rec)
            judge_failed = rng.random() < 0.01
            score = rng.randint(1, 10)
            judge_analysis = text(rng, 350)
            record = {
                "instance_id": iid, "persona_id": row["persona_id"], "instance_type": row["instance_type"],
                "model": model, "setting": "default",
                "history": {"n_sessions": 8, "relevant_positions": [1], "history_tokens": 8000},
                "steps": {"infer": step(rng, model, {"analysis": analysis, "preference": preference},
                                        f"### Analysis\n{analysis}\n\n### Most Likely Preference\n{preference}"),
                          "generate": step(rng, model, {"response": response}, response)},
                "evaluations": {evaluator: {
                    "evaluator": evaluator, "matcher": evaluator,
                    "steps": {"decompose": step(rng, evaluator, {"checklist": inferred}, json.dumps({"checklist": inferred})),
                              "match_precision": step(rng, evaluator, {"results": prec}, json.dumps({"results": prec})),
                              "match_recall": step(rng, evaluator, {"results": rec}, json.dumps({"results": rec})),
                              "judge": step(rng, evaluator, {"analysis": judge_analysis, "score": score},
                                            f"### Evaluation\n{judge_analysis}\n\n### Evaluation Score\n{score}",
                                            failed=judge_failed)},
                    "inference": {"precision": p, "recall": r, "f1": 0 if p + r == 0 else 2 * p * r / (p + r),
                                  "n_predicted_matched": pm, "n_predicted": len(prec), "n_true_matched": tm,
                                  "n_true": len(rec)},
                    "generation": None if judge_failed else {"score": score}}},
            }
            (directory / f"{iid}.json").write_text(json.dumps(record))


def measure_browser(html: Path, n_rows: int) -> dict:
    from browser import Browser

    with Browser() as browser:
        load = browser.open(html)
        started = time.monotonic()
        browser.wait_for("window.cupidReport && window.cupidReport.ready", timeout=120)
        ready_after_load = time.monotonic() - started
        browser.wait_for("performance.getEntriesByName('first-contentful-paint').length > 0", timeout=10)
        paint = browser.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
        browser.evaluate("location.hash = 'instances'")
        browser.wait_for("!!document.querySelector('#instances-table tbody tr')")
        row = max(0, n_rows - 2)  # a row of the last run: its chunk and the sessions are inflated first
        started = time.monotonic()
        browser.evaluate(f"location.hash = 'i={row}&s=0'")
        browser.wait_for("!!document.querySelector('#panels .panel')", timeout=120)
        first_instance = time.monotonic() - started
        started = time.monotonic()
        browser.evaluate(f"location.hash = 'i={row + 1}&s=0'")
        browser.wait_for(f"!!document.querySelector('#panels .panel[data-row=\"{row + 1}\"]')", timeout=60)
        next_instance = time.monotonic() - started
        started = time.monotonic()
        browser.evaluate("location.hash = 'instances'")
        browser.wait_for("!!document.querySelector('#f-type')")
        browser.evaluate("(() => { const s = document.querySelector('#f-type'); s.value = 'changing'; "
                         "s.dispatchEvent(new Event('change')); })()")
        filter_time = time.monotonic() - started
        # The compare view of the first and the last run (every shared instance, the scatter).
        last = browser.evaluate("window.cupidReport.index().runs.length - 1")
        started = time.monotonic()
        browser.evaluate(f"location.hash = 'compare&a=0:0&b={last}:0'")
        browser.wait_for(f"!!document.querySelector('#compare-table tbody tr') && "
                         f"document.querySelector('#cmp-b').value === '{last}:0'", timeout=60)
        compare = time.monotonic() - started
        started = time.monotonic()
        browser.evaluate("(() => { const s = document.querySelector('#cmp-who'); s.value = 'b'; "
                         "s.dispatchEvent(new Event('change')); })()")
        compare_filter = time.monotonic() - started
        heap = browser.evaluate("performance.memory ? performance.memory.usedJSHeapSize : null")
        if browser.errors:
            raise RuntimeError(f"errors in the page: {browser.errors}")
    return {"load_event_s": load, "first_contentful_paint_ms": paint, "data_ready_after_load_s": ready_after_load,
            "first_instance_page_s": first_instance, "next_instance_page_s": next_instance,
            "filter_s": filter_time, "compare_view_s": compare, "compare_filter_s": compare_filter,
            "js_heap_mb": None if heap is None else heap / 2**20}


def _process_tree(pid: int) -> list[int]:
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                for child in handle.read().split():
                    found += _process_tree(int(child))
    except OSError:  # gone meanwhile
        pass
    return found


def _pss_kib(pid: int) -> int:
    """Proportional set size: a page shared by n processes counts 1/n in each, so the sum
    over a tree is the memory it occupies (a forked child's shared pages count once)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def build_report(results: Path, out: Path) -> tuple[float, float, float | None, float]:
    """``python -m evaluation.report`` in a subprocess: (wall seconds, peak resident MiB of
    its largest process, peak MiB of its whole process tree (any child processes too),
    sampled every 50 ms; None where /proc has no smaps_rollup; CPU seconds, user + sys of
    the process and the children it waited for)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "cupid.evaluation.report", str(results), "--output", str(out)],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tree_peak: list[int] = [0]
    measurable = os.path.exists(f"/proc/{process.pid}/smaps_rollup")

    def sample() -> None:
        while process.returncode is None and os.path.exists(f"/proc/{process.pid}"):
            tree_peak[0] = max(tree_peak[0], sum(_pss_kib(p) for p in _process_tree(process.pid)))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    if measurable:
        sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if measurable:
        sampler.join()
    error = process.stderr.read().decode()
    process.stderr.close()
    if process.returncode != 0:
        raise RuntimeError(f"python -m evaluation.report failed: {error}")
    return (wall, usage.ru_maxrss / 1024, tree_peak[0] / 1024 if measurable else None,
            usage.ru_utime + usage.ru_stime)


def page_breakdown(html: Path) -> str:
    """MiB of report.html by kind: the index, the sessions, the runs' details (compressed
    chunks), the figures (data URIs) and the rest (summary, styles, script)."""
    import re

    page = html.read_bytes()
    sizes = {"index": 0, "sessions": 0, "run": 0}
    for match in re.finditer(rb'<script type="application/octet-stream" id="chunk-([a-z]+)[^"]*"[^>]*>(.*?)</script>', page, re.S):
        kind = match.group(1).decode()
        if kind in sizes:
            sizes[kind] += len(match.group(0))
    sizes["figures"] = sum(len(m) for m in re.findall(rb"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+", page))
    sizes["rest"] = len(page) - sum(sizes.values())
    return ", ".join(f"{k} {v / 2**20:.2f}" for k, v in sizes.items())


def summary(name: str, values: list, unit: str = "") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return f"{name}: n/a"
    return (f"{name}: best {min(values):.3f}{unit}, median {statistics.median(values):.3f}{unit} "
            f"(n={len(values)}: {', '.join(f'{v:.3f}' for v in values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--instances", type=int, default=756)
    parser.add_argument("--keep", default=None, help="build here and keep the tree (reused when it exists)")
    parser.add_argument("--repeat", type=int, default=3, help="builds and browser sessions to measure (default 3)")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cupid-html-scale-"))
    try:
        rng = random.Random(0)
        if not (root / "results").is_dir():
            (root / "data").mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            rows = build_data(rng, args.instances, root / "data" / "instances.jsonl")
            build_results(rng, rows, args.models, root / "results", root / "data" / "instances.jsonl")
            print(f"built {args.models} x {len(rows)} in {time.monotonic() - t0:.1f} s")
        results_bytes = sum(p.stat().st_size for p in (root / "results").rglob("*.json"))
        data_bytes = (root / "data" / "instances.jsonl").stat().st_size
        n_rows = sum(1 for p in (root / "results").rglob("*.json") if p.name != "run.json")
        print(f"instance files {results_bytes / 2**20:.1f} MiB ({n_rows}), data {data_bytes / 2**20:.1f} MiB")
        builds = [build_report(root / "results", root / "out") for _ in range(args.repeat)]
        print(summary("python -m evaluation.report wall s (whole report, 1000 bootstrap resamples)", [b[0] for b in builds]))
        print(summary("python -m evaluation.report CPU s (user + sys, the figure process too)", [b[3] for b in builds]))
        print(summary("python -m evaluation.report peak RSS MiB (largest process)", [b[1] for b in builds]))
        print(summary("python -m evaluation.report peak MiB of its process tree (PSS)", [b[2] for b in builds]))
        html = root / "out" / "report.html"
        print(f"report.html: {html.stat().st_size / 2**20:.1f} MiB ({page_breakdown(html)})")
        measures = [measure_browser(html, n_rows) for _ in range(args.repeat)]
        for name in measures[0]:
            print(summary(name, [m[name] for m in measures]))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
