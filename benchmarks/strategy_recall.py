"""What each context strategy keeps of the prior sessions, before any model is asked: per
strategy, the sessions shown, session recall and precision against the relevant sessions
(evaluation/session_recall.py, as results.json's session_selection computes them), the
history text's estimated tokens, and the strategy's own time per instance.

    python benchmarks/strategy_recall.py                          # data/sample
    python benchmarks/strategy_recall.py --data_dir DIR --setting recent:k=2 --setting bm25:k=3

No network, no key: the strategies run on the data alone (dense:k=N needs the dense extra).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT.parent) not in sys.path:
    sys.path.insert(0, str(ROOT.parent))

from cupid.evaluation.data import InstanceSource  # noqa: E402
from cupid.evaluation.session_recall import session_selection, shown_record  # noqa: E402
from cupid.evaluation.strategies import strategy_named  # noqa: E402

DEFAULT_SETTINGS = ["default", "oracle", "recent:k=2", "recent:k=4", "bm25:k=3", "dense:k=3"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=str(ROOT / "data" / "sample"))
    parser.add_argument("--setting", action="append", help="a strategy (repeatable); default: " + ", ".join(DEFAULT_SETTINGS))
    args = parser.parse_args()
    instances = list(InstanceSource(data_path=Path(args.data_dir)))
    print(f"{len(instances)} instances from {args.data_dir}")
    print(f"{'strategy':14}{'shown':>7}{'recall':>8}{'precision':>10}{'history tok':>12}{'ms/instance':>13}")
    for name in args.setting or DEFAULT_SETTINGS:
        try:
            setting = strategy_named(name)
        except ValueError as exc:
            print(f"{name:14}  not run: {exc}")
            continue
        setting.shown(instances[0])  # a model to load (dense) is not timed
        started, records = time.perf_counter(), []
        for instance in instances:
            shown = shown_record(setting.shown(instance), setting.summaries)
            records.append({"instance_type": instance.instance_type, "shown": shown,
                            "history": {"relevant_positions": instance.relevant_positions()}})
        per_instance = 1000 * (time.perf_counter() - started) / len(instances)
        s = session_selection(records)
        f = lambda v: "—" if v is None else f"{100 * v:.1f}"  # noqa: E731
        print(f"{setting.name:14}{s['sessions_shown']:>7.1f}{f(s['recall']):>8}{f(s['precision']):>10}"
              f"{s['history_tokens']:>12,.0f}{per_instance:>13.1f}")


if __name__ == "__main__":
    main()
