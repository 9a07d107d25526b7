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
import copy
import difflib
import hashlib
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, TextIO

from evaluation.cli import flag_conflict
from utils.cli import generation_params


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

    Every value goes through the command line's parser (the same types, choices and
    checks; ``model_args`` as ``temperature=0.2`` or a mapping); the command line's own
    flags are the defaults. A bad key or value raises ValueError naming the file, the run
    and the key."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise ValueError(f"{path}: cannot read the sweep file: {reason}") from exc
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a sweep file is a mapping with 'models' and/or 'runs'")
    options = SweepOptions(path, parser)
    common = {k: v for k, v in spec.items() if k not in ("models", "runs")}
    models = spec.get("models")
    if isinstance(models, str):
        models = [models]
    if models is not None and not (isinstance(models, list) and models):
        raise ValueError(f"{path}: models: expected a list of model names, got {models!r}")
    entries = spec.get("runs")
    if entries is not None and not isinstance(entries, list):
        raise ValueError(f"{path}: runs: expected a list of runs (mappings with a 'model'), "
                         f"got {entries!r}")
    if "model" in common and models is None:
        models = [common.pop("model")]
    elif "model" in common:
        raise ValueError(f"{path}: model: give 'models' or 'model' at the top level, not both")
    # The top level's options, checked once (a mistake is named there, not in each run).
    base = options.apply(args, common, "")
    # The top level's settings apply to its models; an explicit run names its own.
    base_of_runs = argparse.Namespace(**{**vars(base), "settings": None})

    runs = []
    for model in models or []:
        runs += options.expand(base, {"model": model}, f"models: {model!r}")
    for n, entry in enumerate(entries or [], start=1):
        if not isinstance(entry, dict) or "model" not in entry:
            raise ValueError(f"{path}: runs #{n}: each run is a mapping with a 'model', got {entry!r}")
        runs += options.expand(base_of_runs, entry, f"runs #{n}")
    if not runs:
        raise ValueError(f"{path}: no runs: list 'models' or 'runs'")
    return runs


class SweepOptions:
    """A sweep file's values put through the command line's parser, one key at a time so
    that an error names its key."""

    def __init__(self, path: Path, parser: argparse.ArgumentParser) -> None:
        self.path = path
        # A copy whose errors raise instead of exiting (the parser's actions are shared).
        self.parser = copy.copy(parser)
        self.parser.error = self._raise  # type: ignore[method-assign]
        self.actions = {a.dest: a for a in parser._actions
                        if a.option_strings and a.dest not in ("help", "sweep")}

    @staticmethod
    def _raise(message: str):
        raise _OptionError(message)

    def expand(self, base: argparse.Namespace, entry: dict, where: str) -> list[argparse.Namespace]:
        """The runs of one entry: one per setting of its ``settings`` (or the file's)."""
        run = self.apply(base, entry, where)
        runs = [self.apply(run, {"setting": s}, where) for s in run.settings] if run.settings \
            else [run]
        for one in runs:
            del one.settings
        return runs

    def apply(self, base: argparse.Namespace, values: dict, where: str) -> argparse.Namespace:
        """A copy of ``base`` with ``values`` parsed in; ``settings`` (a list) is kept on
        the namespace for ``expand``."""
        run = argparse.Namespace(**copy.deepcopy(vars(base)))
        if not hasattr(run, "settings"):
            run.settings = None
        if "setting" in values and "settings" in values:
            raise ValueError(f"{self._at(where)}: give 'setting' or 'settings', not both")
        for key, value in values.items():
            if key == "settings":
                listed = [value] if isinstance(value, str) else value
                if not isinstance(listed, list) or not listed:
                    raise ValueError(f"{self._at(where)}: settings: expected a list of settings, "
                                     f"got {value!r}")
                for setting in listed:  # each checked as --setting would be
                    self._parse(argparse.Namespace(**vars(run)), "setting", setting, where,
                                label="settings")
                run.settings = list(listed)
                continue
            self._parse(run, key, value, where)
            if key == "setting":
                run.settings = None
        if "model" in values and isinstance(run.model, list):  # a run has one model
            if len(run.model) != 1:
                raise ValueError(f"{self._at(where)}: model: one model per run, got {run.model!r} "
                                 f"(list several under 'models')")
            run.model = run.model[0]
        conflict = flag_conflict(run)
        if conflict:
            raise ValueError(f"{self._at(where)}: {conflict}")
        if run.shard:
            try:
                parse_shard(run.shard)
            except ValueError as exc:
                reason = str(exc).removeprefix("--shard ")
                raise ValueError(f"{self._at(where)}: shard: {reason}") from None
        return run

    def _at(self, where: str) -> str:
        return f"{self.path}: {where}" if where else str(self.path)

    def _parse(self, run: argparse.Namespace, key: str, value, where: str,
               label: str | None = None) -> None:
        prefix = f"{self._at(where)}: {label or key}"
        action = self.actions.get(key)
        if action is None:
            if key == "sweep":
                raise ValueError(f"{prefix}: a sweep file cannot name another sweep file")
            near = difflib.get_close_matches(key, [*self.actions, "settings", "models", "runs"], n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"{self._at(where)}: unknown option {key!r}{hint}")
        if action.nargs == 0:  # a switch: --batch, --no_cache, --use_matcher
            if not isinstance(value, bool):
                raise ValueError(f"{prefix}: expected true or false, got {value!r}")
            setattr(run, action.dest, value)
            return
        if value is None:
            if action.default is not None:
                raise ValueError(f"{prefix}: a value is required")
            setattr(run, action.dest, None)
            return
        if isinstance(value, dict) and action.type is generation_params:
            value = ",".join(f"{k}={v}" for k, v in value.items())
        values = value if isinstance(value, list) and (action.nargs == "+" or
                                                      isinstance(action, argparse._AppendAction)) \
            else [value]
        if isinstance(action, argparse._AppendAction):
            setattr(run, action.dest, [])  # the file's list replaces the command line's
        option = action.option_strings[0]
        for item in values:
            if isinstance(item, (dict, list, bool)):
                raise ValueError(f"{prefix}: expected a single value, got {item!r}")
        tokens = [option, *map(str, values)] if action.nargs == "+" else \
            [f"{option}={item}" for item in values]
        try:
            self.parser.parse_args(tokens, namespace=run)
        except _OptionError as exc:
            message = str(exc)
            message = message.split(": ", 1)[1] if message.startswith("argument ") else message
            raise ValueError(f"{prefix}: {message}") from None


class _OptionError(Exception):
    pass


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
    """A line every ``every`` instances (and at the end): done of total, failed, rate, ETA;
    with ``heartbeat_s``, also a line whenever that long passed without one, so a slow run
    (the embedded model takes minutes per instance) shows it is alive from the start.

    The rate counts only instances run in this invocation (those found done go by at once),
    and there is no ETA until as many instances as run at once (``workers``) have finished:
    before that, completions say nothing of the throughput of a full pipeline."""

    def __init__(self, total: int, every: int, label: str, out: TextIO | None = None,
                 clock=time.monotonic, workers: int = 1, heartbeat_s: float | None = None) -> None:
        self.total, self.every, self.label = total, max(1, every), label
        self.workers = max(1, workers)
        self.out = out or sys.stderr
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._lock = threading.Lock()
        self.done = 0
        self.failed = 0
        self.found_done = 0
        self._stop = threading.Event()
        self._heartbeat = None
        if heartbeat_s:
            self._heartbeat = threading.Thread(target=self._beat, args=(heartbeat_s,),
                                               name="cupid-progress", daemon=True)
            self._heartbeat.start()

    def add(self, failed: bool, found_done: bool = False) -> None:
        with self._lock:
            self.done += 1
            self.failed += int(failed)
            self.found_done += int(found_done)
            if self.done % self.every == 0 or self.done == self.total:
                self._print()

    def _print(self) -> None:
        self._last_line = self._clock()
        print(self.line(), file=self.out, flush=True)

    def _beat(self, interval: float) -> None:
        while not self._stop.wait(interval / 4):
            with self._lock:
                if self._clock() - self._last_line >= interval and self.done < self.total:
                    self._print()

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()

    def line(self) -> str:
        elapsed = max(1e-9, self._clock() - self._started)
        ran = self.done - self.found_done
        left = self.total - self.done
        found = f", {self.found_done} found done" if self.found_done else ""
        head = (f"progress {self.label}: {self.done}/{self.total} instances "
                f"({100 * self.done / max(1, self.total):.0f}%), {self.failed} failed{found}")
        if ran == 0:
            return f"{head}, elapsed {_clock_text(elapsed)}" + (", nothing left to run" if not left else "")
        rate = ran / elapsed
        first_wave = min(self.workers, ran + left)
        eta = (_clock_text(left / rate) if ran >= first_wave
               else f"after the first {first_wave} finish")
        return f"{head}, {rate * 60:.1f}/min, elapsed {_clock_text(elapsed)}, ETA {eta}"


def _clock_text(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
