"""What ``cupid-eval`` prints: the summary table of results.json at the end of
a run (scores per instance type, counts, failures, usage and cost) and a sweep's table. The
progress lines off a terminal are utils/progress.py's."""
from __future__ import annotations

import sys
from pathlib import Path

from .. import config


def _fmt(value, digits: int = 3, missing: str = "  -  ") -> str:
    return missing if value is None else f"{value:.{digits}f}"


def print_summary(results: dict, path: Path | None = None, out=None) -> None:
    out = out or sys.stdout
    s = results["settings"]
    labels = " (uses labels)" if s.get("uses_labels") else ""
    print(f"\nCUPID · model {s['model']} · setting {s['setting']}{labels} · task {s['task']} · "
          f"scorer {s['scorer']}", file=out)
    rows = [("all instances", results)] + list(results["by_instance_type"].items())
    print(f"{'':18}{'P':>7}{'R':>7}{'F1':>7}{'judge':>8}{'n_inf':>7}{'n_gen':>7}", file=out)
    for name, block in rows:
        inf = block.get("inference") or {}
        gen = block.get("generation") or {}
        print(f"{name:18}{_fmt(inf.get('precision')):>7}{_fmt(inf.get('recall')):>7}"
              f"{_fmt(inf.get('f1')):>7}{_fmt(gen.get('average_score'), 2):>8}"
              f"{block.get('inference_n_instances', 0) if inf else '-':>7}"
              f"{gen.get('n_instances', '-') if gen else '-':>7}", file=out)
    if results.get("inference_macro"):
        m = results["inference_macro"]
        print(f"macro (per-instance mean): P {_fmt(m['precision'])}  R {_fmt(m['recall'])}  "
              f"F1 {_fmt(m['f1'])}", file=out)
    print("(P, R, F1: micro-pooled over every checklist entry, as the release's results.json; judge: the "
          "mean 1-10 score; n_inf, n_gen: instances scored in inference, generation)", file=out)
    c = results["counts"]
    print(f"instances in the run directory: {c['instances']} · evaluated {c['evaluated']} · "
          f"FAILED {c['failed']} · skipped {c['skipped']}"
          + (f" · unfinished {c['unfinished']}" if c.get("unfinished") else ""), file=out)
    this = results.get("this_invocation")
    if this:
        print(f"this invocation: found done {this['found_done']} · ran {this['ran']} "
              f"({this['ran_failed']} failed) · remaining {this['remaining']}"
              + (f" ({this['in_progress_elsewhere']} in progress elsewhere)"
                 if this["in_progress_elsewhere"] else "")
              + f" · {this['wall_time_s']:.1f} s (all invocations {s['wall_time_s']:.1f} s)", file=out)
    batch = (this or {}).get("batch")
    if batch:
        print(f"batch mode: {batch['rounds']} round(s) · {batch['batches_submitted']} batch(es) "
              f"submitted with {batch['items_submitted']} request(s)"
              + (f" ({batch['items_resubmitted']} submitted again)" if batch["items_resubmitted"] else "")
              + f" · {batch['items_answered']} answered · {batch['items_failed']} failed in their batch"
              + (f" · {batch['items_adapted']} refused a parameter (submitted again, adapted)"
                 if batch.get("items_adapted") else "")
              + (f" · {batch['batches_resumed']} resumed" if batch["batches_resumed"] else "")
              + (f" · {batch['batches_lost']} lost" if batch["batches_lost"] else ""), file=out)

    kept = results.get("session_selection")
    if kept and kept["sessions_shown"] is not None and s["setting"] != "default":
        pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
        print(f"context: {kept['sessions_shown']:.1f} sessions shown per instance · session recall "
              f"{pct(kept['recall'])} · precision {pct(kept['precision'])} (docs/strategies.md)", file=out)
    print_endings(results, out)
    for step, reasons in c["failures_by_step"].items():
        for reason, n in reasons.items():
            print(f"  failed at {step} ×{n}: {reason}", file=out)
    for role, usage in results["usage"]["this_invocation"].items():
        cost = usage.get("estimated_cost_usd")
        print(f"{role}: {usage['model']} · {usage['calls']} calls ({usage['batch_calls']} in batches, "
              f"{usage['cache_hits']} cached, "
              f"{usage['retries']} retries, {usage['failed_calls']} failed) · "
              f"{usage['prompt_tokens']}+{usage['completion_tokens']} tokens"
              + (f" ({usage['reasoning_tokens']} reasoning)" if usage.get("reasoning_tokens") else "")
              + (f" ({usage['cached_prompt_tokens']} prompt tokens cached)"
                 if usage.get("cached_prompt_tokens") else "")
              + (f" · ~${cost:.4f}" if cost is not None else ""), file=out)
    memory = results.get("memory_cost")
    if memory:
        cost = memory.get("estimated_cost_usd")
        print(f"memory cost (the strategy's own LLM, {memory['model']}): {memory['calls']} calls recorded for "
              f"{memory['instances']} instances · {memory['prompt_tokens']}+{memory['completion_tokens']} tokens"
              + (f" · ~${cost:.4f}" if cost is not None else "") + ", apart from the evaluated model's", file=out)
    print_closing(s, ("model", "evaluator"), path, out)


def print_closing(settings: dict, roles: tuple[str, ...], path: Path | None, out) -> None:
    """The summary's last lines: what the embedded model's numbers are, where the results are."""
    embedded = sorted({settings[role] for role in roles if str(settings.get(role) or "")
                       .startswith(config.EMBEDDED_MODEL)})
    if embedded:
        print(f"note: {' and '.join(embedded)} is the embedded 135M offline model: these numbers "
              f"exercise the harness end to end and mean nothing about the benchmark", file=out)
    if path is not None:
        print(f"results: {path}", file=out)


def endings_line(endings: dict) -> str:
    """"cut at the token limit 0, filtered 1, refused 2 of 480 answers", with the steps."""
    counts = ", ".join(f"{label} {endings.get(key, 0)}" for key, label in (
        ("length", "cut at the token limit"), ("filtered", "filtered"), ("refused", "refused"),
        ("blocked", "blocked"), ("empty", "empty")))
    steps = "; ".join(f"{step}: " + ", ".join(f"{k} {v}" for k, v in by.items())
                      for step, by in (endings.get("by_step") or {}).items())
    return f"{counts} of {endings['answers']} answers" + (f" ({steps})" if steps else "")


def print_endings(results: dict, out) -> None:
    """How the answers ended (results.json answer_endings) and the results read from a
    filtered or refused answer (counts.flagged): left out of the numbers above or not."""
    endings = results.get("answer_endings")
    if endings and endings["answers"]:
        print(f"answers: {endings_line(endings)}", file=out)
    flagged = {task: sum(by.values()) for task, by in (results["counts"].get("flagged") or {}).items()}
    if any(flagged.values()):
        kept = "left out of the numbers above (--exclude_filtered)" if results["counts"].get("exclude_filtered") \
            else "included in the numbers above; --exclude_filtered leaves them out"
        print("read from a filtered or refused answer: "
              + ", ".join(f"{task} {n}" for task, n in flagged.items() if n) + f" instance(s), {kept}",
              file=out)


def print_sweep_table(rows: list[tuple[dict, dict | None, int]]) -> None:
    """One line per run of a sweep: micro P/R/F1, judge score, counts, cost, exit status."""
    print(f"\nsweep: {len(rows)} runs")
    print(f"{'model':40}{'setting':18}{'P':>7}{'R':>7}{'F1':>7}{'judge':>7}{'done':>6}{'failed':>7}"
          f"{'cost $':>9}{'exit':>5}")
    for run, results, code in rows:
        if results is None:
            print(f"{str(run['model']):40}{run['setting']:18}{'(not run)':>55}{code:>5}")
            continue
        if results.get("task") == "interaction":  # its own measures (evaluation/interaction.py)
            rounds, counts = results["rounds_to_satisfaction"], results["counts"]
            print(f"{results['settings']['model']:40}{run['setting']:18}"
                  f"{'rounds to satisfaction ' + _fmt(rounds['value'], 2, '-'):>35}"
                  f"{counts['satisfied'] + counts['unsatisfied']:>6}{counts['failed']:>7}{'-':>9}{code:>5}")
            continue
        inf, gen, counts = results.get("inference") or {}, results.get("generation") or {}, results["counts"]
        costs = [u.get("estimated_cost_usd") for u in results["usage"]["recorded"].values()]
        costs += [results["memory_cost"].get("estimated_cost_usd")] if results.get("memory_cost") else []
        cost = sum(c for c in costs if c is not None) if costs else None  # a strategy's own calls too
        print(f"{results['settings']['model']:40}{run['setting']:18}{_fmt(inf.get('precision'), 3, '-'):>7}"
              f"{_fmt(inf.get('recall'), 3, '-'):>7}{_fmt(inf.get('f1'), 3, '-'):>7}"
              f"{_fmt(gen.get('average_score'), 2, '-'):>7}{counts['evaluated']:>6}{counts['failed']:>7}"
              f"{_fmt(cost, 4, '-'):>9}{code:>5}")


def print_interaction_summary(results: dict, path: Path | None = None, out=None) -> None:
    out = out or sys.stdout
    s, c = results["settings"], results["counts"]
    print(f"\nCUPID interaction · model {s['model']} · setting {s['setting']} · simulator {s['simulator']} · "
          f"max_rounds {s['max_rounds']}", file=out)
    rts = results["rounds_to_satisfaction"]
    print(f"dialogues: {c['selected']} · satisfied {c['satisfied']} · unsatisfied {c['unsatisfied']} "
          f"(counted at {s['max_rounds']} rounds) · FAILED {c['failed']} · skipped {c['skipped']}"
          + (f" · unfinished {c['unfinished']}" if c.get("unfinished") else ""), file=out)
    if rts["value"] is not None:
        print(f"rounds to satisfaction: {rts['value']:.2f} [{rts['low']:.2f}, {rts['high']:.2f}] (n={rts['n']})",
              file=out)
    saved = results.get("rounds_saved_vs_none")
    if saved and saved.get("difference") is not None:
        print(f"feedback rounds saved vs none: {saved['difference']:+.2f} [{saved['low']:+.2f}, "
              f"{saved['high']:+.2f}] (paired n={saved['n']})", file=out)
    judged = results.get("final_judge")
    if judged and judged.get("value") is not None:
        print(f"judge score of the last reply ({judged['scorer']}): {judged['value']:.2f} [{judged['low']:.2f}, "
              f"{judged['high']:.2f}] (n={judged['n']}" + (f", {judged['failed']} FAILED" if judged["failed"] else "")
              + ")", file=out)
    curve = " ".join(f"{p['value']:.2f}" if p["value"] is not None else "-" for p in results["satisfied_by_round"])
    print(f"satisfied by round 1..{s['max_rounds']}: {curve}", file=out)
    for role, usage in (results.get("usage") or {}).get("this_invocation", {}).items():
        print(f"{role} {usage.get('model')}: {usage.get('calls', 0)} calls"
              + (f" ({usage['cache_hits']} more answered from the cache)" if usage.get("cache_hits") else "")
              + f" · {usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} completion tokens",
              file=out)
    print_closing(s, ("model", "simulator"), path, out)
