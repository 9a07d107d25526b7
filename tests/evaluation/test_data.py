import json
import re

import pytest

from cupid_responder import make_row, two_instance_plans
from cupid.evaluation.data import InstanceSource, load_instances
from cupid.evaluation.strategies import PAPER_STRATEGIES
from cupid.evaluation.steps.layouts import format_checklist, format_checklist_bullets, format_session_log
from cupid.utils.dataset import DataValidationError, make_instance_id, safe_name


@pytest.fixture
def rows():
    plans = two_instance_plans()
    return [make_row("p1", "consistent", plans[0], n_sessions=4, relevant=(2, 4)),
            make_row("p1", "changing", plans[1], n_sessions=3, relevant=(3,))]


def test_jsonl_json_parquet_and_directories_load_the_same(rows, tmp_path):
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "b.json").write_text(json.dumps(rows))
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    one_dir = tmp_path / "synth" / "instances"
    one_dir.mkdir(parents=True)
    for r in rows:
        (one_dir / f"{r['persona_id']}_{r['instance_type']}.json").write_text(json.dumps(r))
    loaded = [load_instances(data_path=tmp_path / name) for name in ("a.jsonl", "b.json", "c.parquet")]
    loaded.append(load_instances(data_path=tmp_path / "synth"))  # looks into instances/
    for instances in loaded:
        assert [i.instance_id for i in instances] == ["p1__consistent", "p1__changing"] or \
            sorted(i.instance_id for i in instances) == ["p1__changing", "p1__consistent"]
        by_id = {i.instance_id: i for i in instances}
        assert by_id["p1__consistent"].current_checklist == tuple(rows[0]["current_checklist"])
        assert by_id["p1__consistent"].prior_interactions[1].dialogue[0].role == "user"
    assert next(iter(InstanceSource(data_path=tmp_path / "a.jsonl", limit=1))).instance_id == "p1__consistent"


def test_the_three_instances_of_a_persona_do_not_collide(rows, tmp_path):
    contrastive = dict(rows[0], instance_type="contrastive")
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows + [contrastive]))
    ids = [i.instance_id for i in load_instances(data_path=path)]
    assert len(set(ids)) == 3
    path.write_text("\n".join(json.dumps(r) for r in rows + [rows[0]]))
    with pytest.raises(DataValidationError, match=r"row 3.*duplicates .*row 1"):
        load_instances(data_path=path)


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("current_request"), "current_request"),
    (lambda r: r.update(current_checklist="Is it short?"), "current_checklist"),
    (lambda r: r.update(current_checklist=[]), "current_checklist"),
    (lambda r: r.update(instance_type="surprising"), "instance_type"),
    (lambda r: r.update(prior_interactions=[]), "prior_interactions"),
    (lambda r: r["prior_interactions"][2].pop("contextual_preference"),
     "prior_interactions[2].contextual_preference"),
    (lambda r: r["prior_interactions"][0]["dialogue"][1].update(role="system"),
     "prior_interactions[0].dialogue[1].role"),
    (lambda r: r["prior_interactions"][0]["dialogue"][0].update(content=5),
     "prior_interactions[0].dialogue[0].content"),
    (lambda r: r.update(persona_id=None), "persona_id"),
])
def test_bad_rows_name_file_row_and_field(rows, tmp_path, mutate, field):
    bad = json.loads(json.dumps(rows[1]))
    mutate(bad)
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataValidationError) as info:
        load_instances(data_path=path)
    message = str(info.value)
    assert str(path) in message and "row 2" in message and f"'{field}'" in message


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.update(current_request="\ud800 plan it"), "current_request"),
    (lambda r: r["current_checklist"].append("Is it \udfff?"), "current_checklist[2]"),
    (lambda r: r["prior_interactions"][0]["dialogue"][1].update(content="ok \udc80"),
     "prior_interactions[0].dialogue[1].content"),
    (lambda r: r.update(metadata={"notes": ["fine", "\ud83d half an emoji"]}), "metadata.notes[1]"),
    (lambda r: r.update(instance_id="id-\ud800"), "instance_id"),
])
def test_a_lone_surrogate_is_named_not_a_traceback(rows, tmp_path, mutate, field, capsys):
    """A JSON file may hold "\\ud800" alone, which reads as a str no UTF-8 can encode: the
    data's fingerprint raised UnicodeEncodeError (cupid-eval and cupid-validate)."""
    from cupid.evaluation.run import main as eval_main
    from cupid.synthesis.validation.cli import main as validate_main

    bad = json.loads(json.dumps(rows[1]))
    mutate(bad)
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataValidationError, match=rf"data.jsonl: row 2: field '{re.escape(field)}': holds a lone surrogate"):
        load_instances(data_path=path)
    assert eval_main(["--model", "embedded", "--data_dir", str(path), "--dry_run"]) == 2
    assert validate_main(["--data_dir", str(path), "--output_dir", str(tmp_path / "v"), "--dry_run"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("holds a lone surrogate") == 2


def test_a_json_line_keeps_the_line_separators_inside_its_texts(rows, tmp_path):
    """Only "\\n" ends a JSON line: U+2028, U+2029, U+0085 and a form feed written raw inside
    a text (json.dumps(..., ensure_ascii=False) writes them so) are the text's."""
    odd = json.loads(json.dumps(rows[0]))
    odd["current_request"] = "first\u2028second\u2029third\u0085fourth\x0cfifth"
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(odd, ensure_ascii=False) + "\n" + json.dumps(rows[1], ensure_ascii=False) + "\n",
                    encoding="utf-8")
    [first, _] = load_instances(data_path=path)
    assert first.current_request == odd["current_request"]


def test_unreadable_sources_are_clear(tmp_path):
    (tmp_path / "broken.jsonl").write_text('{"persona_id": "p"\n')
    with pytest.raises(DataValidationError, match="broken.jsonl: row 1: not valid JSON"):
        load_instances(data_path=tmp_path / "broken.jsonl")
    with pytest.raises(DataValidationError, match="no such file"):
        load_instances(data_path=tmp_path / "missing.jsonl")
    (tmp_path / "data.csv").write_text("a,b")
    with pytest.raises(DataValidationError, match="unsupported file type"):
        load_instances(data_path=tmp_path / "data.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataValidationError, match="no .json"):
        load_instances(data_path=tmp_path / "empty")


@pytest.mark.parametrize("raw", ["../../etc/passwd", "a/b\\c", "..", ".hidden", "x" * 300, "naïve id", "con:1"])
def test_safe_names_cannot_escape_or_collide(raw):
    name = safe_name(raw)
    assert "/" not in name and "\\" not in name and ".." not in name and not name.startswith(".")
    assert len(name) <= 120
    assert safe_name(raw) == name  # stable
    assert safe_name(raw + "!") != name


def test_clean_ids_are_kept_readable():
    assert make_instance_id("persona_017", "contrastive") == "persona_017__contrastive"


def test_session_log_format_and_oracle_selection(rows, tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    instance = load_instances(data_path=path)[0]
    log = format_session_log(instance.prior_interactions)
    # The release's layout (utils/formatting.py): headings per message, "---" after each
    # session, nothing after the last one.
    assert log.startswith("### Session 1\n\n#### User\n\nSession 1 request of p1 (consistent).\n\n"
                          "#### AI Assistant\n\nAnswer 1.\n\n#### User\n\nThanks, that works.\n\n"
                          "---\n\n### Session 2\n\n#### User\n\n")
    assert log.endswith("#### User\n\nThanks, that works.\n\n---") and "### Session 4" in log
    assert log.count("---") == len(instance.prior_interactions)
    assert instance.relevant_positions() == [2, 4]
    oracle = PAPER_STRATEGIES["oracle"].shown(instance)
    assert [s.dialogue[0].content.split(" of")[0] for s in oracle.sessions] == ["Session 2 request", "Session 4 request"]
    assert oracle.positions == (2, 4) and oracle.text == format_session_log(oracle.sessions)
    default = PAPER_STRATEGIES["default"].shown(instance)
    assert default.sessions == instance.prior_interactions and default.text == log
    assert format_checklist(["A?", "B?"]) == "1. A?\n2. B?"
    assert format_checklist_bullets(["A?", "B?"]) == "- A?\n- B?"


def test_atomic_writes_leave_readable_files_and_no_temporaries(tmp_path):
    import os
    import stat

    from cupid.utils.io import atomic_write_json, read_json
    path = tmp_path / "out" / "x.json"
    atomic_write_json(path, {"a": 1})
    atomic_write_json(path, {"a": 2})
    assert read_json(path) == {"a": 2}
    mode = stat.S_IMODE(os.stat(path).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]
    path.write_text("{broken")
    with pytest.raises(ValueError, match="x.json: not valid JSON"):
        read_json(path)
