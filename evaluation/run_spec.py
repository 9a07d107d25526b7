"""The arguments of one evaluation run, checked: what ``evaluate()`` takes, what each flag of
``cupid-eval`` and each entry of a sweep file become. A bad value raises ``BadInput`` (a
ValueError) naming the argument, before anything runs."""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import config
from .data import InstanceSource
from .strategies import TASKS, Strategy, strategy_named
from .shards import ShardedInstances, parse_shard
from ..utils.command_line import generation_params, non_negative_int, positive_float, positive_int
from ..utils.errors import BadInput
from ..utils.models.pacing import parse_rate_limit
from ..utils.models.model import Model


# The tasks of a run: the benchmark's (strategies.TASKS) and the interactive one (interaction.py).
EVALUATION_TASKS = (*TASKS, "interaction")


@dataclass
class RunSpec:
    model: str | Model
    evaluator: str | Model = config.DEFAULT_EVALUATOR
    data: str | None = None            # a file or directory; None: the hub dataset
    dataset: str = config.HF_DATASET
    split: str = config.HF_SPLIT
    revision: str | None = None
    limit: int | None = None
    shard: tuple[int, int] | None = None
    task: str = "inference"
    setting: Any = "default"          # a strategy's name (strategies.py) or a strategy object
    strategy_model: str | Model | None = None  # the LLM an LLM-backed strategy asks; None: the evaluator
    results_dir: str = "results"
    n_workers: int = 4
    use_matcher: bool = False
    matcher_url: str = config.PREFMATCHER_BASE_URL
    model_args: dict | None = None
    evaluator_args: dict | None = None
    matcher_args: dict | None = None
    seed: int | None = None
    timeout: float = config.REQUEST_TIMEOUT
    max_retries: int = config.MAX_RETRIES
    no_cache: bool = False
    batch: bool = False
    rate_limit: list[str] = field(default_factory=list)
    progress_every: int = 0
    log_file: str | None = None
    exclude_filtered: bool = False     # results read from a filtered or refused answer left out
    simulator: str | Model = config.DEFAULT_SIMULATOR  # --task interaction: the user simulator's model
    max_rounds: int = config.DEFAULT_MAX_ROUNDS                # --task interaction: the evaluated model's replies at most
    judge_final: bool = False          # --task interaction: the evaluator judges each dialogue's last reply

    def __post_init__(self) -> None:
        for name in ("model", "evaluator", "simulator", "strategy_model"):
            value = getattr(self, name)
            if name == "strategy_model" and value is None:
                continue
            if not isinstance(value, Model) and not (isinstance(value, str) and value.strip()):
                raise BadInput(f"{name}: expected a model name or a Model instance, got {value!r}")
        checks = {"limit": positive_int, "n_workers": positive_int, "max_rounds": positive_int, "timeout": positive_float,
                  "max_retries": non_negative_int, "progress_every": non_negative_int, "seed": non_negative_int}
        for name, check in checks.items():
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                    raise BadInput(f"{name}: expected a number, got {value!r}")
                setattr(self, name, _checked(name, check, str(value)))
        for name in ("use_matcher", "no_cache", "batch", "exclude_filtered", "judge_final"):
            if not isinstance(getattr(self, name), bool):
                raise BadInput(f"{name}: expected true or false, got {getattr(self, name)!r}")
        for name in ("dataset", "split", "revision", "results_dir", "matcher_url", "log_file", "data"):
            value = getattr(self, name)
            if isinstance(value, Path):
                setattr(self, name, value := str(value))
            if value is not None and not isinstance(value, str):
                raise BadInput(f"{name}: expected a string, got {value!r}")
        if self.task not in EVALUATION_TASKS:
            raise BadInput(f"task: expected one of {', '.join(EVALUATION_TASKS)}, got {self.task!r}")
        self.strategy: Strategy = strategy_named(self.setting)  # BadInput naming what is wrong
        if self.shard is not None and not isinstance(self.shard, tuple):
            self.shard = _checked("shard", parse_shard, str(self.shard))
        for name in ("model_args", "evaluator_args", "matcher_args"):
            value = getattr(self, name)
            if isinstance(value, dict):
                value = ",".join(f"{k}={v}" for k, v in value.items())
            if value is not None:
                if not isinstance(value, str):
                    raise BadInput(f"{name}: expected key=value pairs or a dict, got {value!r}")
                setattr(self, name, _checked(name, generation_params, value))
        if isinstance(self.rate_limit, str):
            self.rate_limit = [self.rate_limit]
        if not isinstance(self.rate_limit, (list, tuple)):
            raise BadInput(f"rate_limit: expected limits such as tpm=N,rpm=N, got {self.rate_limit!r}")
        self.rate_limit = list(self.rate_limit)
        for spec in self.rate_limit:
            _checked("rate_limit", parse_rate_limit, spec)
        if self.revision is not None and self.data is not None:
            raise BadInput("revision: selects a version of the hub dataset; it does not apply to "
                           "local data (data, --data, --data_dir)")
        if self.task == "interaction":  # its first round is the generation task's request
            if "generation" not in self.strategy.tasks:
                raise BadInput(f"setting {self.strategy.name} applies to task {' or '.join(self.strategy.tasks)} only")
            problem = self.interaction_unsupported()
            if problem:
                raise BadInput(problem)
        elif self.task not in self.strategy.tasks:
            raise BadInput(f"setting {self.strategy.name} applies to task {' or '.join(self.strategy.tasks)} only")
        if self.strategy_model is not None and not self.strategy.uses_model:
            raise BadInput(f"strategy_model: setting {self.strategy.name} asks no LLM (a strategy asks one with "
                           f"uses_model = True, docs/strategies.md)")
        if self.judge_final and self.task != "interaction":
            raise BadInput("judge_final applies to task interaction only (the generation task judges its response)")
        if self.matcher_args and not self.use_matcher:
            raise BadInput("matcher_args needs use_matcher")
        if self.batch and self.no_cache:
            raise BadInput("batch keeps the batches' answers in the cache; drop no_cache")

    def interaction_unsupported(self) -> str | None:
        """Why --task interaction cannot run with these arguments yet (None: it can)."""
        if self.use_matcher:
            return "use_matcher: does not apply to task interaction (no checklist is matched)"
        if self.strategy.summaries:
            return f"setting {self.strategy.name}: session summaries are not supported with task interaction yet"
        if self.strategy.uses_model:
            return f"setting {self.strategy.name}: a strategy that asks an LLM is not supported with task interaction yet"
        if self.exclude_filtered:
            return "exclude_filtered: not supported with task interaction yet"
        return None

    def resolve_models(self) -> dict[str, Model]:
        """Each role's model: "model", "evaluator", "strategy" for a strategy that asks an LLM
        (``strategy_model``, else the evaluator's, as a model of its own), and "matcher" with
        ``use_matcher``."""
        from ..utils.models.registry import resolve_model

        # A role's overrides: the seed for every role, then the role's own *_args (which win);
        # none when the user chose none: the benchmark's parameters.
        seed = {} if self.seed is None else {"seed": self.seed}
        # A caller's Model object is copied, not rewritten: the run sets its overrides, cache and
        # usage on the copy (clients and weights are shared, not duplicated).
        own = lambda value: copy.copy(value) if isinstance(value, Model) else value  # noqa: E731
        common = {"timeout": self.timeout, "max_retries": self.max_retries}
        models = {"model": resolve_model(own(self.model), role="evaluated", overrides={**seed, **(self.model_args or {})},
                                         **common),
                  "evaluator": resolve_model(own(self.evaluator), role="evaluator",
                                             overrides={**seed, **(self.evaluator_args or {})}, **common)}
        if self.strategy.uses_model:  # a Model object of its own (a copy): its usage is counted apart
            chosen = self.strategy_model if self.strategy_model is not None else self.evaluator
            models["strategy"] = resolve_model(own(chosen), role="strategy", overrides=seed, **common)
        if self.use_matcher:
            models["matcher"] = resolve_model(f"vllm:{config.PREFMATCHER_MODEL}@{self.matcher_url}", role="matcher",
                                              overrides={**seed, **(self.matcher_args or {})}, **common)
        return models

    def instances(self) -> tuple[InstanceSource, Any]:
        """The data, validated in full, and the instances the run selects (its shard's)."""
        data = bundled_path(str(self.data)) if self.data else self.data  # a dry run's path too
        source = InstanceSource(data_path=data, dataset=None if self.data else self.dataset,
                                split=self.split, limit=self.limit, revision=self.revision)
        source.validate()
        return source, ShardedInstances(source, *self.shard) if self.shard else source


ARGUMENTS = tuple(f.name for f in fields(RunSpec))


def _checked(name: str, check, value: str):
    try:
        return check(value)
    except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
        raise BadInput(f"{name}: {exc}") from None


def data_path(data: Any, results_dir: str | Path) -> str | None:
    """A path for ``data``: a path as it is (the shipped ``data/sample`` found from anywhere),
    rows in memory (a list of dicts, a ``datasets.Dataset``) written once to
    ``RESULTS_DIR/.inputs/data-<hash>.jsonl``, so the run records a file it came from."""
    if data is None:
        return None
    if isinstance(data, (str, Path)):
        return bundled_path(str(data))
    if type(data).__module__.split(".")[0] == "datasets" and hasattr(data, "to_list"):
        data = data.to_list()
    if not isinstance(data, (list, tuple)):
        raise BadInput(f"data: expected a path, a list of dicts or a datasets.Dataset, got {type(data).__name__}")
    if not data:
        raise BadInput("data: the list of rows is empty")
    lines = []
    for number, row in enumerate(data):
        if not isinstance(row, dict):
            raise BadInput(f"data: row {number} is a {type(row).__name__}, not a dict in the dataset's schema")
        try:
            lines.append(json.dumps(row, ensure_ascii=False, sort_keys=True))
        except (TypeError, ValueError) as exc:
            raise BadInput(f"data: row {number} is not JSON ({exc})") from None
    text = "\n".join(lines) + "\n"
    path = Path(results_dir) / ".inputs" / f"data-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}.jsonl"
    if not path.exists():
        from ..utils.io import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    return str(path)


def bundled_path(path: str) -> str:
    """A relative data path that does not exist here but names a file shipped with the
    project (``data/sample``) resolves to the installed copy, so the README's commands work
    from any directory."""
    if Path(path).is_absolute() or Path(path).exists():
        return path
    shipped = config.ROOT / path
    return str(shipped) if shipped.exists() else path
