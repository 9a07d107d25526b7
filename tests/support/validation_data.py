"""A small synthesis output with planted faults, and a scripted validator (Figure 20's
answers) for the validation's tests.

Each persona has three instances (consistent, contrastive, changing) over preferences A
(current factor), A' (its change) and B (the contrastive factor), each with a checklist of
three entries; a user message that hints at an entry holds that entry's phrase. Faults:

* ``gap``: A's entry 2 is hinted nowhere: every instance that checks A (all three) is not
  solvable;
* ``says``: the current request states A's entry 1: consistent and contrastive (current A)
  are not challenging; changing (current A') is fine;
* ``invents``: B's entry 3 is hinted nowhere, and the validator invents a fragment for it:
  contrastive is not solvable; and it copies A's entry 3 from the assistant's reply as well as
  from the user, which must not matter.
* ``good``: nothing planted.
"""
from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path

PERSONAS = ("good", "gap", "says", "invents")
PLANTED = {"gap__consistent", "gap__contrastive", "gap__changing", "says__consistent", "says__contrastive",
           "invents__contrastive"}


def phrase(persona: str, pref: str, k: int) -> str:
    return f"{persona}-{pref}-hint-{k}"


def preference(persona: str, pref: str) -> str:
    return f"Responses about {pref} for {persona} must satisfy three things."


def checklist(persona: str, pref: str) -> list[str]:
    return [f"Does the response satisfy {pref} aspect {k} for {persona}?" for k in (1, 2, 3)]


def _session(persona: str, pref: str, factor: str, number: int) -> dict:
    hints = [k for k in (1, 2, 3) if (persona, pref, k) not in (("gap", "A", 2), ("invents", "B", 3))]
    feedback = [{"role": "assistant", "content": f"Here is draft {number}; I kept {phrase(persona, pref, 3)} in mind."}
                if persona == "invents" and pref == "A" else {"role": "assistant", "content": f"Draft {number}."}]
    turns = [{"role": "user", "content": f"Help me with task {number} of {persona}."}, *feedback]
    for k in hints:  # whitespace and case of the user's text differ from the fragment the validator returns
        turns += [{"role": "user", "content": f"Hmm.  Could you   mind {phrase(persona, pref, k).upper()} next time?"},
                  {"role": "assistant", "content": "Sure."}]
    return {"context_factor": factor, "contextual_preference": preference(persona, pref), "dialogue": turns}


def build(root: Path) -> Path:
    """The output directory, as synthesis lays it out (instances/ and personas/<id>/checklists.json)."""
    for persona in PERSONAS:
        book = {preference(persona, p): checklist(persona, p) for p in ("A", "A'", "B", "O")}
        (root / "personas" / persona).mkdir(parents=True, exist_ok=True)
        (root / "personas" / persona / "checklists.json").write_text(json.dumps(book))
        a = [_session(persona, "A", "Factor A", n) for n in (1, 2)]
        changed = [_session(persona, "A'", "Factor A", n) for n in (3, 4)]
        b = [_session(persona, "B", "Factor B", n) for n in (5, 6)]
        other = _session(persona, "O", "Factor O", 7)
        request = f"Write the next report for {persona}."
        if persona == "says":
            request += f" Remember {phrase(persona, 'A', 1)}."
        for kind, prior, truth in (("consistent", a + [other], "A"), ("contrastive", a + b + [other], "A"),
                                   ("changing", a + changed + [other], "A'")):
            row = {"instance_id": f"{persona}__{kind}", "persona_id": persona, "instance_type": kind,
                   "current_request": request, "current_context_factor": "Factor A",
                   "current_contextual_preference": preference(persona, truth),
                   "current_checklist": checklist(persona, truth), "prior_interactions": prior,
                   "metadata": {"source": "synthesis", "contrastive_preference": preference(persona, "B"),
                                "original_preference": preference(persona, "A"),
                                "changed_preference": preference(persona, "A'")}}
            (root / "instances").mkdir(exist_ok=True)
            (root / "instances" / f"{persona}__{kind}.json").write_text(json.dumps(row))
    return root


class Validator:
    """Figure 20's answers: each entry's phrase where the dialogue holds it (in the user's
    or the assistant's words), lower-cased, plus the planted inventions; and a preference's
    checklist where the decomposer is asked for it. ``fail_sessions``:
    dialogues (a text they contain) answered with no JSON at all."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.fail_sessions: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, req: dict) -> str:
        system, user = req["system"], req["messages"][-1]["content"]
        if "creating an evaluation checklist from the preference" in system:  # the decomposer: data without checklists
            persona, pref = re.search(r"Responses about (\S+) for (\S+) must", user).group(2, 1)
            with self._lock:
                self.calls["decompose"] += 1
            return "```json\n" + json.dumps({"checklist": checklist(persona, pref)}) + "\n```"
        if "Evaluation Checklist" not in system:
            raise AssertionError(f"not Figure 20's prompt: {system[:80]}")
        entries = re.findall(r"^\d+\. (.+)$", system.split("**Evaluation Checklist**")[1].split("## **Instructions**")[0], re.M)
        dialogue = user.split("### Interaction between the User and the AI Assistant")[1].lower()
        with self._lock:
            self.calls["extract"] += 1
        if any(marker in dialogue for marker in self.fail_sessions):
            return "I could not read this dialogue."
        items = []
        for index, entry in enumerate(entries, start=1):
            persona, pref, k = re.match(r"Does the response satisfy (\S+) aspect (\d) for (\S+)\?", entry).group(3, 1, 2)
            hint = phrase(persona, pref, int(k)).lower()
            fragments = [f"could you mind {hint}"] if f"could you   mind {hint}" in dialogue else []
            if hint in dialogue and not fragments:
                fragments.append(hint)  # from the request
            if persona == "invents" and pref == "A" and k == "3":
                fragments.append(f"i kept {hint} in mind")  # the assistant's words
            if persona == "invents" and pref == "B" and k == "3":
                fragments.append(f"I really want {hint} in everything")
            items.append({"item_index": index, "item_description": entry, "analysis": "Looked at every message.",
                          "fragments": fragments, "rating": str(1 + index)})
        return "```json\n" + json.dumps(items, indent=1) + "\n```"
