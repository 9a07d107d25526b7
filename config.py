"""Project-wide paths and defaults, each overridable from the environment, so that a user
never edits code to point at another server or to change a timeout."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PROMPTS_DIR = ROOT / "prompts"
SAMPLE_DATA_DIR = ROOT / "data" / "sample"
PUBLISHED_DIR = ROOT / "data" / "published"


def _env(name: str, default: float) -> float:
    """The environment's value of ``name`` read as ``default``'s type (int or float)."""
    value = os.environ.get(name)
    return type(default)(value) if value not in (None, "") else default


# --- Data -------------------------------------------------------------------------------
HF_DATASET = os.environ.get("CUPID_DATASET", "kixlab/CUPID")
HF_SPLIT = os.environ.get("CUPID_SPLIT", "test")

# --- Models -----------------------------------------------------------------------------
DEFAULT_EVALUATOR = "gpt-4o-2024-11-20"
EMBEDDED_MODEL = "smollm2-135m"
# --task interaction (evaluation/interaction.py): the user simulator's model, GPT-4o as in
# Appendix B.4, and the evaluated model's replies at most. The benchmark's dialogues take 6.38
# messages on average (§3.3: the request, then reply and feedback in turn, the user's END last),
# about 3.2 replies of Llama-3.1-8B (B.4's deliberately weak assistant) before the simulator was
# satisfied; 8 replies leave room for 2.5 times that, for models weaker than synthesis's, and
# bound a dialogue's cost at half of synthesis's own cap (--max_turns 16).
DEFAULT_SIMULATOR = DEFAULT_EVALUATOR
DEFAULT_MAX_ROUNDS = 8

# PrefMatcher-7B served by vLLM's OpenAI-compatible server (evaluation/serve_prefmatcher.sh).
PREFMATCHER_MODEL = os.environ.get("CUPID_PREFMATCHER_MODEL", "kixlab/prefmatcher-7b")
PREFMATCHER_BASE_URL = os.environ.get("CUPID_PREFMATCHER_URL", "http://localhost:8000/v1")
# Any other OpenAI-compatible server named with the `vllm:` / `local-server:` prefix.
LOCAL_SERVER_BASE_URL = os.environ.get("CUPID_LOCAL_SERVER_URL", "http://localhost:8000/v1")
LOCAL_SERVER_API_KEY = os.environ.get("CUPID_LOCAL_SERVER_API_KEY", "EMPTY")

# --- The seam: retries and timeouts -----------------------------------------------------
# A hung request must not stall a run for the SDKs' 600 s default.
REQUEST_TIMEOUT = _env("CUPID_REQUEST_TIMEOUT", 120.0)
MAX_RETRIES = _env("CUPID_MAX_RETRIES", 6)
RETRY_BASE_DELAY = _env("CUPID_RETRY_BASE_DELAY", 1.0)
RETRY_MAX_DELAY = _env("CUPID_RETRY_MAX_DELAY", 60.0)
# How long a run waits, after its own work, for instances another process is evaluating in
# the same run directory, before it reports them as in progress elsewhere.
LOCK_WAIT_S = _env("CUPID_LOCK_WAIT", 120.0)
# How many times a step re-asks when the answer cannot be parsed.
MAX_PARSE_RETRIES = _env("CUPID_MAX_PARSE_RETRIES", 2)

# --- Generation parameters per role ------------------------------------------------------
# Adapters translate these to what each API accepts (o-series models take no temperature,
# Claude 3.7 Sonnet runs at temperature 1 with extended thinking, as in the paper's Table 8).
# The evaluation's values are the released harness's (kixlab/CUPID at a8560ca): temperature
# 0 and max_tokens 8192 for the evaluated model (utils/models/gpt_41_nano.py), the
# matcher and the judge (evaluation/modules/), 4096 for the decomposer
# (DECOMPOSER_MAX_TOKENS). The temperature is the integer 0, as the release sends it, so
# that the request bodies are the release's byte for byte.
# The release asks its evaluator (utils/generation.py, generate) for OpenAI models with the
# system prompt as a "developer" message and max_completion_tokens, and its evaluated model
# (gpt_41_nano.py) with a "system" message and max_tokens; OpenAI adapters take these two
# choices as system_role / max_tokens_field, other adapters ignore them.
ROLE_PARAMS: dict[str, dict] = {
    "evaluated": {"temperature": 0, "max_tokens": 8192},
    "evaluator": {"temperature": 0, "max_tokens": 8192,
                  "system_role": "developer", "max_tokens_field": "max_completion_tokens"},
    "matcher": {"temperature": 0, "max_tokens": 8192},            # PrefMatcher-7B (vLLM)
    "synthesizer": {"temperature": 0.7, "max_tokens": 8192},      # App. B.1-B.3
    "strategy": {"temperature": 0, "max_tokens": 8192},           # an LLM-backed context strategy's model
}
# The decomposer's own limit (synthesis/modules/preference_decomposer.py in the release),
# asked by the decompose step whatever model runs it.
DECOMPOSER_MAX_TOKENS = 4096

# --- Batch mode (--batch) --------------------------------------------------------------
# Batch APIs (OpenAI, Anthropic) bill half the online price.
BATCH_DISCOUNT = _env("CUPID_BATCH_DISCOUNT", 0.5)
BATCH_POLL_INTERVAL = _env("CUPID_BATCH_POLL_INTERVAL", 30.0)
BATCH_MAX_ITEMS = _env("CUPID_BATCH_MAX_ITEMS", 10000)  # below every provider's limit
BATCH_MAX_BYTES = _env("CUPID_BATCH_MAX_BYTES", 150_000_000)  # OpenAI: 200 MB a file

# --- Cost estimate and context windows: each provider's dated table in utils/models/
# (catalog.price_of and catalog.context_window_of look a name up). ---
