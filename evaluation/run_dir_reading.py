"""What a run directory already holds, as a new invocation of it reads it: the context a
finished instance's file says its strategy showed, the server that answered last, the runs of a
strategy of the same class beside it, and the warnings of what is kept, moved aside or asked
again (evaluation/invocation.py opens the directory with them)."""
from __future__ import annotations

from pathlib import Path

from . import strategies
from .session_recall import kept_shown
from .store import Survey, instance_file_name
from ..utils import events
from ..utils.io import read_json


def recorded_shown(run_dir: Path, setting, instance) -> "strategies.Shown | None":
    """What the run directory's file of ``instance`` says its strategy showed (None when it
    says nothing usable): the context check does not ask a strategy again for it."""
    path = run_dir / instance_file_name(instance.instance_id)
    try:
        data = read_json(path) if path.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("fingerprint") != instance.fingerprint():
        return None
    return kept_shown(setting, instance, data)


def warn_about_run_dir(run_dir: Path, survey: Survey, changed_server: str | None) -> None:
    if changed_server and survey.done:
        events.warning(f"{run_dir}: {changed_server}; the {len(survey.done)} instances already done there "
                       f"are kept, not asked again (use another --results_dir to evaluate this server afresh)")
    for path, problems in survey.invalid:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        events.warning(f"{path}: {problems[0]}{more}; its steps are run again, the values are not aggregated")
    for path, target, reason in survey.moved_aside:
        events.warning(f"{path}: {reason}; moved to {target.name}, the instance is evaluated afresh")


def endpoint_change(manifest: dict | None, model) -> str | None:
    """How the evaluated model's server differs from the one run.json last recorded."""
    invocations = (manifest or {}).get("invocations") or []
    recorded = ((invocations[-1].get("endpoints") or {}).get("model") or {}) if invocations else {}
    if "endpoint" not in recorded:
        return None
    before, current = recorded["endpoint"], model.endpoint()
    if before == current:
        return None
    return (f"{model.name} was answered by {before or 'the provider default'} in the last "
            f"invocation, now by {current or 'the provider default'}")


def other_identities(run_dir: Path, setting) -> str | None:
    """For a user's strategy's new run directory: the runs beside it of a strategy of the same
    name and class with another identity, and why they are not resumed (its source or its
    parameters differ: an edited file, or another file of the same name)."""
    mine = setting.identity
    notes = []
    for sibling in sorted(run_dir.parent.glob("*/run.json")):
        try:
            manifest = read_json(sibling)
        except (OSError, ValueError):
            continue
        theirs = manifest.get("setting_identity") if isinstance(manifest, dict) else None
        if not isinstance(theirs, dict) or theirs.get("class") != mine["class"] \
                or theirs.get("hash") == mine["hash"]:
            continue
        spec = str(manifest.get("setting_spec") or "").partition(":")[0]
        if theirs.get("source_sha256") != mine["source_sha256"]:
            why = ("its source changed since" if spec and spec == str(setting.spec or "").partition(":")[0]
                   else "another source of the same name ran")
        else:
            why = "other parameters ran"
        notes.append(f"{sibling.parent.name} ({why} there)")
    if not notes:
        return None
    return (f"{setting.name} is a new run in {run_dir}, not resumed from " + "; ".join(notes)
            + ": a strategy's run is keyed by its class, parameters and source (docs/strategies.md)")
