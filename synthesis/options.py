"""A synthesis run's options (SynthesisConfig), which of them shape the data (a rerun into the
same directory must use the same, recorded under run.json's "settings"), and how each stage's
model is made."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config
from ..utils.models.model import Model
from ..utils.models.registry import resolve_model
from .journey import MIN_SESSIONS
from .personas import BATCH_SIZE as PERSONA_BATCH_SIZE, SEED
from ..evaluation.steps import decompose
from ..utils.io import atomic_write_json, read_json
from ..utils.errors import BadInput

# Options that shape the data: a rerun into the same directory must use the same ones.
SHAPING_OPTIONS = ("model", "user_model", "assistant_model", "decomposer_model", "n_factors",
                    "n_sessions", "max_turns", "seed", "persona_batch_size")


@dataclass
class SynthesisConfig:
    output_dir: Path = Path("synthetic_data")
    # As in the release: --model writes personas, factors and sessions, decomposes the
    # checklists and simulates the user; the assistant simulator is a fixed model.
    model: str = "claude-3-5-sonnet-20241022"
    user_model: str | None = None            # None: the same as ``model``
    assistant_model: str = "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    decomposer_model: str | None = None      # None: the same as ``model``
    n_personas: int = 4
    n_factors: int = 8
    n_sessions: int = 13
    max_turns: int = 16
    n_workers: int = 1
    seed: int = SEED
    persona_seeds: str | None = None       # None: PersonaHub; "bundled"; or a file
    persona_batch_size: int = PERSONA_BATCH_SIZE
    max_attempts: int = config.MAX_PARSE_RETRIES + 1  # answers per generation, first included
    show_progress: bool | None = None      # None: when stderr is a terminal
    batch: bool = False                    # the synthesizer's calls through its batch API

    def __post_init__(self) -> None:
        self.user_model = self.user_model or self.model
        self.decomposer_model = self.decomposer_model or self.model

    def check(self) -> None:
        if self.n_personas < 1:
            raise OptionsError("n_personas must be at least 1")
        if self.n_factors < 3:
            raise OptionsError("n_factors must be at least 3 (a contrastive pair and another factor)")
        if self.n_sessions < MIN_SESSIONS:
            raise OptionsError(f"n_sessions must be at least {MIN_SESSIONS}")
        if self.max_turns < 1:
            raise OptionsError("max_turns must be at least 1")
        if self.n_workers < 1 or self.persona_batch_size < 1 or self.max_attempts < 1:
            raise OptionsError("n_workers, persona_batch_size and attempts must be positive")


def model_label(spec: str) -> str:
    """A model spec without its ``@http://host:port/v1`` part: where a server runs does
    not shape the data (and a test server's port changes from run to run)."""
    name, sep, url = spec.rpartition("@")
    return name if sep and name and url.startswith(("http://", "https://")) else spec


def shaping_options(cfg: "SynthesisConfig") -> dict:
    values = {k: getattr(cfg, k) for k in SHAPING_OPTIONS}
    return {k: model_label(v) if k.endswith("model") else v for k, v in values.items()}


# How the release's utils/generation.py sends an OpenAI model's request: single-turn calls
# (generate: personas, factors, sessions, decomposer) with the system prompt as a
# "developer" message, chats (generate_chat: the simulators) as a "system" message, both
# with max_completion_tokens. Other providers' adapters take no such options.
SINGLE_TURN = {"system_role": "developer", "max_tokens_field": "max_completion_tokens"}
CHAT = {"system_role": "system", "max_tokens_field": "max_completion_tokens"}


def resolve_stage_model(spec: str, openai_wire: dict, **params: Any) -> Model:
    model = resolve_model(spec, **params)
    if model.provider == "openai":  # OpenAI's own API, not a vLLM or other compatible server
        model = resolve_model(spec, **params, **openai_wire)
    return model


def stage_models(cfg: SynthesisConfig, cache: Any) -> dict[str, Model]:
    """Each role's model. Each stage passes its own temperature and max_tokens
    (its module's ``PARAMS``); the decomposer step uses the model's, so they are set here."""
    return {
        "synthesizer": resolve_stage_model(cfg.model, SINGLE_TURN, cache=cache),
        "user_simulator": resolve_stage_model(cfg.user_model, CHAT, cache=cache),
        "assistant_simulator": resolve_stage_model(cfg.assistant_model, CHAT, cache=cache),
        "decomposer": resolve_stage_model(cfg.decomposer_model, SINGLE_TURN, cache=cache,
                                          **decompose.PARAMS),
    }


class OptionsError(BadInput):
    """Bad options, or options that differ from those the output directory was made with."""


class OptionsMismatch(OptionsError):
    pass


def check_options(out: Path, cfg: SynthesisConfig) -> None:
    """Record the shaping options in a new output directory; refuse other ones in an old one."""
    path = out / "run.json"
    current = shaping_options(cfg)
    if path.exists():
        previous = read_json(path).get("settings", {})
        different = {k: (previous.get(k), v) for k, v in current.items() if previous.get(k) != v}
        if different:
            details = "; ".join(f"{k}: {a!r} before, {b!r} now" for k, (a, b) in different.items())
            raise OptionsMismatch(
                f"{out} holds data made with other settings ({details}). Use another "
                f"--output_dir, or the same settings to continue it.")
    else:
        atomic_write_json(path, {"settings": current})
