"""Scripted answers for every synthesis call, for offline tests and benchmarks.

``ScriptedSynthesis`` is a responder for tests/fake_llm_server.FakeLLMServer: it reads the
system prompt to tell which stage is asking (persona descriptions, context factors,
sessions, the decomposer, the user simulator, the assistant simulator) and answers with a
valid YAML/JSON document built from what the prompt contains, deterministically. Faults
can be injected: the first N answers of a stage malformed, or every answer of a stage
invalid for prompts holding a marker.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import threading
from collections import Counter

import yaml

from cupid.synthesis.dialogues import ASSISTANT_PROMPT, MESSAGE_HEADER, dialogue_steps
from cupid.utils.prompts import load_prompt

_TASKS = ["Writing & editing", "Planning", "Communicating", "Problem solving", "Learning"]
_FACTOR_TYPES = ["Tool/Technology", "Person/Group", "Location/Place", "Content/Media",
                 "Process/Activity", "Organization/Institution", "Object/Artifact", "Event/Time"]
_PREFERENCE_TYPES = ["Format", "Tone", "Depth", "Clarity", "Accuracy", "Efficiency",
                     "Creativity", "Safety"]
_STYLES = [
    "Every answer must open with a one-line summary and then list at most five numbered steps.",
    "Explanations must use a concrete analogy from cooking before any technical detail.",
    "Drafts must stay under 120 words and end with one direct question to the reader.",
    "Suggestions must cite the exact page or section of the source they rely on.",
    "Plans must give a time estimate in minutes for each step and flag the riskiest one.",
    "Feedback must name one strength before each weakness and avoid the word 'should'.",
    "Answers must compare two alternatives side by side in a small table.",
    "Examples must come from public transport rather than from office work.",
]


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def _fenced(language: str, body: str) -> str:
    return f"Here is the output.\n\n```{language}\n{body.strip()}\n```\n"


def stage_of(req: dict) -> str:
    system = req.get("system") or ""
    if system.strip() == load_prompt(ASSISTANT_PROMPT).system_prompt.strip():
        return "assistant"
    if system.startswith("Your task is to design user personas."):
        return "descriptions"
    if "**Create Contrastive Factors**" in system:
        return "factors"
    if "**Requirements for the User Journey**" in system:
        return "sessions"
    if "atomic checklist" in system or "evaluation checklist from the preference" in system:
        return "decompose"
    if "### **Your Persona Profile**" in system:
        return "user_simulator"
    return "unknown"


class ScriptedSynthesis:
    """A deterministic responder for every synthesis stage.

    ``malformed``: {stage: n} answers the first n requests of a stage with a broken document.
    ``always_invalid``: {stage: marker} answers every request of that stage whose prompt
    holds ``marker`` with a document that parses but fails validation.
    ``max_rounds``: the user simulator is satisfied after 1..max_rounds assistant replies
    (chosen from the session's request), so dialogues have 3 to 2*max_rounds+1 messages.
    """

    def __init__(self, malformed: dict[str, int] | None = None,
                 always_invalid: dict[str, str] | None = None, max_rounds: int = 3) -> None:
        self.malformed = dict(malformed or {})
        self.always_invalid = dict(always_invalid or {})
        self.max_rounds = max_rounds
        self.calls: Counter = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: dict) -> str:
        stage = stage_of(req)
        with self._lock:
            self.calls[stage] += 1
            broken = self.malformed.get(stage, 0) > 0
            if broken:
                self.malformed[stage] -= 1
        if broken:
            return self.malformed_answer(stage)
        text = (req.get("system") or "") + "\n".join(m["content"] for m in req["messages"])
        marker = self.always_invalid.get(stage)
        if marker is not None and marker in text:
            return self.invalid_answer(stage)
        user = req["messages"][0]["content"] if req["messages"] else ""
        handler = getattr(self, f"answer_{stage}", None)
        if handler is None:
            raise ValueError(f"the scripted responder does not know this prompt: {req.get('system', '')[:80]!r}")
        return handler(req, user)

    # -- faults ---------------------------------------------------------------------------
    @staticmethod
    def malformed_answer(stage: str) -> str:
        if stage in ("factors", "sessions"):
            return "```yaml\ncontext_factors:\n  - factor_type: [Tool\n    backstory: : :\n```"
        if stage == "assistant":
            return "Sure."
        return "```json\n{\"unterminated\": [\n```"

    @staticmethod
    def invalid_answer(stage: str) -> str:
        if stage == "factors":  # parses, but no contrastive pair and too few factors
            return _fenced("yaml", yaml.safe_dump({"context_factors": [
                {"factor_type": "Tool/Technology", "background": "b", "factor": "X",
                 "task_types": ["Planning"], "preference_type": "Tone",
                 "preference": "p", "related_factor": "N/A"}]}))
        if stage == "user_simulator":
            return "#### Evaluation Score\n\n42\n\n#### Continue or End?\n\nMAYBE\n"
        return _fenced("json", "[]")

    # -- stages ----------------------------------------------------------------------------
    def answer_descriptions(self, req: dict, user: str) -> str:
        lines = [line for line in user.split("## List of Basic Personas", 1)[1].splitlines()
                 if re.match(r"^\d+\. \{", line)]
        personas = []
        for line in lines:
            template = ast.literal_eval(line.split(". ", 1)[1])
            seed = template["seed"]
            occupation = re.sub(r"^(an?|the)\s+", "", seed.split(" who ")[0].split(",")[0],
                                flags=re.I).strip() or "professional"
            name = ["Amara Okafor", "Lucas Meyer", "Priya Nair", "Kenji Sato", "Sofia Rossi",
                    "Diego Alvarez", "Hana Kim", "Omar Haddad"][_digest(seed) % 8]
            personas.append({
                "description": (
                    f"{name}, 34, they/them, works as {occupation} ({seed.rstrip('.')}). "
                    f"They want their work to be recognised as careful and useful. "
                    f"They fear wasting time on tools that do not fit their routines. "
                    f"What counts most for them is steady progress on long projects. "
                    f"Colleagues describe them as reliable but slow to accept new ideas. "
                    f"They keep detailed notes and ask many follow-up questions."),
                "occupation": occupation,
            })
        return _fenced("json", json.dumps({"personas": personas}, indent=2))

    def answer_factors(self, req: dict, user: str) -> str:
        n = int(re.search(r"You should create \*\*(\d+)\*\* unique context factors", req["system"]).group(1))
        persona = user.split("### User Persona", 1)[-1].strip()
        key = _digest(persona)
        factors = []
        for i in range(n):
            contrastive = i >= n - 2
            factor_type = _FACTOR_TYPES[0] if contrastive else _FACTOR_TYPES[(key + i) % len(_FACTOR_TYPES)]
            if i == n - 2:
                preference = f"Messages must be formal, impersonal and free of anecdotes (case {key})."
            elif i == n - 1:
                preference = f"Messages must be chatty, personal and open with a short anecdote (case {key})."
            else:
                preference = f"{_STYLES[(key + i) % len(_STYLES)]} (case {key}, factor {i + 1})"
            factors.append({
                "factor_type": factor_type,
                "background": f"A backstory about factor {i + 1} of this persona.",
                "factor": f"Factor {i + 1} of persona {key % 10000}",
                "task_types": [_TASKS[(key + i) % len(_TASKS)], _TASKS[(key + i + 1) % len(_TASKS)]],
                "preference_type": _PREFERENCE_TYPES[(key + i) % len(_PREFERENCE_TYPES)],
                "preference": preference,
                "related_factor": "N/A",
            })
        factors[-2]["related_factor"] = factors[-1]["factor"]
        factors[-1]["related_factor"] = factors[-2]["factor"]
        return _fenced("yaml", yaml.safe_dump({"context_factors": factors}, sort_keys=False,
                                              allow_unicode=True))

    def answer_sessions(self, req: dict, user: str) -> str:
        system = req["system"]
        n = int(re.search(r"\*\*(\d+) Unique Scenarios\*\*", system).group(1))
        roles = ["other"] * n
        for number, factor, kind in re.findall(
                r"Scenario ID (\d+): Context factor (A|B) with (original|changed) preference", system):
            roles[int(number) - 1] = "B" if factor == "B" else ("A'" if kind == "changed" else "A")
        roles[-1] = "final"
        options = re.search(r'two options:\s*\n\s*- "(.*)"\s*\n\s*- "(.*)"', system)
        main, contrastive = options.group(1), options.group(2)
        factors_yaml = re.search(r"```yaml\n(.*?)\n```", user, flags=re.S).group(1)
        factors = yaml.safe_load(factors_yaml)["factors"]
        by_name = {f["context_factor"]: f for f in factors}
        others = [f for f in factors if f["context_factor"] not in (main, contrastive)]
        changed = (f"Responses about {main} must now be a single dense paragraph of plain prose, "
                   f"with no lists, headings or step numbers.")
        scenarios = []
        for i, role in enumerate(roles, start=1):
            if role in ("A", "A'", "final"):
                factor = by_name[main]
            elif role == "B":
                factor = by_name[contrastive]
            else:
                factor = others[i % len(others)]
            preference = changed if role in ("A'", "final") else factor["preference"]
            with_resource = i % 4 == 0
            request = (f"Session {i}: help me with my work that involves {factor['context_factor']}"
                       f" (task {i}).")
            scenario = {
                "id": i,
                "context_factor": factor["context_factor"],
                "preference": preference,
                "task_type": factor["task_types"][0],
                "story": f"Story of scenario {i}, where {factor['context_factor']} plays a part.",
                "request_with_factor_and_preference": f"{request} {preference}",
                "request_with_factor": request + (" Here it is: [resource]\n" if with_resource else "\n"),
            }
            if with_resource:
                scenario["resource"] = f"Resource text of scenario {i}: three lines of notes.\n"
            scenarios.append(scenario)
        return _fenced("yaml", yaml.safe_dump({"scenarios": scenarios}, sort_keys=False,
                                              allow_unicode=True, width=1000))

    def answer_decompose(self, req: dict, user: str) -> str:
        match = re.search(r"#### Preference\s*\n(.*?)\n\s*---", user, flags=re.S)
        if match is None:
            match = re.search(r"\*\*Preferences?\*\*\s*\n(.*)", user, flags=re.S)
        preference = (match.group(1) if match else user).strip()
        words = re.findall(r"[A-Za-z']+", preference)
        half = max(1, len(words) // 2)
        checklist = [f"Does the response satisfy: {' '.join(words[:half])}?",
                     f"Does the response also satisfy: {' '.join(words[half:]) or 'the rest'}?"]
        return "**Analysis**\n\nTwo parts.\n\n**Checklist**\n\n" + _fenced("json", json.dumps({"checklist": checklist}))

    def answer_user_simulator(self, req: dict, user: str) -> str:
        items = re.findall(r"^(\d+)\. ", req["system"].split("**Evaluation Checklist**", 1)[1]
                           .split("### **Instructions**", 1)[0], flags=re.M)
        n_items = max(1, len(items))
        replies = sum(1 for m in req["messages"] if m["role"] == "user")
        first = req["messages"][0]["content"].split(MESSAGE_HEADER, 1)[-1].strip()
        rounds = 1 + _digest(first) % self.max_rounds
        done = replies >= rounds
        score = 10 if done else min(9, 3 + 2 * replies)
        selected = list(range(1, n_items + 1)) if done else [1 + (replies - 1) % n_items]
        evaluation = "\n\n".join(f"{i}. **Item {i}**: some strengths, some weaknesses."
                                  for i in range(1, n_items + 1))
        message = ("Perfect, this is exactly how I like it for this." if done else
                   f"Hmm, turn {replies}: this still misses something I care about here.")
        return (f"#### Evaluation of AI Assistant's Response\n\n{evaluation}\n\n"
                f"#### Evaluation Score\n\n{score}\n\n"
                f"#### Continue or End?\n\n{'END' if done else 'CONTINUE'}\n\n"
                f"#### Selected Checklist Items\n\n**Thinking**: hint at one item.\n\n"
                + "\n".join(f"- {i}. Item {i}" for i in selected) + "\n\n"
                f"#### Thinking\n\n**Thinking**: be indirect.\n\n"
                f"#### Your Message\n\n{message}")

    def answer_assistant(self, req: dict, user: str) -> str:
        turn = sum(1 for m in req["messages"] if m["role"] == "assistant") + 1
        return (f"Reply {turn}: here is a draft that addresses your request. It has three parts. "
                f"Let me know what to change.")


def simulate_dialogue(*args, **kwargs) -> dict:
    """``dialogue_steps`` run to its end, as the pipeline's tasks run it: the dialogue artifact."""
    steps = dialogue_steps(*args, **kwargs)
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value
