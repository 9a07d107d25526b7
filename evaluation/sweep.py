"""Paper-scale runs from one command: sweeps, shards and a progress log.

* A sweep is several runs in one process (``--model A B C``, or ``--sweep FILE.yaml``):
  they share the response cache, the evaluator and the rate limiters, and each writes its
  own run directory as a single run would.
* A shard (``--shard I/N``) is the part of the instances whose id hashes to I (1..N):
  stable across machines and orderings, unlike the first N rows.
* ``ProgressLog`` writes a line every K instances with counts, rate and ETA, for runs
  under nohup, SLURM or CI where no progress bar is drawn.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, TextIO


# ---------------------------------------------------------------------------------------
# Shards
# ---------------------------------------------------------------------------------------
def parse_shard(spec: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); the index counts from 1."""
    head, sep, tail = spec.partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index, count = 0, 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise ValueError(f"--shard {spec!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return index, count


def shard_of(instance_id: str, count: int) -> int:
    """The shard (1..count) an instance belongs to: a hash of its id, so every machine
    computes the same split whatever order it reads the data in."""
    digest = hashlib.sha256(instance_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


class ShardedInstances:
    """The instances of one shard of a source (iterable, with a length)."""

    def __init__(self, source, index: int, count: int) -> None:
        self.source, self.index, self.count = source, index, count
        self._length: int | None = None
        self.name = f"{getattr(source, 'name', 'instances')} (shard {index}/{count})"

    def describe(self) -> dict:
        """The whole data's description: every shard's manifest names the same data, so
        shards share one run directory."""
        return self.source.describe()

    def __iter__(self) -> Iterator:
        return (i for i in self.source if shard_of(i.instance_id, self.count) == self.index)

    def __len__(self) -> int:
        if self._length is None:
            self._length = sum(1 for _ in self)
        return self._length


# ---------------------------------------------------------------------------------------
# Sweeps
# ---------------------------------------------------------------------------------------
def sweep_runs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[argparse.Namespace]:
    """One Namespace per run: each --model, or each entry of the --sweep file."""
    if args.sweep:
        return runs_from_file(Path(args.sweep), args, parser)
    if not args.model:
        parser.error("give --model (one or more) or --sweep FILE")
    runs = []
    for name in args.model:
        run = argparse.Namespace(**vars(args))
        run.model = name
        runs.append(run)
    return runs


def runs_from_file(path: Path, args: argparse.Namespace,
                   parser: argparse.ArgumentParser) -> list[argparse.Namespace]:
    """A YAML file of runs::

        models: [gpt-4o-mini, claude-3-5-sonnet-20241022]   # each with every setting
        settings: [default, oracle]                          # optional, default: the CLI's
        task: both                                           # any other option: for all runs
        runs:                                                # optional explicit runs
          - {model: gpt-4.1-nano-2025-04-14, setting: summary}
    """
    import yaml

    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the sweep file: {exc}") from exc
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a sweep file is a mapping with 'models' and/or 'runs'")
    options = {a.dest for a in parser._actions}
    common = {k: v for k, v in spec.items() if k not in ("models", "settings", "runs")}

    def make(entry: dict, where: str) -> argparse.Namespace:
        run = argparse.Namespace(**vars(args))
        for key, value in {**common, **entry}.items():
            if key == "sweep" or key not in options:
                raise ValueError(f"{path}: {where}: unknown option {key!r}")
            setattr(run, key, value)
        if not isinstance(run.model, str) or not run.model:
            raise ValueError(f"{path}: {where}: 'model' must be a model name")
        return run

    runs = []
    settings = spec.get("settings") or [args.setting]
    for model in spec.get("models") or []:
        for setting in settings:
            runs.append(make({"model": model, "setting": setting}, f"models: {model}"))
    for n, entry in enumerate(spec.get("runs") or [], start=1):
        if not isinstance(entry, dict) or "model" not in entry:
            raise ValueError(f"{path}: runs[{n}]: each run is a mapping with a 'model'")
        runs.append(make(entry, f"runs[{n}]"))
    if not runs:
        raise ValueError(f"{path}: no runs: list 'models' or 'runs'")
    return runs


def print_sweep_table(rows: list[tuple[argparse.Namespace, dict | None, int]], out: TextIO | None = None) -> None:
    """One line per run of a sweep: micro P/R/F1, judge score, counts, cost, exit status."""
    out = out or sys.stdout
    print(f"\nsweep: {len(rows)} runs", file=out)
    print(f"{'model':40}{'setting':18}{'P':>7}{'R':>7}{'F1':>7}{'judge':>7}{'done':>6}{'failed':>7}"
          f"{'cost $':>9}{'exit':>5}", file=out)
    for run, results, code in rows:
        if results is None:
            print(f"{run.model:40}{run.setting:18}{'(not run)':>55}{code:>5}", file=out)
            continue
        inf, gen, counts = results.get("inference") or {}, results.get("generation") or {}, results["counts"]
        costs = [u.get("estimated_cost_usd") for u in results["usage"]["recorded"].values()]
        cost = sum(c for c in costs if c is not None) if costs else None

        def f(v, d=3):
            return "-" if v is None else f"{v:.{d}f}"
        print(f"{results['settings']['model']:40}{run.setting:18}{f(inf.get('precision')):>7}"
              f"{f(inf.get('recall')):>7}{f(inf.get('f1')):>7}{f(gen.get('average_score'), 2):>7}"
              f"{counts['evaluated']:>6}{counts['failed']:>7}{f(cost, 4):>9}{code:>5}", file=out)


# ---------------------------------------------------------------------------------------
# Progress outside a terminal
# ---------------------------------------------------------------------------------------
class ProgressLog:
    """A line every ``every`` instances (and at the end): done of total, failed, rate, ETA."""

    def __init__(self, total: int, every: int, label: str, out: TextIO | None = None,
                 clock=time.monotonic) -> None:
        self.total, self.every, self.label = total, max(1, every), label
        self.out = out or sys.stderr
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self.done = 0
        self.failed = 0

    def add(self, failed: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += int(failed)
            if self.done % self.every == 0 or self.done == self.total:
                print(self.line(), file=self.out, flush=True)

    def line(self) -> str:
        elapsed = max(1e-9, self._clock() - self._started)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = left / rate if rate > 0 else float("inf")
        return (f"progress {self.label}: {self.done}/{self.total} instances "
                f"({100 * self.done / max(1, self.total):.0f}%), {self.failed} failed, "
                f"{rate * 60:.1f}/min, elapsed {_clock_text(elapsed)}, ETA {_clock_text(eta)}")


def _clock_text(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
