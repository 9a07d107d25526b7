"""The journey template of Appendix B.3 (SPEC §3.4): which session gets which factor.

Of ``n_sessions`` positions, 4 random positions before the last get the current factor A
(the first two with its original preference A, the next two with a changed, contradicting
preference A'); 2 random positions among the rest (again before the last) get the
contrastive factor B; every other position gets one of the other factors; the last session
has A with the changed preference A' (Figure 18: "The final scenario should then keep the
same preference A'").
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
    main_factor: str                # the factor drawn to be A (the model may swap, see sessions)
    contrastive_factor: str

    @property
    def n_sessions(self) -> int:
        return len(self.roles)

    def positions(self, role: str) -> list[int]:
        """1-based positions of ``role``."""
        return [i + 1 for i, r in enumerate(self.roles) if r == role]

    def to_dict(self) -> dict:
        return {"roles": list(self.roles), "main_factor": self.main_factor,
                "contrastive_factor": self.contrastive_factor}

    @classmethod
    def from_dict(cls, data: dict) -> "Journey":
        return cls(roles=tuple(data["roles"]), main_factor=data["main_factor"],
                   contrastive_factor=data["contrastive_factor"])


def make_journey(rng: random.Random, n_sessions: int, pair: tuple[str, str]) -> Journey:
    """Draw the template for one persona. ``pair`` is the contrastive pair of factor names;
    one of them is drawn to be the current factor A."""
    if n_sessions < MIN_SESSIONS:
        raise ValueError(f"a journey needs at least {MIN_SESSIONS} sessions, got {n_sessions}")
    main, contrastive = pair if rng.random() < 0.5 else (pair[1], pair[0])
    before_last = list(range(n_sessions - 1))
    a_positions = sorted(rng.sample(before_last, 4))
    rest = [p for p in before_last if p not in a_positions]
    b_positions = rng.sample(rest, 2)
    roles = [OTHER] * n_sessions
    for p in a_positions[:2]:
        roles[p] = A
    for p in a_positions[2:]:
        roles[p] = A_CHANGED
    for p in b_positions:
        roles[p] = B
    roles[-1] = FINAL
    return Journey(roles=tuple(roles), main_factor=main, contrastive_factor=contrastive)


_DESCRIPTIONS = {
    A: "Context factor A with its preference A",
    A_CHANGED: "Context factor A with the changed preference A'",
    B: "Context factor B with its preference B",
    OTHER: "One of the other context factors (neither A nor B) with its preference",
    FINAL: "Context factor A with the changed preference A' (final scenario)",
}


def format_journey_requirements(journey: Journey) -> str:
    """The ``{journey_requirements}`` block of Figure 18, one line per scenario."""
    return "\n".join(f"Scenario {i}: {_DESCRIPTIONS[role]}"
                     for i, role in enumerate(journey.roles, start=1))


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
