"""What ``python -m evaluation.run`` prints at the end of a run: the summary table of
results.json (scores per instance type, counts, failures, usage and cost)."""
from __future__ import annotations

import sys
from pathlib import Path

import config


def _fmt(value, digits: int = 3) -> str:
    return "  -  " if value is None else f"{value:.{digits}f}"


def print_summary(results: dict, path: Path, out=None) -> None:
    out = out or sys.stdout
    s = results["settings"]
    print(f"\nCUPID · model {s['model']} · setting {s['setting']} · task {s['task']} · "
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
              + (f" · {batch['batches_resumed']} resumed" if batch["batches_resumed"] else "")
              + (f" · {batch['batches_lost']} lost" if batch["batches_lost"] else ""), file=out)

    cut = results.get("truncated_answers")
    if cut and cut["answers"]:
        print(f"answers cut at the token limit: {cut['truncated']} of {cut['answers']} "
              f"({100 * cut['share']:.1f}%)"
              + (" · " + ", ".join(f"{k} {v}" for k, v in cut["by_step"].items()) if cut["by_step"] else ""),
              file=out)
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
              + (f" · ~${cost:.4f}" if cost is not None else ""), file=out)
    embedded = sorted({s[role] for role in ("model", "evaluator") if str(s.get(role) or "")
                       .startswith(config.EMBEDDED_MODEL)})
    if embedded:
        print(f"note: {' and '.join(embedded)} is the embedded 135M offline model: these numbers "
              f"exercise the harness end to end and mean nothing about the benchmark", file=out)
    print(f"results: {path}", file=out)
