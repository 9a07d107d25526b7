"""What the report cannot show yet: for every table and figure of the paper whose inputs a
results directory lacks, which input is missing and the exact command that would make it.

The paper's tables and figures and what each rests on (§4, Appendix F):

    Table 1   inference, default setting per instance type, and the oracle setting
    Table 2   the error types of up to 50 low-F1 default-setting inferences per model
    Table 3   generation, default per instance type, oracle, oracle preference
    Table 9   inference, summary setting          Table 10  generation, summary setting
    Figure 6  each model in the default and the summary setting, inference and generation
    Table 11  inference matched by PrefMatcher-7B (default and oracle)
    Figure 3  per-instance F1 against the position of the relevant sessions (default)
    Figure 4  F1 with GPT-4o against F1 with PrefMatcher on the same inferences
    Figure 5  inference F1 against generation score, one point per model (3 or more)
    Figure 9  F1 and judge score against history length (default)
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ... import config
from . import error_types
from .results import Run

# Figure 5 draws a correlation; fewer points give no r (analysis.pearson).
MIN_MODELS_FOR_CORRELATION = 3


@dataclass
class Gap:
    """One table or figure (or part of one) the report cannot produce."""
    item: str                                   # "Table 1 (oracle column)"
    lacks: str                                  # what input is missing
    commands: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"{self.item}: lacks {self.lacks}"] + [f"    {c}" for c in self.commands]


@dataclass
class RunCommand:
    """How a model was run: enough to write the command of a missing setting or task."""
    model: str
    overrides: dict
    data_flags: list[str]
    evaluator: str | None
    # False for a Model object handed to evaluate() (a notebook's class): no command line names it.
    runnable: bool = True


def _data_flags(data_source: str | None) -> list[str]:
    """The flags that select the same data as a run's manifest's data_source."""
    if not data_source:
        return []
    hub = re.fullmatch(r"(?P<name>[^\[\]]+)\[(?P<split>[^\[\]]+)\]", data_source)
    if hub and not Path(data_source).exists():
        flags = []
        if hub["name"] != config.HF_DATASET:
            flags += ["--dataset", hub["name"]]
        if hub["split"] != config.HF_SPLIT:
            flags += ["--split", hub["split"]]
        return flags
    path = Path(data_source)
    return ["--data", data_source] if path.is_file() else ["--data_dir", data_source]


def run_command(run: Run, evaluator: str | None) -> RunCommand:
    manifest = run.manifests[0] if run.manifests else {}
    # How the user named the model (a file, a module, a prefix), so the command runs as printed.
    model = str(manifest.get("model_spec") or manifest.get("model_name") or run.model)
    overrides = manifest.get("generation_overrides") or {}
    invocations = manifest.get("invocations") or [{}]
    provider = (((invocations[-1] or {}).get("endpoints") or {}).get("model") or {}).get("provider")
    return RunCommand(model, overrides if isinstance(overrides, dict) else {},
                      _data_flags(manifest.get("data_source")), evaluator,
                      runnable=bool(manifest.get("model_spec")) or provider != "custom")


def command(spec: RunCommand, results_dir: Path, *, setting: str = "default", task: str = "inference",
            use_matcher: bool = False) -> str:
    if not spec.runnable:
        return python_call(spec, results_dir, setting=setting, task=task, use_matcher=use_matcher)
    args = ["cupid-eval", "--model", spec.model, "--results_dir", str(results_dir)]
    if spec.evaluator and spec.evaluator != config.DEFAULT_EVALUATOR:
        args += ["--evaluator", spec.evaluator]
    if setting != "default":
        args += ["--setting", setting]
    if task != "inference":
        args += ["--task", task]
    if use_matcher:
        args.append("--use_matcher")
    if spec.overrides:
        args += ["--model_args", ",".join(f"{k}={v}" for k, v in sorted(spec.overrides.items()))]
    args += spec.data_flags
    return " ".join(shlex.quote(a) for a in args)


def python_call(spec: RunCommand, results_dir: Path, *, setting: str, task: str, use_matcher: bool) -> str:
    """The same run from Python, for a model only an object of the user's names."""
    arguments = [f"results_dir={str(results_dir)!r}"]
    if spec.evaluator and spec.evaluator != config.DEFAULT_EVALUATOR:
        arguments.append(f"evaluator={spec.evaluator!r}")
    arguments += [f"setting={setting!r}"] * (setting != "default") + [f"task={task!r}"] * (task != "inference")
    arguments += ["use_matcher=True"] * use_matcher
    if spec.overrides:
        arguments.append(f"model_args={dict(sorted(spec.overrides.items()))!r}")
    flags = dict(zip(spec.data_flags[::2], spec.data_flags[1::2]))
    data = flags.get("--data_dir") or flags.get("--data")
    if data:
        arguments.append(f"data={data!r}")
    arguments += [f"{flag.lstrip('-')}={value!r}" for flag, value in flags.items() if flag in ("--dataset", "--split")]
    return (f"# in Python, with your {spec.model} object as model (no command line names it): "
            f"evaluate(model, {', '.join(arguments)})")


def _task_for(needs: set[str]) -> str:
    return "both" if needs == {"inference", "generation"} else next(iter(needs))


def find_gaps(an, results_dir: Path) -> list[Gap]:
    """Every table and figure of the paper the results under ``results_dir`` cannot fill,
    with the commands that would fill it. ``an`` is a report.Analysis."""
    gaps: list[Gap] = []
    inf_scorer = an.primary_scorer("inference")
    gen_scorer = an.primary_scorer("generation")
    evaluator = (an.scorer_parts(inf_scorer or gen_scorer)[0] if (inf_scorer or gen_scorer) else None)
    models = an.models()
    specs = {m: run_command(an.run(m, "default") or next(r for r in an.runs if r.model == m), evaluator)
             for m in models}

    def has(model: str, setting: str, task: str, scorer: str | None = None) -> bool:
        run = an.run(model, setting)
        if run is None or scorer is None:
            return run is not None and task in run.tasks
        return scorer in run.scorers and run.has_task(task, scorer)

    def per_model(item: str, setting: str, tasks: tuple[str, ...], what: str) -> None:
        lacking, commands = [], []
        for model in models:
            needs = {t for t in tasks if not has(model, setting, t)}
            if needs:
                lacking.append(an.label(model))
                commands.append(command(specs[model], results_dir, setting=setting, task=_task_for(needs)))
        if lacking:
            gaps.append(Gap(item, f"{what} for {', '.join(lacking)}", commands))

    per_model("Table 1 (default columns) and Table 3 (default columns)", "default",
              ("inference", "generation"), "default-setting inference and generation results")
    per_model("Table 1 (oracle column) and Table 3 (oracle column)", "oracle",
              ("inference", "generation"), "oracle-setting results")
    per_model("Table 3 (oracle preference column)", "oracle_preference", ("generation",),
              "oracle-preference generation results")
    per_model("Tables 9 and 10, Figure 6", "summary", ("inference", "generation"), "summary-setting results")

    # Table 11 and Figure 4: the same inferences matched by PrefMatcher as well.
    matched = {run.model for base, other in an.matcher_pairs() for run in an.runs
               if base in run.scorers and other in run.scorers}
    without = [m for m in models if m not in matched and has(m, "default", "inference")]
    if without or not matched:
        targets = without or models
        gaps.append(Gap(
            "Table 11 and Figure 4",
            "inferences matched by PrefMatcher-7B beside the evaluator (a served PrefMatcher, see "
            f"evaluation/serve_prefmatcher.sh) for {', '.join(an.label(m) for m in targets)}",
            [command(specs[m], results_dir, use_matcher=True) for m in targets]))

    # Figure 5: a correlation over models with both tasks in the default setting.
    both = [m for m in models if has(m, "default", "inference", inf_scorer)
            and has(m, "default", "generation", gen_scorer)]
    if len(both) < MIN_MODELS_FOR_CORRELATION:
        commands = [command(specs[m], results_dir, task=_task_for(
            {t for t in ("inference", "generation") if not has(m, "default", t)}))
            for m in models if m not in both]
        more = MIN_MODELS_FOR_CORRELATION - len(both) - len(commands)
        lacks = (f"models with both inference and generation results in the default setting: "
                 f"{len(both)} ({', '.join(an.label(m) for m in both) or 'none'}), a correlation needs "
                 f"{MIN_MODELS_FOR_CORRELATION}")
        if more > 0:
            lacks += f"; evaluate {more} more model(s) with --task both"
            commands.append(command(RunCommand("OTHER_MODEL", {}, next(iter(specs.values())).data_flags
                                            if specs else [], evaluator), results_dir, task="both"))
        gaps.append(Gap("Figure 5", lacks, commands))

    if not any(has(m, "default", "inference", inf_scorer) for m in models):
        gaps.append(Gap("Figures 3 and 9 (inference panel)", "default-setting inference results",
                        [command(specs[m], results_dir) for m in models]))
    if not any(has(m, "default", "generation", gen_scorer) for m in models):
        gaps.append(Gap("Figure 9 (generation panel)", "default-setting generation results",
                        [command(specs[m], results_dir, task="generation") for m in models]))
    unclassified = [m for m in models if has(m, "default", "inference", inf_scorer)
                    and not (error_types.directory_of(an.run(m, "default")) / error_types.SAMPLE).is_file()]
    if unclassified:
        gaps.append(Gap("Table 2", f"error-type classifications of the low-F1 inferences of "
                        f"{', '.join(an.label(m) for m in unclassified)}",
                        [" ".join(shlex.quote(a) for a in ["cupid-report", str(results_dir), "--error_types"] + (
                            ["--evaluator", evaluator] if evaluator and evaluator != config.DEFAULT_EVALUATOR else []))]))
    return gaps


def gaps_markdown(gaps: list[Gap], ignored: list[str]) -> str:
    parts = ["## What this report cannot show yet", ""]
    if not gaps:
        parts.append("Every table and figure of the paper has its inputs here.")
    else:
        parts += ["Each table or figure of the paper below lacks the input named; the commands "
                  "would produce it (a run resumes where it stopped and repeats no finished step).", ""]
        for gap in gaps:
            parts.append(f"- **{gap.item}** lacks {gap.lacks}.")
            if gap.commands:
                parts += ["", "  ```"] + [f"  {c}" for c in gap.commands] + ["  ```", ""]
    if ignored:
        parts += ["", "Directories left out (not evaluation runs):", ""] + [f"- {note}" for note in ignored]
    return "\n".join(parts).rstrip()
