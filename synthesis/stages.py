"""The synthesis stages (§3, Appendix B), one row each, in the order a persona goes through them.

The scheduler (pipeline.py: what starts a stage, its priority), the dry run (dry_run.py: which
requests a persona's stages send), the summary (summary.py: each stage's counts and
regenerations) and the output paths (outputs.py) read this table; none of them names a stage
the table does not give it.

A row's ``module`` marks a **persona stage**: one call of ``role``'s model per persona, which reads
the artifacts of ``inputs`` and writes one JSON artifact, ``personas/<id>/<name>.json``. Such a
stage is its module (below), its prompt (prompts/synthesis/) and its row: the pipeline starts
it for a persona as soon as every one of its inputs exists for that persona, writes its artifact
atomically, skips it when the artifact exists, retries it as every stage is retried, records its
failure, and starts the stages that wait on it; the dry run renders its request with its own
code. The module provides::

    def request(model, persona, inputs, cfg, taxonomy, **attempts) -> Answer
        # its request, sent through the re-ask loop (synthesis/documents.py generate_validated);
        # ``inputs``: {input stage: its artifact (a dict)}; ``attempts``: max_attempts,
        # first_variant, previous (a rerun continues an earlier run's failed attempts)
    def document(answer, persona, inputs, cfg) -> dict
        # the artifact written from the validated answer
    def stand_in(persona, inputs, cfg) -> dict
        # the dry run's artifact of the answer's shape, for the stages after it
    def answer_tokens(cfg) -> int
        # the dry run's assumed answer length

The other stages (templates, descriptions, checklists, dialogues, instances) fan out or in
(a batch of personas, a checklist per distinct preference, a dialogue per session, three
instances per persona): the pipeline's own code runs them, in the order and with the weights
their rows give. docs/architecture.md adds a persona stage as a worked example.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

PERSONA_DIR = "personas/{persona_id}"


@dataclass(frozen=True)
class Stage:
    name: str
    inputs: tuple[str, ...]      # the stages whose artifacts it reads: it starts once they exist
    artifact: str                # what it writes, under the output directory
    roles: tuple[str, ...]       # the model roles that answer its calls (none: no model call)
    weight: Callable[..., int]   # cfg -> the most calls one of its tasks makes in sequence
    module: str | None = None    # a persona stage's module (see above)

    @property
    def persona_stage(self) -> bool:
        return self.module is not None

    def hooks(self) -> ModuleType:
        return importlib.import_module(self.module)


def _calls(n: int) -> Callable[..., int]:
    return lambda cfg: n


STAGES: tuple[Stage, ...] = (
    Stage("templates", (), "personas.json", (), _calls(0)),
    Stage("descriptions", ("templates",), "personas.json", ("synthesizer",), _calls(1)),
    Stage("factors", ("descriptions",), f"{PERSONA_DIR}/factors.json", ("synthesizer",), _calls(1),
          "cupid.synthesis.factors"),
    Stage("sessions", ("descriptions", "factors"), f"{PERSONA_DIR}/sessions.json", ("synthesizer",), _calls(1),
          "cupid.synthesis.sessions"),
    Stage("checklists", ("sessions",), f"{PERSONA_DIR}/checklists.json", ("decomposer",), _calls(1)),
    # A dialogue: max_turns assistant replies and max_turns - 1 user-simulator messages.
    Stage("dialogues", ("descriptions", "sessions", "checklists"), f"{PERSONA_DIR}/dialogues/{{index}}.json",
          ("user_simulator", "assistant_simulator"), lambda cfg: 2 * cfg.max_turns - 1),
    Stage("instances", ("descriptions", "sessions", "checklists", "dialogues"), "instances/{instance_id}.json",
          (), _calls(0)),
)


def names() -> tuple[str, ...]:
    return tuple(s.name for s in STAGES)


def stage(name: str) -> Stage:
    for row in STAGES:
        if row.name == name:
            return row
    raise KeyError(f"no synthesis stage {name!r}; the stages: {', '.join(names())}")


def persona_stages() -> tuple[Stage, ...]:
    return tuple(s for s in STAGES if s.persona_stage)


def waiting_on(name: str) -> tuple[Stage, ...]:
    """The stages that read ``name``'s artifact, in table order."""
    return tuple(s for s in STAGES if name in s.inputs)


def check_table(stages: tuple[Stage, ...] | None = None) -> None:
    """Each stage's inputs come before it, names are distinct, a persona stage writes its own file."""
    stages = STAGES if stages is None else stages
    seen: set[str] = set()
    for row in stages:
        if row.name in seen:
            raise ValueError(f"synthesis stage {row.name!r} appears twice in the table")
        unknown = [i for i in row.inputs if i not in seen]
        if unknown:
            raise ValueError(f"synthesis stage {row.name!r} reads {', '.join(unknown)}, which no stage before it writes")
        if row.persona_stage and row.artifact != f"{PERSONA_DIR}/{row.name}.json":
            raise ValueError(f"persona stage {row.name!r} must write {PERSONA_DIR}/{row.name}.json")
        seen.add(row.name)
