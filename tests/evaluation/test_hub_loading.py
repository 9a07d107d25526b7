"""The data as users load it: a hub dataset through the real ``datasets`` and
``huggingface_hub`` against tests/support/fake_hub.py, in the published layout of
kixlab/CUPID (a README whose ``configs`` name ``test.parquet`` for the split ``test``).

The hub libraries read HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE when imported, so every load
runs in a subprocess with the environment a user sets, and a temporary HF_HOME of its own."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cupid_responder import CupidResponder, two_instance_plans, two_instance_rows
from fake_hub import FakeHub, dataset_card, parquet_bytes
from fake_llm_server import FakeLLMServer
from repo_paths import ROOT
from cupid.evaluation.data import InstanceSource

pytestmark = pytest.mark.slow  # subprocesses

CUPID = "kixlab/CUPID"
HF_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                "HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ASSETS_CACHE",
                "HF_TOKEN_PATH", "HF_XET_CACHE", "HF_ENDPOINT")

# Each case (dataset, split, revision[, token]) loaded as a run loads it; one JSON line each.
LOAD = """
import json, os, sys
from cupid.evaluation.data import InstanceSource
from cupid.utils.dataset import DataValidationError
for dataset, split, revision, *token in json.loads(sys.argv[1]):
    os.environ.pop("HF_TOKEN", None)
    if token:
        os.environ["HF_TOKEN"] = token[0]
    source = InstanceSource(dataset=dataset, split=split, revision=revision)
    try:
        source.validate()
        print(json.dumps({"data": source.describe(), "rows": [i.to_row() for i in source]}))
    except DataValidationError as exc:
        print(json.dumps({"error": str(exc)}))
"""


def published(rows: list[dict], split: str = "test") -> dict[str, bytes]:
    return {"README.md": dataset_card({split: f"{split}.parquet"}), f"{split}.parquet": parquet_bytes(rows),
            ".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}


@pytest.fixture
def rows() -> list[dict]:
    return two_instance_rows()


@pytest.fixture
def hub(rows):
    """kixlab/CUPID with two commits: ``hub.old`` (instance A only), then ``hub.main``."""
    hub = FakeHub()
    hub.old = hub.add_dataset(CUPID, published(rows[:1]))
    hub.main = hub.add_dataset(CUPID, published(rows))
    with hub:
        yield hub


@pytest.fixture
def hf_home(tmp_path) -> Path:
    return tmp_path / "hf"


def environment(hub: FakeHub, hf_home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HF_VARIABLES}
    return {**env, **hub.proxy_env(), "HF_HOME": str(hf_home), "PYTHONPATH": str(ROOT), **extra}


def load(env: dict, *cases: list) -> list[dict]:
    proc = subprocess.run([sys.executable, "-c", LOAD, json.dumps(cases)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(cases), proc.stdout
    for answer in answers:  # what a user would read, for `pytest -s`
        print(answer.get("error") or answer["data"])
    return answers


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cupid.evaluation.run", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def local(rows: list[dict], tmp_path: Path, name: str = "local") -> InstanceSource:
    """The same rows read from --data_dir, as the parquet the hub serves."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "test.parquet").write_bytes(parquet_bytes(rows))
    source = InstanceSource(data_path=directory)
    source.validate()
    return source


def as_rows(loaded: dict) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "instance_id"} for row in loaded["rows"]]


def prepared_copies(hf_home: Path) -> list[str]:
    """The copies ``datasets`` prepared, as <name>/<commit>."""
    return sorted(f"{p.parts[-5]}/{p.parts[-2]}" for p in (hf_home / "datasets").glob("*/*/*/*/*.arrow"))


def test_the_default_and_pinned_revisions_then_the_same_copies_offline(hub, rows, hf_home, tmp_path):
    main, short, pinned = load(environment(hub, hf_home), [CUPID, "test", None],
                               [CUPID, "test", hub.old[:7]], [CUPID, "test", hub.old])
    # Validation and the instances read one fetch (a moving main cannot differ between them).
    assert hub.requests.count(("HEAD", f"/datasets/{CUPID}/resolve/main/README.md")) == 1
    assert main["data"] == {"dataset": CUPID, "split": "test", "commit": hub.main,
                            "fingerprint": local(rows, tmp_path).fingerprint, "n_instances": 2}
    # The nested sessions arrive as the schema has them (lists of sessions of lists of turns).
    assert as_rows(main) == rows
    assert short["data"] == {"dataset": CUPID, "split": "test", "revision": hub.old[:7], "commit": hub.old,
                             "fingerprint": local(rows[:1], tmp_path, "a").fingerprint, "n_instances": 1}
    assert pinned["data"] == {**short["data"], "revision": hub.old}
    assert prepared_copies(hf_home) == sorted([f"kixlab___cupid/{hub.old}", f"kixlab___cupid/{hub.main}"])

    hub.stop()
    again, newer, unpinned = load(environment(hub, hf_home, HF_HUB_OFFLINE="1"), [CUPID, "test", hub.old],
                                  [CUPID, "test", hub.main], [CUPID, "test", None])
    assert again == pinned
    # datasets offline reads the copy prepared last (old), whatever is asked: refused, named.
    assert newer["error"].startswith(f"{CUPID}[test]: offline (HF_HUB_OFFLINE) the stored copy is commit "
                                     f"{hub.old}, not --revision {hub.main};")
    assert f"pass --revision {hub.old} to run on it" in newer["error"]
    assert f"not the main branch (commit {hub.main})" in unpinned["error"]


def test_hub_errors_are_one_line_saying_what_to_do_and_store_nothing(hub, rows, hf_home):
    hub.add_dataset("kixlab/Gated", published(rows))
    hub.gate("kixlab/Gated", granted_tokens=("hf_granted",))
    # CUPID-Unverified's real columns are not confirmed by any public source we could read;
    # an older commit here stands for a release without instance_type, the current one for
    # one in CUPID's schema (its split named train, as an unverified training set may be).
    without_type = [{k: v for k, v in row.items() if k != "instance_type"} for row in rows]
    unverified_old = hub.add_dataset("kixlab/CUPID-Unverified", published(without_type, "train"))
    hub.add_dataset("kixlab/CUPID-Unverified", published(rows, "train"))
    answers = load(environment(hub, hf_home),
                   [CUPID, "test", "no-such-branch"],
                   [CUPID, "test", "0" * 40],
                   ["kixlab/no-such-dataset", "test", None],
                   ["kixlab/Gated", "test", None],
                   ["kixlab/Gated", "test", None, "hf_not_granted"],
                   ["kixlab/Gated", "test", None, "hf_granted"],
                   ["kixlab/CUPID-Unverified", "test", None],
                   ["kixlab/CUPID-Unverified", "train", unverified_old],
                   ["kixlab/CUPID-Unverified", "train", None])
    errors = [a.get("error") for a in answers]
    assert all(e is None or (e.count("\n") == 0 and len(e) < 600) for e in errors)
    assert errors[0] == (f"{CUPID}[test]: no revision 'no-such-branch' of the dataset on the hub; "
                         f"pass a commit, tag or branch it has as --revision")
    assert errors[1].startswith(f"{CUPID}[test]: no revision '{'0' * 40}'")
    assert errors[2] == ("kixlab/no-such-dataset[test]: no such dataset on the Hugging Face hub (or it is "
                         "private); pass --dataset, or --data_dir for local files")
    assert errors[3] == ("kixlab/Gated[test]: gated on the hub and no token was sent: accept its conditions "
                         "on the dataset's page, then log in (`hf auth login`) or set HF_TOKEN")
    assert errors[4] == ("kixlab/Gated[test]: gated on the hub and this token has not been granted "
                         "access: ask for it on the dataset's page")
    assert answers[5]["data"]["n_instances"] == 2
    assert errors[6] == ("kixlab/CUPID-Unverified[test]: no split 'test' (Unknown split \"test\". Should be "
                         "one of ['train'].); pass --split")
    assert errors[7].startswith("kixlab/CUPID-Unverified[train]: not in CUPID's schema: no column "
                                "instance_type (its columns: persona_id, current_request,")
    assert answers[8]["data"]["fingerprint"] == answers[5]["data"]["fingerprint"]
    # The hub's refusals left no copy; the two of CUPID-Unverified were read whole.
    assert [c.split("/")[0] for c in prepared_copies(hf_home)] == \
        ["kixlab___cupid-unverified", "kixlab___cupid-unverified", "kixlab___gated"]


def test_a_run_offline_after_one_load_has_the_online_data_and_metrics(hub, rows, hf_home, tmp_path):
    with FakeLLMServer(responder=CupidResponder(two_instance_plans())) as llm:
        def run(results: Path, **env: str) -> dict:
            proc = cli(environment(hub, hf_home, **env), "--model", f"vllm:test-model@{llm.openai_base_url}",
                       "--evaluator", f"vllm:test-evaluator@{llm.openai_base_url}", "--dataset", CUPID,
                       "--results_dir", str(results), "--task", "both", "--n_workers", "2")
            assert proc.returncode == 0, proc.stderr[-3000:]
            run_dir = results / "test-model"
            return {name: json.loads((run_dir / f"{name}.json").read_text()) for name in ("run", "results")}

        online = run(tmp_path / "online")
        hub.stop()
        offline = run(tmp_path / "offline", HF_HUB_OFFLINE="1")
    expected = {"dataset": CUPID, "split": "test", "commit": hub.main,
                "fingerprint": local(rows, tmp_path).fingerprint, "n_instances": 2}
    assert online["run"]["data"] == offline["run"]["data"] == expected
    print("online", online["results"]["inference"], "offline", offline["results"]["inference"])
    for key in ("inference", "inference_macro", "generation", "by_instance_type"):
        assert online["results"][key] == offline["results"][key], key
    # The worked example's hand-computed numbers (tests/evaluation/test_run.py).
    assert online["results"]["inference"]["precision"] == pytest.approx(0.5)
    assert online["results"]["inference"]["recall"] == pytest.approx(0.6)
    assert online["results"]["generation"] == {"average_score": 6.5, "n_instances": 2}


def test_offline_with_nothing_stored_is_one_line_and_writes_nothing(hub, hf_home, tmp_path):
    proc = cli(environment(hub, hf_home, HF_HUB_OFFLINE="1"), "--model", "vllm:test-model@http://127.0.0.1:9",
               "--dataset", CUPID, "--results_dir", str(tmp_path / "res"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: bad data: {CUPID}[test]: offline (HF_HUB_OFFLINE) and no copy of it is stored in "
        f"{hf_home / 'datasets'}; load it once with the hub reachable and the same HF_HOME "
        f"(--download_only), or pass --data_dir with local files"]
    assert not (tmp_path / "res").exists() and hub.requests == []


def test_a_download_cut_off_midway_keeps_nothing_and_the_next_load_resumes(hub, rows, hf_home, tmp_path):
    hub.cut_downloads_after(100)  # then the hub stops
    [cut] = load(environment(hub, hf_home), [CUPID, "test", None])
    assert cut["error"].startswith(f"{CUPID}[test]: the hub stopped answering during the download (")
    assert cut["error"].endswith("); nothing was kept as data: run again to resume it, or pass "
                                 "--data_dir with local files")
    assert prepared_copies(hf_home) == []
    parquet = hashlib.sha256(published(rows)["test.parquet"]).hexdigest()
    blobs = hf_home / "hub" / "datasets--kixlab--CUPID" / "blobs"
    assert not (blobs / parquet).exists()  # the file's blob is complete or absent, never partial
    [offline] = load(environment(hub, hf_home, HF_HUB_OFFLINE="1"), [CUPID, "test", None])
    assert "no copy of it is stored" in offline["error"]

    hub.start()
    [resumed] = load(environment(hub, hf_home), [CUPID, "test", None])
    assert resumed["data"]["fingerprint"] == local(rows, tmp_path).fingerprint
    assert (blobs / parquet).exists()


SEQUENCE_FEATURES = """dataset_info:
  features:
  - {name: persona_id, dtype: string}
  - {name: instance_type, dtype: string}
  - {name: current_request, dtype: string}
  - {name: current_context_factor, dtype: string}
  - {name: current_contextual_preference, dtype: string}
  - {name: current_checklist, sequence: string}
  - name: prior_interactions
    sequence:
    - {name: context_factor, dtype: string}
    - {name: contextual_preference, dtype: string}
    - name: dialogue
      sequence:
      - {name: role, dtype: string}
      - {name: content, dtype: string}
"""


def _dict_of_lists(records: list[dict]) -> dict[str, list]:
    return {key: [record[key] for record in records] for key in records[0]}


def test_sessions_stored_as_dicts_of_lists_arrive_as_lists_of_dicts(rows, hf_home, tmp_path):
    """A dataset written with datasets' Sequence of a dict (datasets < 4) stores the sessions,
    and each session's turns, as a dict of lists, and its card says ``sequence:``."""
    stored = [{**row, "prior_interactions": _dict_of_lists(
        [{**s, "dialogue": _dict_of_lists(s["dialogue"])} for s in row["prior_interactions"]])} for row in rows]
    hub = FakeHub()
    hub.add_dataset(CUPID, {"README.md": dataset_card({"test": "test.parquet"}, SEQUENCE_FEATURES),
                            "test.parquet": parquet_bytes(stored)})
    with hub:
        [loaded] = load(environment(hub, hf_home), [CUPID, "test", None])
    assert as_rows(loaded) == rows
    assert loaded["data"]["fingerprint"] == local(rows, tmp_path).fingerprint == \
        local(stored, tmp_path, "stored").fingerprint


def test_the_reachability_probe_asks_the_hub_the_environment_names(monkeypatch):
    """In a process that imported the hub libraries before HF_ENDPOINT was set (a test, a
    notebook), the probe still asks that endpoint, never the libraries' default one."""
    from huggingface_hub import constants  # imported, its endpoint fixed, before the variable is set
    from cupid.utils.dataset import DataValidationError
    assert constants.ENDPOINT != "http://127.0.0.1:9"
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(DataValidationError, match=r"the Hugging Face hub at http://127\.0\.0\.1:9 is unreachable"):
        InstanceSource(dataset=CUPID).validate()


def test_download_only_stores_the_copy_that_runs_offline(hub, rows, hf_home, tmp_path):
    proc = cli(environment(hub, hf_home), "--download_only", "--dataset", CUPID, "--revision", hub.old)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stored = hf_home / "datasets" / "kixlab___cupid" / "default" / "0.0.0" / hub.old
    fingerprint = local(rows[:1], tmp_path).fingerprint
    assert proc.stdout.strip().splitlines() == [
        f"{CUPID}[test] (--revision {hub.old}): 1 instance, commit {hub.old}, fingerprint {fingerprint}, "
        f"stored in {stored}; run offline on this HF_HOME with HF_HUB_OFFLINE=1 (add --revision {hub.old} "
        f"to pin this copy)"]
    hub.stop()
    [offline] = load(environment(hub, hf_home, HF_HUB_OFFLINE="1"), [CUPID, "test", hub.old])
    assert offline["data"]["fingerprint"] == fingerprint and offline["data"]["commit"] == hub.old
    refused = cli(environment(hub, hf_home), "--download_only", "--data_dir", str(tmp_path))
    assert refused.returncode == 2 and "--download_only" in refused.stderr


@pytest.mark.parametrize("how, files_only, says", [
    ("500", False, "answered HTTP 500 (Internal Server Error) when asked for the dataset; the hub is failing on its side"),
    ("garbage", False, "answered HTTP 200 with what is not the hub's JSON (720 bytes starting"),
    ("hang", False, "accepted the connection but sent no answer within 10 s when asked for the dataset"),
    ("500", True, "answered HTTP 500 while the split was loaded; it is failing on its side"),
])
def test_a_failing_hub_is_named_with_what_it_answered_within_a_minute(hub, hf_home, how, files_only, says):
    """A hub answering 500 or garbage was 'cannot be loaded (FileNotFoundError: Couldn't find
    any data file at <the working directory>/kixlab/CUPID ...', cut mid-word, never saying
    HTTP 500; one that answers '/' but never its API took 398 s and 7 tries, then said
    'stopped answering during the download' though no download had started."""
    hub.break_api(how, files_only=files_only)
    started = time.monotonic()
    [answer] = load(environment(hub, hf_home), [CUPID, "test", None])
    elapsed = time.monotonic() - started
    error = answer["error"]
    assert error.startswith(f"{CUPID}[test]: the Hugging Face hub at {hub.base_url} ") and says in error, error
    assert str(ROOT) not in error and "during the download" not in error and "\n" not in error
    assert elapsed < 60, elapsed
    assert prepared_copies(hf_home) == []


STILL_LOADING = """
import sys
from cupid.evaluation import data, hub
hub.STILL_LOADING_EVERY = 1.0
source = data.InstanceSource(dataset=sys.argv[1])
try:
    source.validate()
except data.DataValidationError as exc:
    print(exc)
"""


def test_a_hub_silent_on_its_files_is_reported_while_it_is_waited_for(hub, hf_home):
    """The API answers, the files never do: the hub libraries retry for minutes (403 s here);
    a line every STILL_LOADING_EVERY seconds says what is waited for, and the error, once the
    hub is gone, does not claim a download that never started."""
    hub.break_api("hang", files_only=True)
    proc = subprocess.Popen([sys.executable, "-c", STILL_LOADING, CUPID], env=environment(hub, hf_home), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)
    hub.stop()
    out, err = proc.communicate(timeout=300)
    assert re.search(rf"{re.escape(CUPID)}\[test\]: still loading from the hub at {re.escape(hub.base_url)} "
                     r"\(\d s so far", err), err[-2000:]
    assert out.startswith(f"{CUPID}[test]: the Hugging Face hub at {hub.base_url} stopped answering before the "
                          f"split was loaded ("), out
