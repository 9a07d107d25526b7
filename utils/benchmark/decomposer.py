"""The preference decomposer, a step both pipelines use: a preference becomes a yes/no
checklist of at most 4 entries. Evaluation decomposes the inferred preference (precision
and recall are matched against checklists); synthesis decomposes each session's preference.

The request is the released harness's (kixlab/CUPID at a8560ca): its prompt file
(prompts/synthesis/preference_decomposer.yaml), temperature 0 and its own max_tokens
(config.DECOMPOSER_MAX_TOKENS). The answer is read the release's way first.
"""
from __future__ import annotations

from cupid import config
from cupid.utils.models.model import Model
from cupid.utils.benchmark.answers.reading import ParseError, extract_json
from cupid.utils.benchmark.answers.release import ReleaseFailure, release_checklist
from cupid.utils.benchmark.step_runner import StepResult, decoding_aid, run_prompt

PROMPT = "synthesis/preference_decomposer"
# The release's decomposer model's parameters (preference_decomposer.py's constructor; its
# integer 0 kept, so that a request's body is the release's): synthesis builds the
# decomposer's model with them; evaluation's evaluator has its own temperature.
PARAMS = {"temperature": 0, "max_tokens": config.DECOMPOSER_MAX_TOKENS}

# A JSON schema for adapters that can constrain decoding (llama.cpp, vLLM).
CHECKLIST_SCHEMA = {
    "type": "object",
    "properties": {"checklist": {"type": "array", "items": {"type": "string"},
                                 "minItems": 1, "maxItems": 4}},
    "required": ["checklist"],
}


def parse_checklist(text: str) -> dict:
    """The decomposer's answer: ``{"checklist": ["...?", ...]}`` with at least one entry.

    The release's reading (JSON of the ```json block or of the whole answer) is taken as it
    is when it is a list of non-empty strings; otherwise the JSON is found leniently
    (another fence, prose around it, trailing commas) and entries given as objects are
    read from their "question"/"entry"/"item" field."""
    try:
        checklist = release_checklist(text)
    except ReleaseFailure:
        checklist = None
    if isinstance(checklist, list) and checklist and \
            all(isinstance(item, str) and item.strip() for item in checklist):
        return {"checklist": list(checklist)}
    data = extract_json(text)
    if isinstance(data, dict):
        data = data.get("checklist")
    if not isinstance(data, list):
        raise ParseError("no 'checklist' list")
    checklist = []
    for i, item in enumerate(data):
        if isinstance(item, dict):  # {"question": ...} or {"entry": ...}
            item = item.get("question") or item.get("entry") or item.get("item")
        if not isinstance(item, str) or not item.strip():
            raise ParseError(f"checklist entry {i + 1} is not a non-empty string")
        checklist.append(item.strip())
    if not checklist:
        raise ParseError("the checklist is empty")
    return {"checklist": checklist}


def decompose(model: Model, preference: str, *, first_variant: int = 0) -> StepResult:
    """A preference -> a yes/no checklist of at most 4 entries (the release's decomposer,
    with its own max_tokens)."""
    return run_prompt(model, PROMPT, {"preferences": preference}, parse_checklist,
                      json_schema=decoding_aid(model, CHECKLIST_SCHEMA),
                      max_tokens=config.DECOMPOSER_MAX_TOKENS, first_variant=first_variant)


def decompose_preference(model: Model, preference: str, *, first_variant: int = 0) -> list[str]:
    """The checklist alone; synthesis uses this for its session preferences."""
    return decompose(model, preference, first_variant=first_variant).output["checklist"]
