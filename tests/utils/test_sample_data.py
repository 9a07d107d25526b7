"""The bundled sample data (data/sample/) has the schema and construction of kixlab/CUPID.

Most tests read the JSON files themselves, independently of the code that built them, and
check the instance construction of the paper's Appendix B.5; the last ones check that
build_sample.py rebuilds exactly these files from sample_content.yaml and rejects content
that breaks the construction.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections import defaultdict

import pytest

import cupid.utils.dataset
from cupid.evaluation.data import InstanceSource
from cupid.evaluation.steps.layouts import format_session_log
from cupid.utils.dataset import parse_instance, shape_departures
from repo_paths import ROOT

SAMPLE_DIR = ROOT / "data" / "sample"
BUILD_SCRIPT = SAMPLE_DIR / "build_sample.py"


def _builder():
    spec = importlib.util.spec_from_file_location("build_sample", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


builder = _builder()

INSTANCE_TYPES = set(cupid.utils.dataset.INSTANCE_TYPES)
FIELDS = {
    "persona_id": str,
    "instance_type": str,
    "current_request": str,
    "current_context_factor": str,
    "current_contextual_preference": str,
    "current_checklist": list,
    "prior_interactions": list,
}
SESSION_FIELDS = {"context_factor": str, "contextual_preference": str, "dialogue": list}


def _load() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(SAMPLE_DIR.glob("*.json"))}


INSTANCES = _load()


def _by_persona() -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for inst in INSTANCES.values():
        out[inst["persona_id"]][inst["instance_type"]] = inst
    return dict(out)


def _key(session: dict) -> str:
    return json.dumps(session, sort_keys=True, ensure_ascii=False)


def _sessions_with(inst: dict, factor: str, preference: str | None = None) -> list[dict]:
    return [s for s in inst["prior_interactions"] if s["context_factor"] == factor
            and (preference is None or s["contextual_preference"] == preference)]


def test_six_files_named_by_persona_and_type():
    assert len(INSTANCES) == 6
    for name, inst in INSTANCES.items():
        assert name == f"{inst['persona_id']}__{inst['instance_type']}.json"


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_instance_fields_and_types(name):
    inst = INSTANCES[name]
    assert set(inst) == set(FIELDS)
    for field, typ in FIELDS.items():
        assert isinstance(inst[field], typ), field
        if typ is str:
            assert inst[field].strip(), f"{field} is empty"
    assert inst["instance_type"] in INSTANCE_TYPES
    checklist = inst["current_checklist"]
    assert 2 <= len(checklist) <= 4
    assert all(isinstance(q, str) and q.strip().endswith("?") for q in checklist)
    assert 12 <= len(inst["current_contextual_preference"].split()) <= 30

    sessions = inst["prior_interactions"]
    assert len(sessions) == 8
    for session in sessions:
        assert set(session) == set(SESSION_FIELDS)
        for field, typ in SESSION_FIELDS.items():
            assert isinstance(session[field], typ), field
        dialogue = session["dialogue"]
        assert 4 <= len(dialogue) <= 6
        for i, message in enumerate(dialogue):
            assert set(message) == {"role", "content"}
            assert message["role"] == ("user" if i % 2 == 0 else "assistant")
            assert isinstance(message["content"], str) and message["content"].strip()
        # the paper's dialogues end with the user's short positive message
        assert dialogue[-1]["role"] == "user"
        # the current request is new, not a replay of a prior session's request
        assert dialogue[0]["content"] != inst["current_request"]


def test_two_personas_with_all_three_instance_types():
    personas = _by_persona()
    assert len(personas) == 2
    for pid, by_type in personas.items():
        assert set(by_type) == INSTANCE_TYPES, pid
        # the three instances share the current request and context factor
        assert len({i["current_request"] for i in by_type.values()}) == 1
        assert len({i["current_context_factor"] for i in by_type.values()}) == 1
        # consistent and contrastive share the truth; changing has its own
        assert (by_type["consistent"]["current_contextual_preference"]
                == by_type["contrastive"]["current_contextual_preference"])
        assert (by_type["consistent"]["current_checklist"]
                == by_type["contrastive"]["current_checklist"])


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_current_factor_and_preference_in_a_prior_session(name):
    inst = INSTANCES[name]
    assert _sessions_with(inst, inst["current_context_factor"],
                          inst["current_contextual_preference"])


@pytest.mark.parametrize("pid", sorted(_by_persona()))
def test_contrastive_factor_only_in_contrastive_instance(pid):
    by_type = _by_persona()[pid]
    consistent, contrastive, changing = (by_type[t] for t in
                                         ("consistent", "contrastive", "changing"))
    current = consistent["current_context_factor"]
    truth = consistent["current_contextual_preference"]
    factors = {t: {s["context_factor"] for s in by_type[t]["prior_interactions"]}
               for t in INSTANCE_TYPES}
    contrastive_factors = factors["contrastive"] - factors["consistent"]
    assert len(contrastive_factors) == 1
    (factor_b,) = contrastive_factors
    assert factor_b != current
    b_sessions = _sessions_with(contrastive, factor_b)
    assert len(b_sessions) == 2
    assert len({s["contextual_preference"] for s in b_sessions}) == 1
    assert b_sessions[0]["contextual_preference"] != truth
    assert factor_b not in factors["consistent"]
    assert factor_b not in factors["changing"]
    # consistent and contrastive hold the current factor only with the truth preference
    for inst in (consistent, contrastive):
        assert all(s["contextual_preference"] == truth
                   for s in _sessions_with(inst, current))


@pytest.mark.parametrize("pid", sorted(_by_persona()))
def test_changing_instance_holds_the_changed_preference(pid):
    by_type = _by_persona()[pid]
    consistent, changing = by_type["consistent"], by_type["changing"]
    current = changing["current_context_factor"]
    original = consistent["current_contextual_preference"]
    changed = changing["current_contextual_preference"]
    assert changed != original
    assert changing["current_checklist"] != consistent["current_checklist"]
    changed_pos = [i for i, s in enumerate(changing["prior_interactions"])
                   if s["context_factor"] == current and s["contextual_preference"] == changed]
    original_pos = [i for i, s in enumerate(changing["prior_interactions"])
                    if s["context_factor"] == current and s["contextual_preference"] == original]
    assert len(changed_pos) == 2
    assert len(original_pos) == 2
    # the preference changed over time: the original sessions come first
    assert max(original_pos) < min(changed_pos)
    # the changed preference never appears outside the changing instance
    for inst in (consistent, by_type["contrastive"]):
        assert not any(s["contextual_preference"] == changed for s in inst["prior_interactions"])


@pytest.mark.parametrize("pid", sorted(_by_persona()))
def test_instances_are_cut_from_one_journey_of_twelve_sessions(pid):
    by_type = _by_persona()[pid]
    keys = {t: [_key(s) for s in by_type[t]["prior_interactions"]] for t in INSTANCE_TYPES}
    union = set().union(*keys.values())
    assert len(union) == 12  # 13 sessions minus the final request
    for t in INSTANCE_TYPES:
        assert len(set(keys[t])) == 8, f"{t}: a session is repeated"
    # shared sessions keep one chronological order in every instance
    for a in INSTANCE_TYPES:
        for b in INSTANCE_TYPES:
            common = set(keys[a]) & set(keys[b])
            assert [k for k in keys[a] if k in common] == [k for k in keys[b] if k in common]
    # the session factors: A x4 (2 original + 2 changed), B x2, and six others once each
    counts: dict[str, int] = defaultdict(int)
    for k in union:
        counts[json.loads(k)["context_factor"]] += 1
    assert sorted(counts.values()) == [1, 1, 1, 1, 1, 1, 2, 4]
    assert counts[by_type["consistent"]["current_context_factor"]] == 4


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_size_limit_for_a_small_model(name):
    inst = INSTANCES[name]
    # the session log exactly as the evaluated model is shown it
    log = format_session_log(parse_instance(inst, name).prior_interactions)
    assert len(log) <= builder.MAX_PRIOR_CHARS
    for session in inst["prior_interactions"]:
        for message in session["dialogue"]:
            limit = 30 if message["role"] == "user" else 70
            assert len(message["content"].split()) <= limit, message["content"]


def test_build_script_reproduces_the_files(tmp_path):
    """The committed files are what the builder writes from the content file, byte for byte,
    and each loads with the dataset's validator, in the dataset's shape."""
    result = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--out", str(tmp_path), "--quiet"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rebuilt = sorted(p.name for p in tmp_path.glob("*.json"))
    assert rebuilt == sorted(INSTANCES)
    for name in rebuilt:
        assert (tmp_path / name).read_bytes() == (SAMPLE_DIR / name).read_bytes(), name
    assert InstanceSource(data_path=tmp_path).validate() == 6
    for name in rebuilt:
        instance = parse_instance(json.loads((tmp_path / name).read_text(encoding="utf-8")), name)
        assert f"{instance.instance_id}.json" == name
        assert shape_departures(instance) == []
        assert instance.extra == {}  # the dataset's columns only, no synthesis metadata


def test_builder_cuts_instances_with_synthesis_code():
    """The instances are synthesis's stage 7 applied to the hand-made journey: the sessions
    each one keeps are those that synthesis.instances.kept_sessions draws with the content
    file's seed."""
    from cupid.synthesis.instances import instance_rng, kept_sessions

    content = builder.load_content()
    for sessions_doc, rows in builder.build(content):
        roles = [s["role"] for s in sessions_doc["sessions"]]
        for row in rows:
            rng = instance_rng(content["instance_seed"], row["persona_id"], row["instance_type"])
            keep = kept_sessions(roles, row["instance_type"], rng)
            assert row["metadata"]["session_indices"] == keep
            on_disk = INSTANCES[f"{row['persona_id']}__{row['instance_type']}.json"]
            assert builder.dataset_row(row) == on_disk


def _break_order(persona):   # an A' session before the A sessions
    sessions = persona["sessions"]
    first_a = next(i for i, s in enumerate(sessions) if s["role"] == "A")
    first_changed = next(i for i, s in enumerate(sessions) if s["role"] == "A'")
    sessions[first_a]["role"], sessions[first_changed]["role"] = "A'", "A"


def _break_dialogue(persona):   # the assistant speaks last
    sessions = persona["sessions"]
    sessions[0]["dialogue"] = sessions[0]["dialogue"][:4]


def _break_pair(persona):   # the contrastive pair does not name each other
    persona["context_factors"][-1]["related_factor"] = "N/A"


def _break_factor(persona):   # a B session uses another factor
    session = next(s for s in persona["sessions"] if s["role"] == "B")
    session["context_factor"] = persona["context_factors"][0]["context_factor"]


def _drop_field(persona):
    del persona["changed_preference"]


@pytest.mark.parametrize("breaks, message", [
    (_break_order, "A sessions must come before the two A' sessions"),
    (_break_dialogue, "sessions[0].dialogue: the dialogue must end with the user's message"),
    (_break_pair, "must be a contrastive pair"),
    (_break_factor, "a session with role B uses"),
    (_drop_field, "missing field 'changed_preference'"),
])
def test_builder_rejects_content_that_breaks_the_construction(breaks, message):
    content = copy.deepcopy(builder.load_content())
    breaks(content["personas"][1])
    with pytest.raises(builder.SampleContentError) as excinfo:
        builder.build(content, where="content.yaml")
    text = str(excinfo.value)
    assert text.startswith("content.yaml: personas[1] (sample-02-noor-haddad): ")
    assert message in text


def test_builder_enforces_the_size_budget(monkeypatch):
    monkeypatch.setattr(builder, "MAX_PRIOR_CHARS", 5000)
    with pytest.raises(builder.SampleContentError, match=r"sample-01-priya-raman__\w+: the prior "
                                                          r"sessions are \d+ characters"):
        builder.build(builder.load_content())
