"""The paper's settings (§4.1): what the evaluated model is shown of an instance's prior
sessions. Each setting is a ``Setting`` with a name (its run directory's), the sessions it
shows, and how: as the session log (default, oracle), as Figure 23's summaries (summary), or
not at all with the true preference given instead (oracle_preference, generation only).
The requests' prompts and the session log's layout stay the release's in every setting.
"""
from __future__ import annotations

from dataclasses import dataclass

from cupid.utils.dataset import Instance, Session


@dataclass(frozen=True)
class Setting:
    name: str
    summaries: bool = False          # infer and generate read each shown session's summary
    preference_given: bool = False   # generation is given the true preference, no sessions
    tasks: tuple[str, ...] = ("inference", "generation", "both")
    only_relevant: bool = False      # only the sessions whose preference is the current one

    def sessions(self, instance: Instance) -> tuple[Session, ...]:
        """The prior sessions shown, in their original order."""
        if self.only_relevant:
            keep = set(instance.relevant_positions())
            return tuple(s for i, s in enumerate(instance.prior_interactions, start=1) if i in keep)
        return instance.prior_interactions

    def skip_reason(self, instance: Instance) -> str | None:
        """Why the setting does not apply to an instance (it is skipped, not failed)."""
        if self.only_relevant and not instance.relevant_positions():
            return "no prior session has the current preference"
        return None


SETTINGS = {s.name: s for s in (
    Setting("default"),
    Setting("oracle", only_relevant=True),
    Setting("summary", summaries=True),
    Setting("oracle_preference", preference_given=True, tasks=("generation",)),
)}


def setting_named(name: str) -> Setting:
    try:
        return SETTINGS[name]
    except KeyError:
        raise ValueError(f"setting: expected one of {', '.join(SETTINGS)}, got {name!r}") from None
