"""The word code of report.html's chunks (utils/word_codes.py): lossless on any JSON text,
every code of a full codebook distinct and decodable, and the page's decoder
(report.js unword) is tested against this one in tests/evaluation/report."""
import json
import random
import re

import pytest

from cupid.utils import word_codes
from cupid.utils.word_codes import CAPACITY, SINGLE, WordCodebook, code_of, index_of


def full_codebook() -> WordCodebook:
    return WordCodebook([f"w{k}" for k in range(CAPACITY)])


def test_every_code_of_a_full_codebook_is_distinct_and_maps_back():
    codes = [code_of(k) for k in range(CAPACITY)]
    assert len(set(codes)) == CAPACITY
    assert [index_of(c) for c in codes] == list(range(CAPACITY))
    assert all(len(c) == 1 for c in codes[:SINGLE]) and all(len(c) == 2 for c in codes[SINGLE:])
    # Codes use only what compact JSON never holds raw (U+0001-U+001F) and printable ASCII.
    assert all(0x01 <= ord(c[0]) <= 0x1F for c in codes)
    assert all(0x20 <= ord(c[1]) <= 0x7E for c in codes[SINGLE:])
    assert code_of(CAPACITY - 1) == "\x1f\x7e"


TEXTS = [
    "",
    "one",
    "w1",                               # a coded word as the first token stays as it is
    "w1 w1",
    " w1",                              # a leading space: the first token is empty
    "w1  w2   w3 ",                     # runs of spaces and a trailing one
    'x {"a":"w5 w6","b":["w7",  " w8 "]}',
    "Ünïcode w9 café w10 😀 w11",
    'escaped \\" w12 \\n w13\\u0001 w14',
    " ".join(f"w{k}" for k in range(CAPACITY)),
]


@pytest.mark.parametrize("text", TEXTS)
def test_decode_inverts_encode(text):
    codebook = full_codebook()
    encoded = codebook.encode(text)
    assert codebook.decode(encoded) == text


def test_coded_words_take_one_or_two_characters_and_their_space():
    codebook = WordCodebook(["alpha", "beta", "gamma", "delta", "epsilon"])
    # epsilon is the fifth word: the first two-character code, U+0005 then a space (U+0020).
    assert codebook.encode("x alpha epsilon y") == "x\x01\x05  y"
    assert codebook.decode("x\x01\x05  y") == "x alpha epsilon y"
    assert codebook.encode("alpha alpha") == "alpha\x01"  # the first token is never coded


def test_random_json_texts_round_trip():
    rng = random.Random(7)
    vocabulary = ["the", "a", "preference", "Prefers", "concise,", "answers.", "ü", "\"", "\\n", "{}", "  "]
    codebook = WordCodebook.from_texts([" ".join(rng.choices(vocabulary, k=400)) for _ in range(5)])
    for _ in range(50):
        value = {"t": " ".join(rng.choices(vocabulary, k=rng.randint(0, 60))),
                 "n": [rng.random(), None, " ".join(rng.choices(vocabulary, k=3))]}
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        encoded = codebook.encode(text)
        assert not re.search("[\x00-\x1f]", text)
        assert json.loads(codebook.decode(encoded)) == value


def test_the_codebook_favours_the_words_that_save_most():
    texts = ["x " + " ".join(["preference"] * 50 + ["a"] * 400 + ["rare"] * 1 + ["twice"] * 2)]
    codebook = WordCodebook.from_texts(texts)
    assert codebook.words[0] == "preference"   # 50 x 10 characters before 400 x 1
    assert "twice" in codebook.words and "rare" not in codebook.words  # used once: not worth a code
    assert len(codebook.encode(texts[0])) == len("x") + 50 + 400 + len(" rare") + 2


def test_the_codebook_is_reproducible_and_bounded():
    rng = random.Random(1)
    texts = [" ".join(f"word{rng.randint(0, 5000)}" for _ in range(20000)) for _ in range(3)]
    first, second = WordCodebook.from_texts(texts), WordCodebook.from_texts(list(reversed(texts)))
    assert first.words == second.words
    assert len(first.words) == CAPACITY


@pytest.mark.parametrize("words, message", [
    (["a", "a"], "each word once"),
    (["has space"], "not a codable token"),
    ([""], "not a codable token"),
    (["tab\there"], "not a codable token"),
    ([f"w{k}" for k in range(CAPACITY + 1)], "at most"),
])
def test_a_bad_codebook_is_refused(words, message):
    with pytest.raises(ValueError, match=message):
        WordCodebook(words)


def test_the_decoder_pattern_matches_exactly_the_codes():
    # A two-character code's second character is printable: only a lead makes it a code.
    codebook = full_codebook()
    text = "x " + " ".join(["w3", "w4", "plain~", "w2568", "w2567"])
    encoded = codebook.encode(text)
    assert [m.group() for m in word_codes._CODE.finditer(encoded)] == [code_of(3), code_of(4), code_of(2568), code_of(2567)]
