"""What the validation checks of one instance (§3.2, Appendix E), and what it concludes.

Solvable: each entry of every instance-relevant preference's checklist (the current one; the
contrasting one of a contrastive instance; the earlier one of a changing instance) is
expressed in a session of that preference. Challenging: no entry of the current checklist
is stated by the current request. An entry counts as expressed only through a fragment
that stands in the user's messages of that dialogue (``fragments.kept_fragments``).

A synthesis output records the contrasting and earlier preferences (each instance's
``metadata``) and every preference's checklist (``personas/<id>/checklists.json``). The
benchmark's own rows record neither: the earlier preference of a changing instance is read
from its sessions (the current factor's sessions of another preference), its checklist from
the instance whose current preference it is; the contrasting one from the series, as B.5
builds it: the contrastive instance's sessions absent from the consistent one
(``recovered_contrast``); the row says so, or why it was left unchecked.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .fragments import request_session
from ...utils.dataset import Instance, Session
from ...utils.io import read_json

CURRENT, CONTRASTING, EARLIER, REQUEST = "current", "contrasting", "earlier", "current request"
EXPRESSED, NOT_EXPRESSED, FAILED = "expressed", "not expressed", "failed"


@dataclass(frozen=True)
class Check:
    """One preference of an instance, checked on each of its sessions (``positions`` are
    1-based in ``prior_interactions``; 0 is the current request)."""
    role: str
    preference: str
    positions: tuple[int, ...]


def _same(a: str, b: str) -> bool:
    return a.strip() == b.strip()


def positions_of(instance: Instance, preference: str) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(instance.prior_interactions, start=1)
                 if _same(s.contextual_preference, preference))


def _session_key(session: Session) -> tuple:
    return (session.context_factor.strip(), session.contextual_preference.strip(),
            tuple((t.role, t.content) for t in session.dialogue))


def recovered_contrast(instance: Instance, consistent: Instance | None) -> tuple[str | None, str]:
    """A contrastive instance's contrasting preference read from its series, as B.5 builds
    the two: the consistent instance drops the contrastive factor's two sessions, the
    contrastive one keeps them and drops two others instead, so its sessions absent from the
    consistent instance are the contrastive factor's. (preference, how it was found), or
    (None, why not)."""
    if consistent is None:
        return None, "the series has no consistent instance in the data to tell its sessions apart"
    theirs = {_session_key(s) for s in consistent.prior_interactions}
    added = [s for s in instance.prior_interactions if _session_key(s) not in theirs]
    preferences = {s.contextual_preference.strip() for s in added}
    if len(preferences) != 1 or _same(added[0].context_factor, instance.current_context_factor):
        return None, (f"the sessions absent from the consistent instance hold {len(preferences)} preferences, "
                      f"not one of another factor")
    return preferences.pop(), "read from the series as B.5 builds it (the sessions absent from the consistent instance)"


def consistent_instances(instances: Iterable[Instance]) -> dict[str, Instance]:
    """Each persona's consistent instance."""
    return {i.persona_id: i for i in instances if i.instance_type == "consistent"}


def plan_checks(instance: Instance, consistent: Instance | None = None) -> tuple[list[Check], list[str]]:
    """The instance's checks and what could not be checked, or was read from the series (one
    line each). ``consistent``: the series' consistent instance, from which a contrastive
    instance's contrasting preference is recovered where the data does not record it."""
    meta = instance.extra.get("metadata") if isinstance(instance.extra.get("metadata"), dict) else {}
    current = instance.current_contextual_preference
    checks = [Check(CURRENT, current, positions_of(instance, current))]
    unchecked = []
    if instance.instance_type == "contrastive":
        contrast = meta.get("contrastive_preference")
        if not (isinstance(contrast, str) and contrast.strip()):
            contrast, how = recovered_contrast(instance, consistent)
            unchecked.append(f"contrasting preference: not recorded in the data (no metadata.contrastive_preference); "
                             f"{how}" + ("" if contrast else ", so it is left unchecked"))
        if contrast:
            checks.append(Check(CONTRASTING, contrast, positions_of(instance, contrast)))
    elif instance.instance_type == "changing":
        earlier = meta.get("original_preference")
        if not (isinstance(earlier, str) and earlier.strip()):
            others = {s.contextual_preference.strip() for s in instance.prior_interactions
                      if _same(s.context_factor, instance.current_context_factor) and not _same(s.contextual_preference, current)}
            earlier = others.pop() if len(others) == 1 else None
        if earlier:
            checks.append(Check(EARLIER, earlier, positions_of(instance, earlier)))
        else:
            unchecked.append("earlier preference: not recorded in the data and not one preference of the current "
                             "factor's other sessions")
    checks.append(Check(REQUEST, current, (0,)))
    return checks, unchecked


def session_at(instance: Instance, position: int) -> Session:
    return request_session(instance.current_request) if position == 0 else instance.prior_interactions[position - 1]


def known_checklists(data_dir: Path, instances: Iterable[Instance]) -> dict[tuple[str, str], tuple[list[str], str]]:
    """(persona_id, preference) -> (checklist, where it came from): every instance's current
    checklist, and a synthesis output's checklists.json files (which win: they are the ones
    the dialogues were simulated with)."""
    book: dict[tuple[str, str], tuple[list[str], str]] = {}
    for instance in instances:
        book.setdefault((instance.persona_id, instance.current_contextual_preference.strip()),
                        (list(instance.current_checklist), "instance"))
    for persona_id in sorted({persona_id for persona_id, _ in book}):
        path = data_dir / "personas" / persona_id / "checklists.json"  # none when data_dir is a file
        if path.is_file():
            for preference, checklist in read_json(path).items():
                if isinstance(checklist, list) and checklist:
                    book[(persona_id, preference.strip())] = (list(checklist), "synthesis")
    return book


# ---------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------
@dataclass
class EntryResult:
    """One checklist entry of one check, over the check's sessions."""
    role: str
    preference: str
    index: int
    entry: str
    fragments: list[dict] = field(default_factory=list)   # kept: {"session", "text"}
    dropped: list[dict] = field(default_factory=list)     # not in the user's messages
    ratings: dict = field(default_factory=dict)           # session -> rating, where fragments were kept
    failed_sessions: list[int] = field(default_factory=list)
    no_session: bool = False

    def add(self, position: int, item: dict | None, kept: list[str], dropped: list[str]) -> None:
        if item is None:
            self.failed_sessions.append(position)
            return
        self.fragments += [{"session": position, "text": text} for text in kept]
        self.dropped += [{"session": position, "text": text} for text in dropped]
        if kept:
            self.ratings[position] = item.get("rating")

    @property
    def verdict(self) -> str:
        if self.fragments:
            return EXPRESSED
        return FAILED if self.failed_sessions else NOT_EXPRESSED

    def to_dict(self) -> dict:
        ratings = [r for r in self.ratings.values() if isinstance(r, int)]
        return {"preference_role": self.role, "preference": self.preference, "index": self.index,
                "entry": self.entry, "verdict": self.verdict, "fragments": self.fragments,
                "rating": min(ratings) if ratings else None,  # its most explicit expression
                "ratings": {str(k): v for k, v in self.ratings.items()}, "dropped_fragments": self.dropped,
                **({"failed_sessions": self.failed_sessions} if self.failed_sessions else {}),
                **({"note": "no prior session holds this preference"} if self.no_session else {})}


def conclude(entries: list[dict]) -> tuple[bool | None, bool | None]:
    """(solvable, challenging) from an instance's entries: False as soon as one entry decides
    it, None (unknown) while an entry that could decide it failed, else True."""
    def judge(rows: list[dict], bad: str) -> bool | None:
        if any(r["verdict"] == bad for r in rows):
            return False
        return None if any(r["verdict"] == FAILED for r in rows) else True
    prior = [e for e in entries if e["preference_role"] != REQUEST]
    request = [e for e in entries if e["preference_role"] == REQUEST]
    return judge(prior, NOT_EXPRESSED), judge(request, EXPRESSED)
