"""Build the bundled sample data (data/sample/*.json) from sample_content.yaml.

The content (two personas, their factors, preferences, checklists, journeys and dialogues)
is hand-written and is not benchmark data; see sample_content.yaml and README.md. The
construction is synthesis's own, so the sample is cut the way ``python -m synthesis.run``
cuts real data: each persona's journey is checked by ``synthesis.journey.check_journey``,
and its three instances are built, with their Appendix B.5 structure validated, by
``synthesis.instances.build_instances``, fed what stages 4-6 would have written (the
sessions document, the checklists and the dialogues). What is left here: reading and
checking the content, keeping the dataset's columns, and a size budget for a small model.

Usage:  python data/sample/build_sample.py [--out DIR] [--quiet]   (default: this folder)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cupid.evaluation.steps.layouts import format_session_log  # noqa: E402
from cupid.utils.dataset import make_instance_id, parse_instance  # noqa: E402
from cupid.synthesis.instances import build_instances  # noqa: E402
from cupid.synthesis.journey import A, A_CHANGED, B, FINAL, OTHER, Journey, check_journey  # noqa: E402
from cupid.utils.io import atomic_write_json  # noqa: E402

CONTENT = Path(__file__).resolve().with_name("sample_content.yaml")
N_FACTORS = 8
N_SESSIONS = 13
# The columns of kixlab/CUPID, in its order. Synthesis's rows add ``instance_id`` (the
# loader derives the same one from persona and type) and ``metadata``; the sample mirrors
# the released rows.
DATASET_COLUMNS = ("persona_id", "instance_type", "current_request", "current_context_factor",
                   "current_contextual_preference", "current_checklist", "prior_interactions")
# Size budget of one instance's prior sessions, as the harness renders them for the model
# (evaluation/steps/layouts.py's format_session_log), so that the sample stays cheap on SmolLM2-135M
# (8,192-token context). Its tokenizer gives 3.2-3.5 characters per token on this text, so
# 6,150 characters keep every instance under ~1,950 tokens.
MAX_PRIOR_CHARS = 6150


class SampleContentError(ValueError):
    """The hand-written content breaks a rule of the construction."""


def load_content(path: Path = CONTENT) -> dict:
    with open(path, encoding="utf-8") as handle:
        content = yaml.safe_load(handle)
    if not isinstance(content, dict) or not isinstance(content.get("personas"), list) \
            or not isinstance(content.get("instance_seed"), int):
        raise SampleContentError(f"{path}: expected a mapping with 'instance_seed' (an integer) "
                                 f"and 'personas' (a list)")
    return content


def _dialogue(turns: list, where: str) -> list[dict]:
    """``[{user: text}, {assistant: text}, ...]`` as ``[{role, content}, ...]``."""
    if not isinstance(turns, list) or not 4 <= len(turns) <= 6:
        raise SampleContentError(f"{where}: a dialogue needs 4-6 messages")
    messages = []
    for t, turn in enumerate(turns):
        role = "user" if t % 2 == 0 else "assistant"
        if not isinstance(turn, dict) or list(turn) != [role] or not isinstance(turn[role], str) \
                or not turn[role].strip():
            raise SampleContentError(f"{where}[{t}]: expected '{role}: <text>' (messages "
                                     f"alternate, starting with the user)")
        messages.append({"role": role, "content": turn[role]})
    if messages[-1]["role"] != "user":
        raise SampleContentError(f"{where}: the dialogue must end with the user's message")
    return messages


def _check_preference(preference: str, checklist: list, where: str) -> None:
    n_words = len(preference.split())
    if not 15 <= n_words <= 25:
        raise SampleContentError(f"{where}: the preference has {n_words} words (want 15-25)")
    if not isinstance(checklist, list) or not 2 <= len(checklist) <= 4 \
            or not all(isinstance(q, str) and q.rstrip().endswith("?") for q in checklist):
        raise SampleContentError(f"{where}: the checklist must be 2-4 yes/no questions")


def persona_inputs(persona: dict, where: str) -> tuple[dict, dict[str, list[str]], dict[int, dict]]:
    """What synthesis's stages 4-6 would have written for this persona: the sessions
    document, the checklist of each preference, and the dialogue of each prior session."""
    factors = persona["context_factors"]
    if len(factors) != N_FACTORS:
        raise SampleContentError(f"{where}: expected {N_FACTORS} context factors, "
                                 f"got {len(factors)}")
    by_name = {f["context_factor"]: f for f in factors}
    if len(by_name) != N_FACTORS:
        raise SampleContentError(f"{where}: two context factors share a name")
    first, second = factors[-2], factors[-1]
    if first["related_factor"] != second["context_factor"] \
            or second["related_factor"] != first["context_factor"] \
            or first["factor_type"] != second["factor_type"]:
        raise SampleContentError(f"{where}: the last two context factors must be a contrastive "
                                 f"pair (one factor type, each naming the other in related_factor)")
    if any(f["related_factor"] != "N/A" for f in factors[:-2]):
        raise SampleContentError(f"{where}: only the contrastive pair may have a related_factor")
    changed = persona["changed_preference"]
    for i, item in enumerate([*factors, changed]):
        label = f"context_factors[{i}]" if i < N_FACTORS else "changed_preference"
        _check_preference(item["contextual_preference"], item["checklist"], f"{where}: {label}")

    entries = persona["sessions"]
    if len(entries) != N_SESSIONS:
        raise SampleContentError(f"{where}: expected {N_SESSIONS} sessions, got {len(entries)}")
    roles = tuple(entry["role"] for entry in entries)
    a_name = entries[roles.index(A)]["context_factor"] if A in roles else None
    if a_name not in (first["context_factor"], second["context_factor"]):
        raise SampleContentError(f"{where}: the A sessions must use a factor of the "
                                 f"contrastive pair")
    b_name = (second if a_name == first["context_factor"] else first)["context_factor"]
    journey = Journey(roles=roles, main_factor=a_name, contrastive_factor=b_name)
    try:
        check_journey(journey)
    except ValueError as exc:
        raise SampleContentError(f"{where}: sessions: {exc}") from None
    a_factor, b_factor = by_name[a_name], by_name[b_name]

    sessions, dialogues = [], {}
    for index, (entry, role) in enumerate(zip(entries, roles), start=1):
        at = f"{where}: sessions[{index - 1}]"
        name = entry["context_factor"]
        expected = {A: a_name, A_CHANGED: a_name, FINAL: a_name, B: b_name}.get(role)
        if role == OTHER:
            if name not in by_name or name in (a_name, b_name):
                raise SampleContentError(f"{at}: an 'other' session needs a factor outside "
                                         f"the pair")
        elif name != expected:
            raise SampleContentError(f"{at}: a session with role {role} uses {expected!r}, "
                                     f"not {name!r}")
        source = changed if role in (A_CHANGED, FINAL) else by_name[name]
        preference = source["contextual_preference"]
        session = {"index": index, "role": role, "context_factor": name,
                   "contextual_preference": preference}
        if role == FINAL:
            session["request"] = entry["request"]
        else:
            dialogues[index] = {"dialogue": _dialogue(entry.get("dialogue"), f"{at}.dialogue")}
        sessions.append(session)
    others = [s["context_factor"] for s in sessions if s["role"] == OTHER]
    if sorted(others) != sorted(f["context_factor"] for f in factors[:-2]):
        raise SampleContentError(f"{where}: each factor outside the pair needs exactly one session")

    sessions_doc = {
        "sessions": sessions,
        "current_factor": a_name,
        "contrastive_factor": b_name,
        "original_preference": a_factor["contextual_preference"],
        "changed_preference": changed["contextual_preference"],
        "contrastive_preference": b_factor["contextual_preference"],
    }
    checklists = {f["contextual_preference"]: list(f["checklist"]) for f in factors}
    checklists[changed["contextual_preference"]] = list(changed["checklist"])
    return sessions_doc, checklists, dialogues


def build_persona(persona: dict, seed: int, where: str) -> tuple[dict, list[dict]]:
    """The persona's sessions document and its three instances as synthesis writes them."""
    sessions_doc, checklists, dialogues = persona_inputs(persona, where)
    return sessions_doc, build_instances(persona["persona_id"], sessions_doc, checklists,
                                         dialogues, seed)


def dataset_row(row: dict) -> dict:
    return {column: row[column] for column in DATASET_COLUMNS}


def prior_chars(row: dict) -> int:
    """Characters of the prior sessions as the evaluated model is shown them."""
    instance = parse_instance(row, make_instance_id(row["persona_id"], row["instance_type"]))
    return len(format_session_log(instance.prior_interactions))


def build(content: dict, where: str = str(CONTENT)) -> list[tuple[dict, list[dict]]]:
    """Every persona's sessions document and instances (synthesis's rows); raises before
    anything is written if the content breaks a rule or an instance exceeds the budget."""
    built = []
    for p, persona in enumerate(content["personas"]):
        at = f"{where}: personas[{p}] ({persona.get('persona_id')})"
        try:
            built.append(build_persona(persona, content["instance_seed"], at))
        except KeyError as exc:
            raise SampleContentError(f"{at}: missing field {exc}") from None
    for _, rows in built:
        for row in rows:
            n_chars = prior_chars(row)
            if n_chars > MAX_PRIOR_CHARS:
                raise SampleContentError(
                    f"{make_instance_id(row['persona_id'], row['instance_type'])}: the prior "
                    f"sessions are {n_chars} characters (limit {MAX_PRIOR_CHARS})")
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CONTENT.parent)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    built = build(load_content())
    args.out.mkdir(parents=True, exist_ok=True)
    for sessions_doc, rows in built:
        persona_id = rows[0]["persona_id"]
        if not args.quiet:
            print(f"{persona_id}: journey (session: role / factor)")
            for s in sessions_doc["sessions"]:
                print(f"  {s['index']:2d}: {s['role']:<6} {s['context_factor']}")
        for row in rows:
            path = args.out / f"{make_instance_id(persona_id, row['instance_type'])}.json"
            atomic_write_json(path, dataset_row(row))
            if not args.quiet:
                kept = row["metadata"]["session_indices"]
                print(f"  {row['instance_type']:<11} keeps sessions {kept}, "
                      f"{prior_chars(row)} chars -> {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
