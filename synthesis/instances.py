"""Stage 7 (Appendix B.5): three instances per persona from its sessions.

With the 13-session journey, each instance keeps 8 of the 12 prior sessions:

- consistent:  drop the 2 A' sessions and the 2 B sessions;              truth = A
- contrastive: drop the 2 A' sessions and 2 random "other" sessions;      truth = A
- changing:    drop the 2 B sessions and 2 random "other" sessions;       truth = A'

The final session's own preference in the template is A' (Figure 18), yet the consistent
and contrastive instances get the ground truth A: with the A' sessions removed, A is the
only preference of the current factor the history shows.
"""
from __future__ import annotations

import hashlib
import random

from ..utils.dataset import INSTANCE_TYPES, make_instance_id
from .journey import A, A_CHANGED, B, FINAL, OTHER
from .outputs import OutputDir
from ..utils.io import read_json


def instance_rng(seed: int, persona_id: str, instance_type: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{persona_id}:{instance_type}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def kept_sessions(roles: list[str], instance_type: str, rng: random.Random) -> list[int]:
    """1-based indices of the prior sessions an instance keeps, oldest first."""
    prior = [i for i, role in enumerate(roles, start=1) if role != FINAL]
    by_role = {role: [i for i in prior if roles[i - 1] == role] for role in (A, A_CHANGED, B, OTHER)}
    if instance_type == "consistent":
        dropped = by_role[A_CHANGED] + by_role[B]
    elif instance_type == "contrastive":
        dropped = by_role[A_CHANGED] + rng.sample(by_role[OTHER], 2)
    else:  # changing
        dropped = by_role[B] + rng.sample(by_role[OTHER], 2)
    return [i for i in prior if i not in dropped]


def ground_truth(instance_type: str, original: str, changed: str) -> str:
    # Consistent and contrastive keep only A in the history; changing shows A' last.
    return changed if instance_type == "changing" else original


def build_instances(persona_id: str, sessions_doc: dict, checklists: dict[str, list[str]],
                    dialogues: dict[int, dict], seed: int, extra_metadata: dict | None = None
                    ) -> list[dict]:
    """The three instance rows of one persona, in the evaluation's data format.

    ``sessions_doc`` is the validated sessions artifact, ``checklists`` maps a preference
    to its checklist, ``dialogues`` maps a session index to its dialogue artifact."""
    sessions = sessions_doc["sessions"]
    roles = [s["role"] for s in sessions]
    final = sessions[-1]  # the journey ends with it
    rows = []
    for instance_type in INSTANCE_TYPES:
        keep = kept_sessions(roles, instance_type, instance_rng(seed, persona_id, instance_type))
        truth = ground_truth(instance_type, sessions_doc["original_preference"],
                             sessions_doc["changed_preference"])
        prior = [{"context_factor": sessions[i - 1]["context_factor"],
                  "contextual_preference": sessions[i - 1]["contextual_preference"],
                  "dialogue": [{"role": t["role"], "content": t["content"]} for t in dialogues[i]["dialogue"]]}
                 for i in keep]
        rows.append({
            "instance_id": make_instance_id(persona_id, instance_type),
            "persona_id": persona_id,
            "instance_type": instance_type,
            "current_request": final["request"],
            "current_context_factor": sessions_doc["current_factor"],
            "current_contextual_preference": truth,
            "current_checklist": list(checklists[truth]),
            "prior_interactions": prior,
            "metadata": {
                "source": "synthesis",
                "session_indices": keep,
                "session_roles": [roles[i - 1] for i in keep],
                "final_session_index": final["index"],
                "contrastive_context_factor": sessions_doc["contrastive_factor"],
                "contrastive_preference": sessions_doc["contrastive_preference"],
                "original_preference": sessions_doc["original_preference"],
                "changed_preference": sessions_doc["changed_preference"],
                **(extra_metadata or {}),
            },
        })
    return rows


def persona_instances(outputs: OutputDir, persona_id: str, seed: int, extra_metadata: dict) -> list[dict]:
    """``build_instances`` over a persona's artifacts on disk (sessions, checklists, dialogues)."""
    sessions_doc = read_json(outputs.artifact(persona_id, "sessions.json"))
    checklists = read_json(outputs.artifact(persona_id, "checklists.json"))
    dialogues = {s["index"]: read_json(outputs.dialogue_path(persona_id, s["index"]))
                 for s in sessions_doc["sessions"] if s["role"] != FINAL}
    return build_instances(persona_id, sessions_doc, checklists, dialogues, seed, extra_metadata)
