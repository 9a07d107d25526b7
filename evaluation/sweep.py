"""A sweep: several runs in one process (``--model A B C``, or ``--sweep FILE.yaml``), each
``evaluate()``'s arguments, run one after another by the command; each writes its own run
directory as a single run would, and they share the rate limiters. (The sweep's table is
console.py's.)
"""
from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path

from .run_spec import ARGUMENTS, RunSpec
from .strategies import strategy_named
from ..utils.errors import BadInput

# What a sweep file may set: evaluate()'s arguments, and data_dir (the flag's name for data).
KEYS = (*ARGUMENTS, "data_dir")


def sweep_runs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[dict]:
    """``evaluate()``'s arguments for each run: each --model, or each entry of the --sweep
    file (raises ValueError naming the file, the run and the key)."""
    flags = {name: getattr(args, name) for name in KEYS}
    if args.sweep:
        return runs_from_file(Path(args.sweep), {**flags, "model": None})
    if not args.model:
        parser.error("give --model (one or more) or --sweep FILE")
    return [run_arguments({**flags, "model": name}) for name in args.model]


def run_arguments(values: dict) -> dict:
    """``evaluate()``'s arguments, checked as ``evaluate()`` checks them (ValueError), from
    flags or a sweep file's run (``data`` or ``data_dir``)."""
    values = dict(values)
    data_dir = values.pop("data_dir", None)
    if values.get("data") and data_dir:
        raise ValueError("give --data or --data_dir, not both")
    values["data"] = values.get("data") or data_dir
    spec = RunSpec(**values)
    return {name: getattr(spec, name) for name in ARGUMENTS}


def runs_from_file(path: Path, flags: dict) -> list[dict]:
    """A YAML file of runs::

        models: [gpt-4o-mini, claude-3-5-sonnet-20241022]   # each with every setting
        settings: [default, oracle]                          # optional, default: the CLI's
        task: both                                           # any other option: for all runs
        runs:                                                # optional explicit runs
          - {model: gpt-4.1-nano-2025-04-14, setting: summary}

    A key is one of ``evaluate()``'s arguments (``model_args`` as ``temperature=0.2`` or a
    mapping), checked as ``evaluate()`` checks it; the command line's own flags are the
    defaults. A bad key or value raises ValueError naming the file, the run and the key."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise ValueError(f"{path}: cannot read the sweep file: {reason}") from exc
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a sweep file is a mapping with 'models' and/or 'runs'")
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
    base = _merged(path, "", {**flags, "settings": None}, common)
    # The top level's options, checked once (a mistake is named there, not in each run).
    _expand(path, "", {**base, "model": "*"})

    runs = []
    for model in models or []:
        runs += _expand(path, f"models: {model!r}", _merged(path, f"models: {model!r}", base, {"model": model}))
    for n, entry in enumerate(entries or [], start=1):
        if not isinstance(entry, dict) or "model" not in entry:
            raise ValueError(f"{path}: runs #{n}: each run is a mapping with a 'model', got {entry!r}")
        # The top level's settings apply to its models; an explicit run names its own.
        runs += _expand(path, f"runs #{n}", _merged(path, f"runs #{n}", {**base, "settings": None}, entry))
    if not runs:
        raise ValueError(f"{path}: no runs: list 'models' or 'runs'")
    return runs


def _at(path: Path, where: str) -> str:
    return f"{path}: {where}" if where else str(path)


def _merged(path: Path, where: str, base: dict, values: dict) -> dict:
    """``base`` with ``values`` over it, their keys checked; ``settings`` (a list) is kept
    for ``_expand``."""
    for key in values:
        if key == "sweep":
            raise ValueError(f"{_at(path, where)}: sweep: a sweep file cannot name another sweep file")
        if key not in (*KEYS, "settings"):
            near = difflib.get_close_matches(key, [*KEYS, "settings", "models", "runs"], n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"{_at(path, where)}: unknown option {key!r}{hint}")
    if "setting" in values and "settings" in values:
        raise ValueError(f"{_at(path, where)}: give 'setting' or 'settings', not both")
    merged = {**base, **values}
    if "setting" in values:
        merged["settings"] = None
    if "data" in values or "data_dir" in values:  # the file's data replaces the command line's
        merged = {**merged, "data": values.get("data"), "data_dir": values.get("data_dir")}
    if isinstance(merged["settings"], str):
        merged["settings"] = [merged["settings"]]
    if merged["settings"] is not None and not (isinstance(merged["settings"], list) and merged["settings"]):
        raise ValueError(f"{_at(path, where)}: settings: expected a list of settings, got {merged['settings']!r}")
    for setting in merged["settings"] or ():
        try:
            strategy_named(setting)
        except BadInput as exc:
            raise ValueError(f"{_at(path, where)}: settings: {re.sub(r'^setting:? ', '', str(exc))}") from None
    if isinstance(merged["model"], list):  # a run has one model
        if len(merged["model"]) != 1:
            raise ValueError(f"{_at(path, where)}: model: one model per run, got {merged['model']!r} "
                             f"(list several under 'models')")
        merged["model"] = merged["model"][0]
    return merged


def _expand(path: Path, where: str, run: dict) -> list[dict]:
    """The runs of one entry, one per setting of its ``settings`` (or the file's), checked."""
    values = {k: v for k, v in run.items() if k != "settings"}
    try:
        return [run_arguments({**values, "setting": setting}) for setting in run["settings"] or [values["setting"]]]
    except ValueError as exc:
        raise ValueError(f"{_at(path, where)}: {exc}") from None
