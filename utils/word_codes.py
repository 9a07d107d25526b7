"""A word code for report.html's data chunks: the frequent words of the chunks' JSON text
become one or two control characters before gzip, and the page turns them back.

Why: gzip is the only codec a browser inflates without a decoder shipped in the page, and
it spends ~15-20 bits on each repeated word (an LZ77 match) where a word's share of the
text calls for fewer. Replacing the ~2,500 most useful words by short codes first leaves
gzip's Huffman stage to code them by frequency. On the synthetic paper-scale tree of
``benchmarks/report_html_scale.py`` the chunks shrink by about a quarter; on English prose
(the paper's text) by about 8% (a made-up vocabulary drawn word by word favours a word
code more than prose does).

The code. Compact JSON never holds a raw control character (``json.dumps`` writes
U+0000-U+001F as escapes), so U+0001-U+001F are free:

- a *token* is a run of characters between two spaces (U+0020) of the text;
- the first ``SINGLE`` codes are one character, U+0001 ...;
- the rest are a lead character (the remaining control characters up to U+001F) followed
  by one printable ASCII character (U+0020-U+007E);
- a code stands for a space and its token: the space before a coded token is left out.
  The text's first token has no space before it and is never coded.

``templates/report.js`` (``unword``) is the decoder the page runs; ``decode`` here is the
same in Python, for tests and tools.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

SINGLE = 4
FIRST_LEAD = 1 + SINGLE
LAST_LEAD = 0x1F
TRAIL = range(0x20, 0x7F)
CAPACITY = SINGLE + (LAST_LEAD - FIRST_LEAD + 1) * len(TRAIL)
_CODE = re.compile("[\x01-%s]|[%s-\x1f][\x20-\x7e]" % (chr(SINGLE), chr(FIRST_LEAD)))


def code_of(index: int) -> str:
    """The code of the ``index``-th word of a codebook."""
    if index < SINGLE:
        return chr(1 + index)
    lead, trail = divmod(index - SINGLE, len(TRAIL))
    return chr(FIRST_LEAD + lead) + chr(TRAIL.start + trail)


def index_of(code: str) -> int:
    if len(code) == 1:
        return ord(code) - 1
    return SINGLE + (ord(code[0]) - FIRST_LEAD) * len(TRAIL) + ord(code[1]) - TRAIL.start


class WordCodebook:
    """Up to ``CAPACITY`` tokens, each with its code (``words[k]`` has ``code_of(k)``)."""

    def __init__(self, words: Sequence[str]):
        if len(words) > CAPACITY:
            raise ValueError(f"a codebook holds at most {CAPACITY} words, not {len(words)}")
        for word in words:
            if not word or " " in word or any(ord(c) < 0x20 for c in word):
                raise ValueError(f"not a codable token: {word!r}")
        if len(set(words)) != len(words):
            raise ValueError("a codebook lists each word once")
        self.words = list(words)
        self._codes = {word: code_of(k) for k, word in enumerate(self.words)}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "WordCodebook":
        """The codebook that saves the most characters on ``texts`` (a sample of what will
        be encoded): one-character codes for the tokens whose uses add up to the most
        characters, two-character codes for the next, among tokens used at least twice."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(text.split(" ")[1:])
        counts.pop("", None)
        usable = [t for t, n in counts.items() if n >= 2 and not any(ord(c) < 0x20 for c in t)]
        # Sorting by (saving, token) makes the codebook, and so the page, reproducible.
        single = sorted(usable, key=lambda t: (-counts[t] * len(t), t))[:SINGLE]
        chosen = set(single)
        double = sorted((t for t in usable if t not in chosen and len(t) >= 2),
                        key=lambda t: (-counts[t] * (len(t) - 1), t))[:CAPACITY - len(single)]
        return cls(single + double)

    def encode(self, text: str) -> str:
        tokens = text.split(" ")
        code = self._codes.get
        return tokens[0] + "".join([code(t) or " " + t for t in tokens[1:]])

    def decode(self, text: str) -> str:
        return _CODE.sub(lambda m: " " + self.words[index_of(m.group())], text)
