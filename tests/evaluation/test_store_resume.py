"""The store's resume rule: a stored record is reused only for the same instance content
(its fingerprint); other content is refused with a message, never silently reused."""
from __future__ import annotations

import dataclasses
import json

import pytest

from cupid.evaluation.data import load_instances
from cupid.evaluation.store import RunConflictError, RunStore
from repo_paths import SAMPLE_DATA

SAMPLE = SAMPLE_DATA / "sample-02-noor-haddad__consistent.json"


def test_a_record_is_reused_only_for_the_same_content(tmp_path):
    instance = load_instances(data_path=SAMPLE)[0]
    store = RunStore(tmp_path / "run", {"model": "m"}).open()
    record = store.load(instance, "default", "m")
    assert record.data["fingerprint"] == instance.fingerprint()
    assert record.data["history"]["n_sessions"] == len(instance.prior_interactions)
    record.data["steps"]["infer"] = {"status": "done", "output": {"preference": "kept"}}
    record.save()
    # The same content: the stored steps come back.
    again = store.load(instance, "default", "m")
    assert again.data["steps"]["infer"]["output"] == {"preference": "kept"}
    # Other content under the same id: refused, naming both fingerprints.
    changed = dataclasses.replace(instance, current_request=instance.current_request + " (edited)")
    assert changed.fingerprint() != instance.fingerprint()
    with pytest.raises(RunConflictError) as info:
        store.load(changed, "default", "m")
    assert instance.fingerprint() in str(info.value) and changed.fingerprint() in str(info.value)
    stored = json.loads(store.instance_path(instance.instance_id).read_text())
    assert stored["steps"]["infer"]["output"] == {"preference": "kept"}  # nothing lost
