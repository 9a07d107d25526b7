"""A sweep: several runs in one process (``--model A B C``, or ``--sweep FILE.yaml``), each
``evaluate()``'s arguments, run one after another by the command; each writes its own run
directory as a single run would, and they share the rate limiters. (The sweep's table is
console.py's.)
"""
from __future__ import annotations

import argparse
import copy
import difflib
from pathlib import Path

from cupid.evaluation.run_spec import ARGUMENTS, RunSpec
from cupid.utils.command_line import generation_params


# ---------------------------------------------------------------------------------------
# Sweeps
# ---------------------------------------------------------------------------------------
def sweep_runs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[dict]:
    """``evaluate()``'s arguments for each run: each --model, or each entry of the --sweep
    file (raises ValueError naming the file, the run and the key)."""
    if args.sweep:
        return [run_arguments(run) for run in runs_from_file(Path(args.sweep), args, parser)]
    if not args.model:
        parser.error("give --model (one or more) or --sweep FILE")
    runs = []
    for name in args.model:
        run = argparse.Namespace(**vars(args))
        run.model = name
        runs.append(run_arguments(run))
    return runs


def run_arguments(run: argparse.Namespace) -> dict:
    """``evaluate()``'s arguments from parsed flags (``--data`` and ``--data_dir`` are its
    ``data``), checked as ``evaluate()`` checks them (ValueError)."""
    if run.data and run.data_dir:
        raise ValueError("give --data or --data_dir, not both")
    arguments = {name: getattr(run, name) for name in ARGUMENTS if hasattr(run, name)}
    arguments["data"] = run.data or run.data_dir
    RunSpec(**arguments)  # the checks evaluate() makes, before any run starts
    return arguments


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
        if isinstance(run.model, str):  # a run, not the top level: checked as evaluate() checks it
            try:
                run_arguments(run)
            except ValueError as exc:
                raise ValueError(f"{self._at(where)}: {exc}") from None
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
