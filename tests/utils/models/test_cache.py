"""The response cache: what its key covers (every field that changes an answer, and which
server answers), and the per-process files that never cost a paid answer."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil

import pytest

from fake_llm_server import FakeLLMServer
from cupid.utils.models.cache import ResponseCache
from cupid.utils.models.openai_models import OpenAIModel
from cupid.utils.models.vllm_models import VLLMModel
from cupid.utils.models.request import Completion, Request, Usage, normalise_endpoint
from cupid.utils.models.together_models import TogetherModel

BASE = Request("system prompt", ({"role": "user", "content": "question"},),
               temperature=0.0, max_tokens=100)

# Every request field that changes what the model answers, each with a changed value.
ANSWER_FIELDS = [
    ("system_prompt", "another system prompt"),
    ("messages", ({"role": "user", "content": "another question"},)),
    ("messages", ({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                  {"role": "user", "content": "question"})),
    ("temperature", 0.7),
    ("temperature", None),
    ("max_tokens", 101),
    ("max_tokens", None),
    ("json_schema", {"type": "object"}),
    ("answer_grammar", 'root ::= "x"'),
    ("seed", 1),
    ("reasoning_effort", "low"),
    ("thinking_budget", 2048),
    ("variant", 1),
]


def test_every_request_field_is_covered_by_the_table():
    # A field added to Request must be classified here: in the key, or (timeout, and the layout,
    # which Model.constrain turns into key fields before the key is computed) not.
    names = {f.name for f in dataclasses.fields(Request)}
    assert names == {name for name, _ in ANSWER_FIELDS} | {"timeout", "layout"}


def test_the_layout_is_not_in_the_key():
    from cupid.utils.models.answer_layout import Json
    assert (dataclasses.replace(BASE, layout=Json({"type": "object"})).cache_key("m", "openai", None)
            == BASE.cache_key("m", "openai", None))


@pytest.mark.parametrize("field,value", ANSWER_FIELDS, ids=lambda v: str(v)[:20])
def test_each_answer_field_changes_the_key(field, value):
    changed = dataclasses.replace(BASE, **{field: value})
    assert changed.cache_key("m", "openai", None) != BASE.cache_key("m", "openai", None)


@pytest.mark.parametrize("who", [
    ("other-model", "openai", None),
    ("m", "vllm", None),
    ("m", "together", None),
    ("m", "openai", "http://127.0.0.1:8001/v1"),
])
def test_model_provider_and_endpoint_change_the_key(who):
    assert BASE.cache_key(*who) != BASE.cache_key("m", "openai", None)


def test_the_timeout_does_not_change_the_key():
    assert (dataclasses.replace(BASE, timeout=5.0).cache_key("m", "openai", None)
            == BASE.cache_key("m", "openai", None))


def test_the_key_is_stable_for_equal_requests():
    again = Request("system prompt", ({"role": "user", "content": "question"},),
                    temperature=0.0, max_tokens=100)
    assert again.cache_key("m", "openai", "http://h/v1") == BASE.cache_key("m", "openai", "http://h/v1")


@pytest.mark.parametrize("a,b", [
    ("HTTP://LocalHost:80/v1/", "http://localhost/v1"),
    ("https://api.example.com:443", "https://api.example.com/"),
    ("http://h2:8000/v1,http://h1:8000/v1", "http://h1:8000/v1/, http://H2:8000/v1"),
])
def test_one_server_has_one_spelling(a, b):
    assert normalise_endpoint(a) == normalise_endpoint(b)


def test_different_servers_stay_different():
    assert normalise_endpoint("http://h:8000/v1") != normalise_endpoint("http://h:8001/v1")
    assert normalise_endpoint("http://h/v1") != normalise_endpoint("https://h/v1")
    assert normalise_endpoint("http://u:secret@h/v1") == "http://h/v1"  # no credentials


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_one_name_on_two_servers_asks_the_second(tmp_path):
    cache = ResponseCache(tmp_path / ".llm_cache")
    with FakeLLMServer(responder=lambda req: "first checkpoint") as one, \
            FakeLLMServer(responder=lambda req: "second checkpoint") as two:
        a = VLLMModel(f"llama@{one.openai_base_url}", cache=cache)
        b = VLLMModel(f"llama@{two.openai_base_url}", cache=cache)
        assert a.chat("s", user("q")) == "first checkpoint"
        assert b.chat("s", user("q")) == "second checkpoint"
        assert len(two.requests) == 1
        # Each server's answer is then replayed for that server only.
        assert a.chat("s", user("q")) == "first checkpoint"
        assert b.chat("s", user("q")) == "second checkpoint"
        assert (len(one.requests), len(two.requests)) == (1, 1)
        # The same server spelled differently is the same server.
        spelled = VLLMModel(
            f"llama@{two.openai_base_url}/", cache=cache)
        assert spelled.endpoint() == b.endpoint()
        assert spelled.chat("s", user("q")) == "second checkpoint"
        assert len(two.requests) == 1
    cache.close()


def test_a_changed_openai_base_url_is_another_server(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / ".llm_cache")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer(responder=lambda req: "one") as one, \
            FakeLLMServer(responder=lambda req: "two") as two:
        monkeypatch.setenv("OPENAI_BASE_URL", one.openai_base_url)
        assert OpenAIModel("gpt-4o-mini", cache=cache).chat("s", user("q")) == "one"
        monkeypatch.setenv("OPENAI_BASE_URL", two.openai_base_url)
        assert OpenAIModel("gpt-4o-mini", cache=cache).chat("s", user("q")) == "two"
        # ... and another model name on the same server is another model.
        assert OpenAIModel("gpt-4o", cache=cache).chat("s", user("q")) == "two"
        assert len(two.requests) == 2
    cache.close()


def test_together_and_vllm_do_not_share_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("TOGETHER_API_KEY", "test-together")
    cache = ResponseCache(tmp_path / ".llm_cache")
    with FakeLLMServer(responder=lambda req: "answer") as server:
        monkeypatch.setenv("TOGETHER_BASE_URL", server.base_url)
        together = TogetherModel("org/x", cache=cache)
        vllm = VLLMModel(f"org/x@{server.openai_base_url}", cache=cache)
        together.chat("s", user("q"))
        vllm.chat("s", user("q"))
        assert len(server.requests) == 2
    cache.close()


def test_a_farm_is_keyed_by_its_set_of_urls():
    a = VLLMModel("m@http://h1:8000/v1,http://h2:8000/v1")
    b = VLLMModel("m@http://H2:8000/v1/,http://h1:8000/v1")
    assert a.endpoint() == b.endpoint() == "http://h1:8000/v1,http://h2:8000/v1"
    assert a.endpoint() != VLLMModel("m@http://h1:8000/v1").endpoint()


# -- per-process files -----------------------------------------------------------------------
def answer(text: str, batch: bool = False) -> Completion:
    return Completion(text=text, usage=Usage(10, 5, batch))


def test_processes_share_answers_through_their_own_files(tmp_path):
    directory = tmp_path / ".llm_cache"
    first, second = ResponseCache(directory), ResponseCache(directory)
    first.put("k1", answer("one", batch=True))
    assert second.get("k1").text == "one"  # picked up on the miss
    assert second.get("k1").usage == Usage(10, 5, True)
    second.put("k2", answer("two"))
    assert first.get("k2").text == "two"
    files = sorted(directory.glob("*.jsonl"))
    assert len(files) == 2  # each wrote only its own
    assert all(len(f.read_text().splitlines()) == 1 for f in files)
    # A process started later reads both.
    third = ResponseCache(directory)
    assert (third.get("k1").text, third.get("k2").text) == ("one", "two")
    assert third.get("k3") is None
    for cache in (first, second, third):
        cache.close()


def test_a_partial_or_foreign_line_is_skipped(tmp_path, capsys):
    directory = tmp_path / ".llm_cache"
    directory.mkdir()
    good = json.dumps({"key": "k", "text": "kept", "prompt_tokens": 1, "completion_tokens": 1,
                       "batch": False})
    (directory / "other-1-x.jsonl").write_text(f"not json\n{good}\n" + '{"key": "half')
    cache = ResponseCache(directory)
    assert cache.get("k").text == "kept"
    assert cache.get("half") is None
    err = capsys.readouterr().err
    assert err.count("not a cache entry") == 1 and "other-1-x.jsonl: a line at byte 0" in err
    cache.close()


def test_an_unwritable_cache_is_one_warning_and_keeps_answers_in_memory(tmp_path, capsys):
    # A regular file where the directory should be: the directory cannot be made (also as
    # root, unlike a permission bit).
    blocked = tmp_path / ".llm_cache"
    blocked.write_text("not a directory")
    cache = ResponseCache(blocked)
    cache.put("k1", answer("one"))
    cache.put("k2", answer("two"))
    assert cache.get("k1").text == "one" and cache.get("k2").text == "two"
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and str(blocked) in err and "kept in memory" in err
    assert not cache.writable
    cache.close()


def test_a_write_that_fails_midway_loses_nothing(tmp_path, monkeypatch, capsys):
    import errno

    directory = tmp_path / ".llm_cache"
    cache = ResponseCache(directory)
    cache.put("k1", answer("one"))
    real_write = os.write

    def full(fd, data):
        real_write(fd, bytes(data[:7]))  # a partial line, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    cache.put("k2", answer("two"))
    monkeypatch.setattr(os, "write", real_write)
    assert cache.get("k2").text == "two"
    assert "disk full (ENOSPC)" in capsys.readouterr().err
    # Another process reads the complete line and skips the partial one.
    other = ResponseCache(directory)
    assert other.get("k1").text == "one" and other.get("k2") is None
    other.put("k2", answer("two"))  # a rerun with space writes it again
    assert ResponseCache(directory).get("k2").text == "two"
    cache.close()
    other.close()


def test_a_cache_that_only_reads_writes_no_file(tmp_path):
    directory = tmp_path / ".llm_cache"
    cache = ResponseCache(directory)
    assert cache.get("k") is None
    cache.close()
    assert not directory.exists() or not list(directory.iterdir())


def test_an_old_single_file_cache_is_not_read(tmp_path):
    old = tmp_path / ".llm_cache.sqlite"
    old.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    cache = ResponseCache(tmp_path / ".llm_cache")
    assert cache.get("anything") is None
    assert old.read_bytes().startswith(b"SQLite format 3")  # left as it was
    cache.close()


def test_concurrent_writers_in_one_process_keep_whole_lines(tmp_path, capsys):
    import threading

    directory = tmp_path / ".llm_cache"
    cache = ResponseCache(directory)
    threads = [threading.Thread(target=lambda i=i: [cache.put(f"k{i}-{j}", answer("x" * 5000))
                                                    for j in range(20)]) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cache.close()
    reader = ResponseCache(directory)
    assert all(reader.get(f"k{i}-{j}") is not None for i in range(8) for j in range(20))
    assert "not a cache entry" not in capsys.readouterr().err


def test_cache_file_names_are_per_process(tmp_path):
    a, b = ResponseCache(tmp_path / "c"), ResponseCache(tmp_path / "c")
    a.put("k", answer("x"))
    b.put("k", answer("x"))
    names = [p.name for p in (tmp_path / "c").iterdir()]
    assert len(set(names)) == 2 and all(f"-{os.getpid()}-" in n for n in names)
    a.close()
    b.close()



# -- processes sharing one results directory ---------------------------------------------------
@pytest.mark.slow
def test_processes_on_one_directory_read_each_others_answers(tmp_path):
    from cupid_responder import CupidResponder, two_instance_plans
    from tests.evaluation.test_run_safety import cli, spawn, write_rows

    plans = two_instance_plans()
    data = write_rows(tmp_path / "data.jsonl", plans, ["persona-a", "persona-b"])
    base = tmp_path / "shared"
    with FakeLLMServer(responder=CupidResponder(plans)) as server:
        one = cli(server, data, base, "--task", "both")
        two = [a.replace("test-model", "test-model-2") for a in one]
        procs = [spawn(one), spawn(two)]
        outs = [p.communicate(timeout=240) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        files = sorted((base / ".llm_cache").glob("*.jsonl"))
        assert len(files) == 2  # one per process, each whole
        lines = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        assert len(lines) == len(server.requests)
        # A third process evaluating the first model afresh pays for nothing: every answer
        # is in the other processes' files.
        shutil.rmtree(base / "test-model")
        asked = len(server.requests)
        third = spawn(one)
        out, err = third.communicate(timeout=240)
        assert third.returncode == 0, err
        assert len(server.requests) == asked
        assert sum(int(n) for n in re.findall(r"(\d+) cached", out)) == 12


def test_a_run_whose_cache_cannot_be_written_keeps_every_answer(tmp_path, capsys):
    from cupid_responder import CupidResponder, two_instance_plans
    from cupid.evaluation import run as run_module
    from tests.evaluation.test_run_safety import cli, results_of, write_rows
    from counts_check import assert_counts_agree

    plans = two_instance_plans()
    data = write_rows(tmp_path / "data.jsonl", plans, ["persona-a", "persona-b"])
    base = tmp_path / "res"
    base.mkdir()
    (base / ".llm_cache").write_text("a file where the cache directory should be")
    with FakeLLMServer(responder=CupidResponder(plans)) as server:
        assert run_module.main(cli(server, data, base, "--task", "both")) == 0
        captured = capsys.readouterr()
        assert captured.err.count("cannot write the response cache") == 1
        assert captured.err.count("warning:") == 1 and "not a directory (ENOTDIR)" in captured.err
        assert len(server.requests) == 12
    results = assert_counts_agree(base / "test-model", captured.out)
    assert results["counts"]["evaluated"] == 2 and results["counts"]["failed"] == 0
    assert results_of(base)["generation"]["n_instances"] == 2


def test_a_run_against_another_server_is_asked_and_recorded(tmp_path, capsys):
    from cupid_responder import CupidResponder, two_instance_plans
    from cupid.evaluation import run as run_module
    from tests.evaluation.test_run_safety import cli, results_of, write_rows

    plans = two_instance_plans()
    other_plans = [dataclasses.replace(p, judge_score=1) for p in plans]
    data = write_rows(tmp_path / "data.jsonl", plans, ["persona-a", "persona-b"])
    base = tmp_path / "res"
    with FakeLLMServer(responder=CupidResponder(plans)) as one, \
            FakeLLMServer(responder=CupidResponder(other_plans)) as two:
        assert run_module.main(cli(one, data, base, "--task", "both")) == 0
        first = results_of(base)["generation"]["average_score"]
        # The same name at another URL: done instances are kept, and the run says so.
        capsys.readouterr()
        assert run_module.main(cli(two, data, base, "--task", "both")) == 0
        err = capsys.readouterr().err
        assert f"answered by {one.openai_base_url} in the last invocation, now by " \
               f"{two.openai_base_url}" in err
        assert len(two.requests) == 0
        # Evaluated afresh (the run directory moved away, the cache kept): the second
        # server is asked every call, none is served from the first server's answers.
        shutil.rmtree(base / "test-model")
        assert run_module.main(cli(two, data, base, "--task", "both")) == 0
        assert len(two.requests) == 12
        second_url = two.openai_base_url
    assert results_of(base)["generation"]["average_score"] == 1.0 != first
    manifest = json.loads((base / "test-model" / "run.json").read_text())
    assert manifest["invocations"][-1]["endpoints"]["model"] == {
        "model": "test-model", "provider": "vllm", "endpoint": second_url}
    assert manifest["invocations"][-1]["endpoints"]["evaluator"]["endpoint"] == second_url


def test_a_line_with_a_key_but_no_answer_is_asked_again(tmp_path, capsys):
    directory = tmp_path / ".llm_cache"
    directory.mkdir()
    broken = '{"key": "abc123", "text": 5}\n{"key": "def456", "txt": "x"}\n'
    (directory / "other-1-x.jsonl").write_text(broken)
    cache = ResponseCache(directory)
    assert cache.get("abc123") is None and cache.get("def456") is None
    assert capsys.readouterr().err.count("warning:") == 1
    cache.close()
