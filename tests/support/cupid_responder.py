"""Scripted answers for every evaluation step, for runs against the loopback server.

A ``Plan`` says, per instance (identified by its current request), what the evaluated
model infers and answers, how the evaluator decomposes, how the matcher labels each
checklist entry in each direction, and the judge's score. The expected metrics of a run
can then be computed by hand from the plan.
"""
from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class InstancePlan:
    request: str
    truth: str                      # current_contextual_preference
    truth_checklist: list[str]
    inferred: str
    inferred_checklist: list[str]
    precision_labels: list[str]     # labels of inferred_checklist against truth
    recall_labels: list[str]        # labels of truth_checklist against inferred
    judge_score: int = 7


def make_row(persona: str, instance_type: str, plan: InstancePlan, n_sessions: int = 3,
             relevant: tuple[int, ...] = (1,)) -> dict:
    """An instance in the dataset's schema whose sessions at ``relevant`` (1-based) carry
    the current preference."""
    sessions = []
    for i in range(1, n_sessions + 1):
        pref = plan.truth if i in relevant else f"Other preference {i} of {persona}."
        sessions.append({"context_factor": f"Factor {i}", "contextual_preference": pref,
                         "dialogue": [{"role": "user", "content": f"Session {i} request of {persona} ({instance_type})."},
                                      {"role": "assistant", "content": f"Answer {i}."},
                                      {"role": "user", "content": "Thanks, that works."}]})
    return {"persona_id": persona, "instance_type": instance_type,
            "current_request": plan.request, "current_context_factor": "Factor 1",
            "current_contextual_preference": plan.truth,
            "current_checklist": plan.truth_checklist, "prior_interactions": sessions}


def _section(text: str, header: str) -> str:
    """The value under a ``#### Header``, fenced (Figure 14) or not (PrefMatcher)."""
    match = re.search(re.escape(header) + r"\s*\n+```\n(.*?)\n```", text, re.S) or \
        re.search(re.escape(header) + r"\s*\n+(.*?)(?=\n+#### |\Z)", text, re.S)
    if match is None:
        raise AssertionError(f"no {header!r} block in prompt")
    return match.group(1).strip()


@dataclass
class CupidResponder:
    plans: list[InstancePlan]
    calls: Counter = field(default_factory=Counter)
    malformed_first: set = field(default_factory=set)  # step kinds answered badly once

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._seen_bad: Counter = Counter()

    def kind(self, req: dict) -> str:
        user = req["messages"][-1]["content"]
        if user.startswith("**Preferences**"):
            return "decompose"
        if "#### Criterion" in user:
            return "match_prefmatcher"
        if "#### Preference" in user and "#### Checklist" in user:
            return "match"
        if "### AI Assistant's Response" in user:
            return "judge"
        if "Summarize each interaction session" in user:
            return "summarize"
        if "## User's Preference" in user:
            return "generate_oracle_preference"
        if "## Current Interaction" in user:
            return "infer"
        if "## User's Request" in user:
            return "generate"
        raise AssertionError(f"unrecognised prompt: {user[:200]}")

    def _plan_for_request(self, text: str) -> InstancePlan:
        for plan in self.plans:
            if plan.request in text:
                return plan
        raise AssertionError("no plan for this request")

    def __call__(self, req: dict) -> str:
        kind = self.kind(req)
        with self._lock:
            self.calls[kind] += 1
            if kind in self.malformed_first and self._seen_bad[kind] == 0:
                self._seen_bad[kind] += 1
                return "I cannot answer in the requested format, sorry."
        user = req["messages"][-1]["content"]
        if kind == "infer":
            plan = self._plan_for_request(user)
            return f"### Analysis\n\nThe user cares about X.\n\n### Most Likely Preference\n\n{plan.inferred}"
        if kind in ("generate", "generate_oracle_preference"):
            plan = self._plan_for_request(user)
            return f"Here is my answer to: {plan.request}"
        if kind == "decompose":
            for plan in self.plans:
                if plan.inferred in user:
                    return "```json\n" + json.dumps({"checklist": plan.inferred_checklist}) + "\n```"
            raise AssertionError("decompose of an unknown preference")
        if kind in ("match", "match_prefmatcher"):
            preference = _section(user, "#### Criterion" if kind == "match_prefmatcher" else "#### Preference")
            checklist_text = _section(user, "#### Checklist")
            entries = [re.sub(r"^\d+\.\s*", "", line) for line in checklist_text.splitlines() if line.strip()]
            for plan in self.plans:
                if preference == plan.truth and entries == plan.inferred_checklist:
                    labels = plan.precision_labels
                    break
                if preference == plan.inferred and entries == plan.truth_checklist:
                    labels = plan.recall_labels
                    break
            else:
                raise AssertionError(f"match of unknown pair: {preference!r} {entries!r}")
            results = [{"index": i, "entry": e, "label": l}
                       for i, (e, l) in enumerate(zip(entries, labels), start=1)]
            return "```json\n" + json.dumps({"results": results}) + "\n```"
        if kind == "judge":
            plan = self._plan_for_request(user)
            return ("### Evaluation of AI Assistant's Response\n1. **Checklist item 1:** fine\n\n"
                    f"### Evaluation Score\n**{plan.judge_score}/10**")
        if kind == "summarize":
            return "```json\n" + json.dumps({"summaries": [{
                "session_id": 1, "analysis": "a", "context": ["The user works on a task."],
                "preferences": ["The user wants it short."]}]}) + "\n```"
        raise AssertionError(kind)


def two_instance_plans() -> list[InstancePlan]:
    """The worked example of tests/evaluation/test_run.py.

    A: precision (1 + 0.5) / 2, recall 1 / 3;  B: precision 0 / 1, recall 2 / 2.
    micro: P = 1.5 / 3 = 0.5, R = 3 / 5 = 0.6, F1 = 6/11;
    macro: P = (0.75 + 0) / 2, R = (1/3 + 1) / 2, F1 = (2·0.75·(1/3)/(0.75 + 1/3) + 0) / 2.
    """
    return [
        InstancePlan(
            request="Draft the quarterly grant report for the Hollis Foundation.",
            truth="Reports for the Hollis Foundation must quote its criteria verbatim and stay under one page.",
            truth_checklist=["Does the response quote the criteria verbatim?",
                             "Does the response stay under one page?",
                             "Does the response avoid rewriting whole paragraphs?"],
            inferred="The user wants formal reports that quote funder criteria.",
            inferred_checklist=["Does the response quote funder criteria?",
                                "Is the response formal?"],
            precision_labels=["Fully Covered", "Partially Covered"],
            recall_labels=["Fully Covered", "Not Covered", "Not Covered"],
            judge_score=8),
        InstancePlan(
            request="Plan the lab's freezer inventory for the Kessler group.",
            truth="Inventories for the Kessler group must list exact shelf positions and counts.",
            truth_checklist=["Does the response list exact shelf positions?",
                             "Does the response give counts?"],
            inferred="The user wants exact shelf positions and counts listed.",
            inferred_checklist=["Does the response use a friendly tone?"],
            precision_labels=["Not Covered"],
            recall_labels=["Fully Covered", "Fully Covered"],
            judge_score=5),
    ]


def two_instance_rows(plans: list[InstancePlan] | None = None) -> list[dict]:
    """The worked example's two dataset rows (A consistent, B contrastive)."""
    plans = plans or two_instance_plans()
    return [make_row("persona-a", "consistent", plans[0]),
            make_row("persona-b", "contrastive", plans[1], relevant=(2, 3))]


def write_two_instance_data(path, plans: list[InstancePlan] | None = None):
    """The worked example's rows as a JSON-lines data file at ``path``; returns the path."""
    path.write_text("\n".join(json.dumps(row) for row in two_instance_rows(plans)) + "\n")
    return path
