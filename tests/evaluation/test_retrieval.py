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
