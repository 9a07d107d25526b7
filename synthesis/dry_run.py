"""``python -m synthesis.run ... --dry_run``: what a synthesis would cost, before paying for it.

Nothing is sent, no key is needed, nothing is written. The persona templates are drawn
from the seeds exactly as a run draws them (no model call), so the first stage's requests,
the persona descriptions (Figure 13), are rendered by the stage's own code as they would be
sent. The later stages (context factors, sessions, checklists, dialogues) depend on earlier
answers: their requests are rendered by their own code too, with stand-ins of those answers
of the lengths in ``ASSUMPTIONS`` (the real artifact when an earlier run left one in the
output directory, which is read, never written; a stage whose artifact exists costs nothing).
Tokens, and the reasoning tokens each role's model spends (the mean per call an earlier run's
summary.json recorded, else the model family's figure): utils/forecast.py.
"""
from __future__ import annotations

from . import personas as persona_stage
from .dialogues import assistant_reply, ask_user_simulator, opening_turn, user_simulator_system_prompt
from . import stages as stage_table
from .factors import FACTOR_TOKENS, PREFERENCE_TOKENS
from .journey import FINAL
from .outputs import OutputDir
from .sessions import REQUEST_TOKENS, SESSION_TOKENS
from .options import SynthesisConfig, stage_models
from .taxonomy import load_occupations, load_taxonomy
from ..evaluation.steps import decompose
from ..utils.forecast import (TOKEN_COUNTING, RenderOnly, RoleForecast, filler, parse_limits, print_forecast,
                              recorded_reasoning, render, role_forecast, summary)
from ..utils.errors import BadInput
from ..utils.io import read_json

DESCRIPTION_TOKENS = 250      # one persona's description (and its occupation) in the answer
CHECKLIST_TOKENS = 80         # a decomposed checklist (up to 4 questions)
USER_TURNS = 3                # user-simulator turns per dialogue before it ends it
USER_ANSWER_TOKENS = 200      # the user simulator's whole answer (evaluation, score, message)
USER_MESSAGE_TOKENS = 50      # its message to the assistant
ASSISTANT_REPLY_TOKENS = 400  # an assistant-simulator reply
ASSUMPTIONS = (
    f"a persona description is {DESCRIPTION_TOKENS} tokens; a context factor {FACTOR_TOKENS}; "
    f"a session {SESSION_TOKENS} (its request {REQUEST_TOKENS}); a preference {PREFERENCE_TOKENS}; "
    f"a checklist {CHECKLIST_TOKENS}",
    "the sessions use every factor: one checklist per factor (at most one per session)",
    f"a dialogue ends after {USER_TURNS} user-simulator turns (at most --max_turns - 1): "
    f"{USER_TURNS} user-simulator calls and {USER_TURNS + 1} assistant-simulator calls; a user-simulator "
    f"answer is {USER_ANSWER_TOKENS} tokens (its message {USER_MESSAGE_TOKENS}), an assistant reply "
    f"{ASSISTANT_REPLY_TOKENS}",
    "every answer is valid at the first attempt (no regenerations)",
)


def main(cfg: SynthesisConfig, rate_limits: list[str], *, as_json: bool) -> int:
    """The forecast of ``cfg`` (checked by the caller) printed; a bad seed source or model
    raises its CupidError and an unreadable artifact its BadInput, which the command prints."""
    limits = parse_limits(rate_limits)
    try:
        roles = forecast(cfg)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    result = {"dry_run": True, **summary(list(roles.values()), limits),
              "token_counting": TOKEN_COUNTING, "assumptions": list(ASSUMPTIONS)}
    header = [f"dry run: no request sent, nothing written; {cfg.n_personas} personas x "
              f"{cfg.n_sessions} sessions into {cfg.output_dir}"]
    print_forecast(result, header, "rendered by the stages' code: the persona descriptions (from the "
                   "seeds); the later stages are rendered with stand-in answers", ASSUMPTIONS,
                   as_json=as_json)
    return 0


def forecast(cfg: SynthesisConfig) -> dict[str, RoleForecast]:
    models = stage_models(cfg, cache=None)
    render_only = {role: RenderOnly(model) for role, model in models.items()}
    # --batch sends the synthesizer's calls only; the simulators and the decomposer answer online.
    recorded = recorded_reasoning(cfg.output_dir)
    roles = {role: role_forecast(role, model, role == "synthesizer" and model.batch_adapter() is not None, recorded)
             for role, model in models.items()}
    out = OutputDir(cfg.output_dir)
    taxonomy = load_taxonomy()

    personas = out.read_personas()["personas"][: cfg.n_personas]
    if len(personas) < cfg.n_personas:
        seeds, _ = persona_stage.load_seeds(cfg.persona_seeds)
        templates = persona_stage.make_templates(seeds, cfg.n_personas, load_occupations(), taxonomy,
                                                 cfg.seed, existing=personas)
        personas += [dict(t, description=None) for t in templates[len(personas):]]

    todo = [p for p in personas if not p.get("description")]
    for batch in persona_stage.description_batches(todo, cfg.persona_batch_size, {}):
        request = render(lambda: persona_stage.describe_personas(
            render_only["synthesizer"], batch, taxonomy, max_attempts=1))
        roles["synthesizer"].add_request("descriptions", request, DESCRIPTION_TOKENS * len(batch))

    for persona in personas:
        forecast_persona(cfg, out, persona, taxonomy, render_only, roles)
    return roles


def forecast_persona(cfg: SynthesisConfig, out: OutputDir, persona: dict, taxonomy, render_only: dict,
                     roles: dict[str, RoleForecast]) -> None:
    pid = persona["persona_id"]
    description = persona.get("description") or filler(DESCRIPTION_TOKENS, "persona")

    # The persona stages (stages.py), each rendered by its own code; a stand-in of its answer's
    # shape for the stages after it, unless an earlier run left its artifact.
    shown, artifacts = dict(persona, description=description), {}
    for row in stage_table.persona_stages():
        path = out.artifact(pid, f"{row.name}.json")
        if path.exists():
            artifacts[row.name] = read_json(path)
            continue
        hooks, inputs = row.hooks(), {i: artifacts[i] for i in row.inputs if i in artifacts}
        request = render(lambda: hooks.request(render_only[row.roles[0]], shown, inputs, cfg, taxonomy, max_attempts=1))
        roles[row.roles[0]].add_request(row.name, request, hooks.answer_tokens(cfg))
        artifacts[row.name] = hooks.stand_in(shown, inputs, cfg)
    sessions = artifacts["sessions"]["sessions"]

    preferences = list(dict.fromkeys(s["contextual_preference"] for s in sessions))
    checklists_path = out.artifact(pid, "checklists.json")
    checklists = read_json(checklists_path) if checklists_path.exists() else {}
    stand_in_checklist = [f"Does the response {filler(CHECKLIST_TOKENS // 4 - 3, 'check')}?"] * 4
    for preference in preferences:
        if preference not in checklists:
            request = render(lambda p=preference: decompose.ask(p).answer(render_only["decomposer"]))
            roles["decomposer"].add_request("checklists", request, CHECKLIST_TOKENS)

    for session in sessions:
        if session["role"] == FINAL or out.dialogue_path(pid, session["index"]).exists():
            continue
        checklist = checklists.get(session["contextual_preference"]) or stand_in_checklist
        forecast_dialogue(cfg, description, session, checklist, render_only, roles)


def forecast_dialogue(cfg: SynthesisConfig, description: str, session: dict, checklist: list[str],
                      render_only: dict, roles: dict[str, RoleForecast]) -> None:
    """The calls of one dialogue, in the order dialogue_steps makes them."""
    system = user_simulator_system_prompt(description, session, checklist)
    user_chat = [{"role": "assistant", "content": opening_turn(session["request"])}]
    assistant_chat = [{"role": "user", "content": session.get("request_sent", session["request"])}]
    user_turns = min(USER_TURNS, cfg.max_turns - 1)
    reply = filler(ASSISTANT_REPLY_TOKENS, "reply")
    for turn in range(user_turns + 1):
        if turn > 0:
            user_chat.append({"role": "user", "content": reply})
            request = render(lambda: ask_user_simulator(render_only["user_simulator"], system, user_chat, 0))
            roles["user_simulator"].add_request("dialogues", request, USER_ANSWER_TOKENS)
            user_chat.append({"role": "assistant", "content": filler(USER_ANSWER_TOKENS, "answer")})
            assistant_chat.append({"role": "user", "content": filler(USER_MESSAGE_TOKENS, "message")})
        request = render(lambda: assistant_reply(render_only["assistant_simulator"], assistant_chat, 1))
        roles["assistant_simulator"].add_request("dialogues", request, ASSISTANT_REPLY_TOKENS)
        assistant_chat.append({"role": "assistant", "content": reply})
