"""Scripted answers that take the released harness (kixlab/CUPID@a8560ca) and ours through
every evaluation step on the same instances, so that their requests can be compared.

Requests are matched to (step, instance, direction) by their content: the step by the
system prompt, the instance by its session log or by the scripted inferred preference,
which names its instance. Used by benchmarks/release_side_by_side.py,
benchmarks/make_release_golden.py and tests/test_release_golden.py.
"""
from __future__ import annotations

import json
import re

# Each step's system prompt starts with words no other step's has.
STEP_MARKERS = (
    ("infer", "## Your Objective\n\nYou will be provided with a log of interaction sessions"),
    ("generate", "You will be provided with a request from a user."),
    ("decompose", "## Your Objective\n\nYour task is to help judge how well an AI Assistant"),
    ("match", "In this task, you will be presented with a **evaluation checklist**"),
    ("match_prefmatcher", "You are an analytical and insightful assistant that can determine"),
    ("judge", "## **Your Objective**\n\nYou are a critical and meticulous evaluator."),
)
LABELS = ("Fully Covered", "Partially Covered", "Not Covered")


class Script:
    """Answers every step so that both harnesses go through all of them, and names the
    instance in what the later steps receive (the three instances of a persona share their
    request, and two of them their true preference)."""

    def __init__(self, instances: dict[str, dict], session_logs: dict[str, str]):
        self.instances = instances        # name -> instance row
        self.session_logs = session_logs  # name -> its log in the release's own layout

    @staticmethod
    def tag(name: str) -> str:
        return f"case <{name}>"

    def inferred(self, name: str) -> str:
        return f"For {self.tag(name)} the user expects this: {self.instances[name]['current_contextual_preference']}"

    def named(self, text: str) -> str:
        found = [n for n in self.instances if self.tag(n) in text]
        if len(found) != 1:
            raise LookupError(f"{len(found)} instances named in this prompt")
        return found[0]

    def instance_of_log(self, text: str) -> str:
        found = [n for n, log in self.session_logs.items() if f"\n\n{log}\n" in text]
        if len(found) != 1:
            raise LookupError(f"{len(found)} instances have this session log")
        return found[0]

    def checklist(self, name: str) -> list[str]:
        n = 2 + len(name) % 3
        return [f"Does the response meet point {i} of {self.tag(name)}?" for i in range(1, n + 1)]

    def classify(self, req: dict) -> tuple[str, str, str]:
        """(step, instance, direction)."""
        system, user = req["system"], req["messages"][-1]["content"]
        step = next((s for s, marker in STEP_MARKERS if system.startswith(marker)), None)
        if step is None:
            raise LookupError(f"unknown step: {system[:80]!r}")
        if step in ("infer", "generate"):
            return step, self.instance_of_log(user), ""
        if step in ("judge", "decompose"):
            return step, self.named(user), ""
        name = self.named(user)
        header = "#### Criterion\n\n" if step == "match_prefmatcher" else "#### Preference\n\n"
        preference = user.split(header, 1)[1].split("\n\n#### Checklist", 1)[0]
        return step, name, "recall" if preference == self.inferred(name) else "precision"

    def __call__(self, req: dict) -> str:
        step, name, direction = self.classify(req)
        if step == "infer":
            return (f"### Analysis\n\nIn the sessions like this one the user asked for the same thing.\n\n"
                    f"### Most Likely Preference\n\n{self.inferred(name)}")
        if step == "generate":
            return f"Here is the answer to {self.tag(name)}.\n\nIt follows what you asked before."
        if step == "decompose":
            return ("**Analysis**\n\nThe preference has a few parts.\n\n**Checklist**\n\n```json\n"
                    + json.dumps({"checklist": self.checklist(name)}, indent=2) + "\n```")
        if step == "judge":
            return ("### Evaluation of AI Assistant's Response\n\n1. **Item**: partly met.\n\n"
                    "### Evaluation Label\n\nGood\n\n### Evaluation Score\n\n" + str(4 + len(name) % 6))
        checklist = req["messages"][-1]["content"].split("#### Checklist\n\n", 1)[1]
        entries = [re.sub(r"^\d+\.\s*", "", line) for line in checklist.splitlines() if line.strip()]
        results = [{"index": i, "entry": e, "reasoning": "Compared the two.",
                    "label": LABELS[(i + len(direction)) % 3]} for i, e in enumerate(entries, 1)]
        if step == "match_prefmatcher":
            return json.dumps(results)  # PrefMatcher answers with the bare list, read as it comes
        return "```json\n" + json.dumps({"results": results}, indent=2) + "\n```"


