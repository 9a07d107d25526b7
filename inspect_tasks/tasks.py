"""``inspect eval cupid/inference`` and ``inspect eval cupid/generation``: the tasks, and the
solver that asks the evaluated model. This module is the package's ``inspect_ai`` entry
point (pyproject.toml): importing it registers both tasks.

    inspect eval cupid/inference --model openai/gpt-4.1-nano-2025-04-14
    inspect eval cupid/generation --model anthropic/claude-3-7-sonnet-20250219 \\
        --model-role grader=openai/gpt-4o-2024-11-20 -T data_dir=data/sample -T setting=oracle
"""
from __future__ import annotations

from typing import Callable

from inspect_ai import Task, task
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import registry_info

from .. import config
from ..evaluation import steps
from ..evaluation.strategies import Strategy, strategy_named
from ..evaluation.steps import summarize
from . import samples
from .requests import DEFAULT_GRADER, Unparsed, answer, config_of, messages, parsed, release_parameters
from .scorers import ANSWERED, FAILED, Graders, checklist_match, judge_score
from ..utils.errors import BadInput

PREFMATCHER = f"vllm/{config.PREFMATCHER_MODEL}"


@solver
def respond(task_name: str, setting: Strategy, data: samples.Data) -> Solver:
    """The evaluated model's step: the sample's input (the summary setting: the request from
    the summaries, which the model writes first), asked again while the answer does not
    parse, as cupid-eval asks; the parsed answer goes in the store for the scorer."""
    step = steps.INFER if task_name == "inference" else steps.GENERATE

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.metadata.get("skipped") or state.metadata.get("context_error"):
            return state
        instance = data.instance(state.sample_id)
        if setting.summaries and not setting.preference_given:
            try:
                written = [(await answer(get_model(), summarize.ask(session), None))["summaries"][0]
                           for session in setting.shown(instance).sessions]
            except Unparsed as exc:
                state.store.set(FAILED, {"step": steps.SUMMARIZE.name, "reason": exc.reason})
                return state
            state.messages = messages(samples.request_of(task_name, instance, setting, summarize.history(written)))
        prompt, reasons = list(state.messages), []
        for _ in range(config.MAX_PARSE_RETRIES + 1):
            state.messages = list(prompt)
            state = await generate(state)
            output = parsed(step.module.parse, state.output.completion, reasons)
            if output is not None:
                state.store.set(ANSWERED, output)
                return state
        state.store.set(FAILED, {"step": step.name, "reason": f"unparseable answer: {reasons[-1]}"})
        return state

    return solve


def evaluated_config() -> GenerateConfig:
    """The evaluated model's family's parameters (the task's config: a command line's
    ``--temperature`` etc. beat it). A task made outside an evaluation (its model not yet
    known) gets the role's own parameters, temperature 0 and max_tokens 8192."""
    try:
        model = str(get_model())
    except ValueError:  # "No model specified": a Task built before eval() names its model
        model = "unknown/model"
    return config_of(release_parameters(model, "evaluated")[0])


def cupid_task(task_name: str, *, data_dir: str | None, revision: str | None, limit: int | None,
               setting: str, grader: str | None, prefmatcher: bool, dataset: str, split: str) -> Task:
    chosen = strategy_named(setting)
    if task_name not in chosen.tasks:
        raise BadInput(f"setting {chosen.name} has no {task_name} task (it has {', '.join(chosen.tasks)})")
    data = samples.load(task_name, chosen, data_dir=data_dir, dataset=dataset, split=split,
                        revision=revision, limit=limit)
    # Resolved now, so that a missing key stops the task before the evaluated model is paid.
    graders = Graders(get_model(role="grader", default=grader or DEFAULT_GRADER),
                      get_model(role="matcher", default=PREFMATCHER) if prefmatcher else None)
    score = checklist_match if task_name == "inference" else judge_score
    return Task(dataset=data.dataset, solver=respond(task_name, chosen, data),
                scorer=score(data, graders), config=evaluated_config(),
                metadata={"setting": chosen.name, "data": data.source, "grader": str(graders.grader),
                          "matcher": str(graders.matcher or graders.grader)})


def registered(short: str) -> Callable:
    """``@task`` under the name ``cupid/<short>``. inspect prefixes a task with its package's
    import name when it counts the module as installed; it takes an editable install whose
    distribution is named otherwise (cupid-harness, import name cupid) for a local file, and
    names the task bare: that one is registered under the full name."""
    def decorate(function: Callable) -> Callable:
        named = task(name=short)(function)
        if registry_info(named).name == f"cupid/{short}":
            return named
        return task(name=f"cupid/{short}")(function)
    return decorate


@registered("inference")
def inference(data_dir: str | None = None, revision: str | None = None, limit: int | None = None,
              setting: str = "default", grader: str | None = None, prefmatcher: bool = False,
              dataset: str = config.HF_DATASET, split: str = config.HF_SPLIT) -> Task:
    """Infer the user's preference for the request from the prior sessions; scored by the
    checklist matches (micro-pooled precision, recall, F1).

    Args:
        data_dir: a local file or directory of instances (else the hub split)
        revision: the hub dataset's commit, tag or branch (else its main branch)
        limit: the first N instances
        setting: a context strategy, as cupid-eval's --setting names it
        grader: the model that decomposes and matches, when no grader role is given
        prefmatcher: match with PrefMatcher-7B (the matcher role) and its prompt
        dataset: the hub dataset
        split: its split
    """
    return cupid_task("inference", data_dir=data_dir, revision=revision, limit=limit, setting=setting,
                      grader=grader, prefmatcher=prefmatcher, dataset=dataset, split=split)


@registered("generation")
def generation(data_dir: str | None = None, revision: str | None = None, limit: int | None = None,
               setting: str = "default", grader: str | None = None, dataset: str = config.HF_DATASET,
               split: str = config.HF_SPLIT) -> Task:
    """Answer the request as the user would want it; scored by the grader's 1-10 judgement.

    Args:
        data_dir: a local file or directory of instances (else the hub split)
        revision: the hub dataset's commit, tag or branch (else its main branch)
        limit: the first N instances
        setting: a context strategy, as cupid-eval's --setting names it
        grader: the model that judges, when no grader role is given
        dataset: the hub dataset
        split: its split
    """
    return cupid_task("generation", data_dir=data_dir, revision=revision, limit=limit, setting=setting,
                      grader=grader, prefmatcher=False, dataset=dataset, split=split)
