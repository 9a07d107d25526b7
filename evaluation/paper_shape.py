"""The benchmark's shape, for a forecast without its data: instances built to the statistics
the paper gives of kixlab/CUPID's test split (data/published/cupid_shape.json, §3.3): 252
instances of each type, eight prior sessions of 6.38 turns holding 8,186.7 tokens in all, a
preference of 18.4 tokens decomposed into 2.90 checklist entries on average. Their texts are
stand-ins of those lengths (utils/forecast.py ``filler``), so a dry run renders each step's
request with its own code as for real data, and prices the paper-scale study offline.

``--dry_run`` uses them when the hub dataset cannot be read (no network, no stored copy) and
says so; the real data's requests vary around these means (Figure 9 spreads instances by
length), so per-instance costs differ while the study's total follows the means.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import config
from ..utils.dataset import Instance, make_instance_id, parse_instance
from ..utils.forecast import filler

SHAPE_FILE: Path = config.PUBLISHED_DIR / "cupid_shape.json"
NAME = "the paper's shape of kixlab/CUPID (§3.3)"


def read_shape() -> dict:
    return json.loads(SHAPE_FILE.read_text(encoding="utf-8"))


def spread(total: float, n: int, i: int) -> int:
    """The i-th of n whole numbers whose sum is ``total`` rounded: e.g. 6.38 turns a session over
    eight sessions as 6 and 7 in the right proportion."""
    return round(total * (i + 1) / n) - round(total * i / n)


def shape_instances(limit: int | None = None) -> list[Instance]:
    shape = read_shape()
    n_sessions = shape["prior_sessions"]
    turns = [spread(shape["dialogue_turns"] * n_sessions, n_sessions, s) for s in range(n_sessions)]
    n_turns = sum(turns)
    instances = []
    n_persona = shape["instances_per_type"]
    for p in range(n_persona):
        persona = f"shape-{p + 1:03d}"
        entries = spread(shape["checklist_items"] * n_persona, n_persona, p)
        for kind in shape["instance_types"]:
            sessions, turn_index = [], 0
            for s, count in enumerate(turns):
                dialogue = []
                for t in range(count):
                    tokens = spread(shape["prior_sessions_tokens"], n_turns, turn_index)
                    turn_index += 1
                    dialogue.append({"role": "user" if t % 2 == 0 else "assistant",
                                     "content": filler(tokens, f"s{s + 1}t{t + 1}")})
                sessions.append({"context_factor": f"Context {s + 1}",
                                 "contextual_preference": filler(round(shape["preference_tokens"]), f"pref{s + 1}"),
                                 "dialogue": dialogue})
            row = {"persona_id": persona, "instance_type": kind,
                   "current_request": filler(shape["request_tokens"], "request"),
                   "current_context_factor": "Context 1",
                   "current_contextual_preference": sessions[0]["contextual_preference"],
                   "current_checklist": [f"Does the response {filler(3, f'entry{e}')}?" for e in range(entries)],
                   "prior_interactions": sessions}
            instances.append(parse_instance(row, f"{NAME} {make_instance_id(persona, kind)}"))
            if limit is not None and len(instances) >= limit:
                return instances
    return instances


class ShapeSource:
    """The shape's instances as a data source (iterable, with a length), for the dry run."""

    def __init__(self, limit: int | None = None) -> None:
        self.instances = shape_instances(limit)

    def __iter__(self):
        return iter(self.instances)

    def __len__(self) -> int:
        return len(self.instances)
