"""The chunk packer (utils/chunk_packer.py): worker processes make the same chunks as
threads, a worker that dies costs a redo and never a chunk, the waiting texts stay within
the budget, and a user's own ``utils/`` in the working directory does not reach the worker."""
import json
import random
import signal
import subprocess
import sys
import textwrap


from repo_paths import ROOT as REPO_ROOT
from cupid.utils import chunk_packer
from cupid.utils.chunk_packer import ChunkPacker
from cupid.utils.html_page import compact_json, read_chunk
from cupid.utils.word_codes import WordCodebook

VOCABULARY = ["the", "user", "prefers", "concise", "answers", "with", "examples,", "ünïcode", "café", "\\n"]


def values(n: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    return [{"k": k, "text": " ".join(rng.choices(VOCABULARY, k=rng.randint(0, 3000)))} for k in range(n)]


def codebook_for(texts: list[str]) -> WordCodebook:
    return WordCodebook.from_texts(texts)


def test_worker_processes_make_the_chunks_threads_make():
    texts = [compact_json(v) for v in values(12)]
    codebook = codebook_for(texts)
    with ChunkPacker(in_process=True) as packer:
        assert packer.in_process
        by_process = [packer.submit(t, codebook) for t in texts]
        results = [chunk.result() for chunk in by_process]
    with ChunkPacker(in_process=False) as packer:
        assert not packer.in_process
        by_thread = [packer.submit(t, codebook).result() for t in texts]
    assert results == by_thread
    assert [read_chunk(r, codebook) for r in results] == [json.loads(t) for t in texts]


def test_a_worker_that_dies_costs_a_redo_not_a_chunk():
    texts = [compact_json(v) for v in values(20, seed=1)]
    codebook = codebook_for(texts)
    with ChunkPacker(in_process=True) as packer:
        first = [packer.submit(t, codebook) for t in texts[:10]]
        for worker in packer._workers:  # the OOM killer, mid-run
            worker._process.send_signal(signal.SIGKILL)
        rest = [packer.submit(t, codebook) for t in texts[10:]]
        results = [chunk.result() for chunk in first + rest]
    assert [read_chunk(r, codebook) for r in results] == [json.loads(t) for t in texts]
    assert not packer.in_process


def test_waiting_texts_stay_within_the_budget(monkeypatch):
    texts = [compact_json(v) for v in values(16, seed=2)]
    codebook = codebook_for(texts)
    largest = max(len(t.encode()) for t in texts)
    peak = []
    original = ChunkPacker._release

    with ChunkPacker(in_process=True, budget=2 * largest) as packer:
        def release(self, size):
            peak.append(self._waiting_bytes)
            original(self, size)
        monkeypatch.setattr(ChunkPacker, "_release", release)
        chunks = [packer.submit(t, codebook) for t in texts]
        results = [c.result() for c in chunks]
    assert [read_chunk(r, codebook) for r in results] == [json.loads(t) for t in texts]
    assert peak and max(peak) <= 2 * largest


def test_the_worker_ignores_a_users_own_utils_package(tmp_path):
    # A researcher's directory with a utils/ of their own: the worker must import ours.
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("raise ImportError('the user utils package')\n")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from cupid.utils.chunk_packer import ChunkPacker
        from cupid.utils.html_page import read_chunk
        with ChunkPacker(in_process=True) as packer:
            chunk = packer.submit('{{"a": "b c d"}}', None)
            print(read_chunk(chunk.result()), packer.in_process)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'a': 'b c d'} True"


def test_no_worker_when_none_can_start(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no processes here")
    monkeypatch.setattr(chunk_packer.subprocess, "Popen", refuse)
    with ChunkPacker(in_process=True) as packer:
        assert not packer.in_process
        assert read_chunk(packer.submit('{"x": 1}', None).result()) == {"x": 1}


def test_the_worker_serves_the_documented_messages():
    codebook = WordCodebook(["hello", "world"])
    words = json.dumps(codebook.words).encode()
    text = '{"t": "hello world hello"}'.encode()
    message = (chunk_packer._HEADER.pack(b"W", len(words)) + words
               + chunk_packer._HEADER.pack(b"T", len(text)) + text)
    out = subprocess.run([sys.executable, "-I", "-c",
                          f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
                          "from cupid.utils.chunk_packer import serve; serve()"],
                         input=message, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    kind, length = chunk_packer._HEADER.unpack(out.stdout[:chunk_packer._HEADER.size])
    assert kind == b"C" and len(out.stdout) == chunk_packer._HEADER.size + length
    assert read_chunk(out.stdout[chunk_packer._HEADER.size:].decode("latin-1"), codebook) == {"t": "hello world hello"}
