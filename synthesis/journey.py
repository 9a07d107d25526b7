"""The journey template of Appendix B.3: which session gets which factor.

Of ``n_sessions`` positions, 4 random positions among the first n-2 get the current factor
A (the first two with its original preference A, the next two with a changed, contradicting
preference A'); 2 random positions among the rest (before the last) get the contrastive
factor B; every other position gets one of the other factors; the last session has A with
the changed preference A' (Figure 18: "The final scenario should then keep the same
preference A'").
"""
from __future__ import annotations

import random
from dataclasses import dataclass

# Slot roles.
A = "A"                # current factor, original preference
A_CHANGED = "A'"       # current factor, changed preference
B = "B"                # contrastive factor, its preference
OTHER = "other"        # one of the other factors, its preference
FINAL = "final"        # current factor, changed preference; only its request is used

MIN_SESSIONS = 9  # 7 fixed slots + at least 2 others, so that every instance type can drop 2


@dataclass(frozen=True)
class Journey:
    roles: tuple[str, ...]          # roles[i] is the role of session i + 1
    main_factor: str                # the first factor of the contrastive pair (the model picks A)
    contrastive_factor: str         # the second

    @property
    def n_sessions(self) -> int:
        return len(self.roles)

    def positions(self, role: str) -> list[int]:
        """1-based positions of ``role``."""
        return [i + 1 for i, r in enumerate(self.roles) if r == role]


def make_journey(rng: random.Random, n_sessions: int, pair: tuple[str, str]) -> Journey:
    """Draw the template for one persona with the release's draws (kixlab/CUPID@a8560ca,
    SessionsGenerator.create_series_structure): 4 positions among the first n-2 for factor
    A (the first two with A, the next two with A'), the last session A', then 2 positions
    among the remaining ones (the second-to-last included) for factor B.

    ``pair`` is the contrastive pair in the order of the factor list; the prompt offers both
    and the model chooses which is A, so ``main_factor`` is only the first of the pair."""
    if n_sessions < MIN_SESSIONS:
        raise ValueError(f"a journey needs at least {MIN_SESSIONS} sessions, got {n_sessions}")
    a_positions = sorted(rng.sample(range(n_sessions - 2), 4))
    rest = [p for p in range(n_sessions) if p not in a_positions and p != n_sessions - 1]
    b_positions = rng.sample(rest, 2)
    roles = [OTHER] * (n_sessions - 1) + [FINAL]
    for p, role in zip(a_positions + b_positions, (A, A, A_CHANGED, A_CHANGED, B, B)):
        roles[p] = role
    return Journey(roles=tuple(roles), main_factor=pair[0], contrastive_factor=pair[1])


_STRUCTURE_LINES = {
    A: "Context factor A with original preference A.",
    A_CHANGED: "Context factor A with changed preference A'.",
    FINAL: "Context factor A with changed preference A'.",
    B: "Context factor B with original preference B.",
}


def format_series_structure(journey: Journey) -> str:
    """The ``{series_structure}`` block of the release's sessions prompt: a line for each
    scenario of factor A or B, none for the others."""
    return "\n".join(f"    - Scenario ID {i}: {_STRUCTURE_LINES[role]}"
                     for i, role in enumerate(journey.roles, start=1) if role in _STRUCTURE_LINES)


def check_journey(journey: Journey) -> None:
    """Raise ValueError unless ``journey`` has the structure of Appendix B.3."""
    roles = journey.roles
    n = len(roles)
    if n < MIN_SESSIONS:
        raise ValueError(f"{n} sessions, fewer than {MIN_SESSIONS}")
    if roles[-1] != FINAL or roles.count(FINAL) != 1:
        raise ValueError("the last session, and only it, must be the final one")
    a, changed, b = journey.positions(A), journey.positions(A_CHANGED), journey.positions(B)
    if len(a) != 2 or len(changed) != 2 or len(b) != 2:
        raise ValueError(f"expected 2 A, 2 A' and 2 B sessions, got {len(a)}, {len(changed)}, {len(b)}")
    if max(a) > min(changed):
        raise ValueError("the two A sessions must come before the two A' sessions")
    if roles.count(OTHER) != n - 7:
        raise ValueError("every remaining session must hold another factor")
    if journey.main_factor == journey.contrastive_factor:
        raise ValueError("A and B must be different factors")


def persona_journey(seed: int, persona_id: str, n_sessions: int, factors: list[dict]) -> Journey:
    """The journey of a persona: drawn from its own random stream over its contrastive pair
    (the last two factors)."""
    rng = random.Random(f"{seed}:journey:{persona_id}")
    return make_journey(rng, n_sessions, (factors[-2]["context_factor"], factors[-1]["context_factor"]))
