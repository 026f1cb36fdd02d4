"""Tokenizers (round trips, BPE merges against a hand-worked example and a naive
recount, JSON files) and token augmentation (rates, determinism)."""
import collections
import json
import random

import numpy as np
import pytest

import ember
from ember.data import DataError
from ember.data.text import (BPETokenizer, ByteTokenizer, CharTokenizer, RandomTokenDeletion,
                             RandomTokenMasking, RandomTokenSwap, SynonymReplacement)
from ember.data.text import _PIECES


def gen(seed):
    return ember.Generator().manual_seed(seed)


def random_unicode(rng, n):
    """Text mixing ASCII, accents, CJK, emoji, combining marks, controls and spaces."""
    ranges = [(0x20, 0x7E), (0x00, 0x1F), (0xA0, 0x17F), (0x300, 0x36F), (0x4E00, 0x4FFF),
              (0x1F600, 0x1F64F), (0x10000, 0x10FFFF), (0xE000, 0xF8FF)]
    chars = []
    for _ in range(n):
        lo, hi = ranges[rng.randrange(len(ranges))]
        c = rng.randint(lo, hi)
        chars.append(chr(c) if not 0xD800 <= c <= 0xDFFF else "x")
        if rng.random() < 0.2:
            chars.append(" " * rng.randint(1, 3))
    return "".join(chars)


CORPUS = ("the quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs!\n"
          "Numbers like 1234 and 56 appear, as do émigrés, naïve cafés and 東京.\n") * 20


def naive_bpe(text, n_merges, min_frequency=1):
    """BPE the slow way: recount every pair after every merge (the oracle)."""
    words = collections.Counter(_PIECES.findall(text))
    seqs = {w: list(w.encode()) for w in words}
    merges, next_id = [], 256
    for _ in range(n_merges):
        counts = collections.Counter()
        for w, seq in seqs.items():
            for pair in zip(seq, seq[1:]):
                counts[pair] += words[w]
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        if counts[best] < min_frequency:
            break
        merges.append(best)
        for w, seq in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    out.append(next_id)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seqs[w] = out
        next_id += 1
    return merges


# Byte and char tokenizers ---------------------------------------------------------------
def test_byte_tokenizer_round_trips_any_text():
    rng = random.Random(0)
    tok = ByteTokenizer(special_tokens=["<eos>", "<pad>"])
    assert tok.vocab_size == 258 and len(tok) == 258
    for _ in range(50):
        text = random_unicode(rng, 40)
        ids = tok.encode(text)
        assert ids == list(text.encode("utf-8")) or "<eos>" in text or "<pad>" in text
        assert tok.decode(ids) == text
    assert tok.encode("a<eos>é") == [97, 256, 195, 169]
    assert tok.decode([97, 257]) == "a<pad>"
    assert tok.decode(tok.encode("\ud800 lone surrogate")) == "\ud800 lone surrogate"
    assert tok.decode([0xC3]) == "\ufffd"
    assert tok.token_to_id(" ") is None and tok.token_to_id("Ġ") == 32
    assert tok.id_to_token(104) == "h" and tok.id_to_token(257) == "<pad>"
    with pytest.raises(DataError, match=r"ByteTokenizer.decode: id 258 .* size 258"):
        tok.decode([258])
    with pytest.raises(ember.EmberTypeError, match="expected str"):
        tok.encode(b"bytes")


def test_char_tokenizer():
    tok = CharTokenizer(special_tokens=["<eos>"]).train(iter(["hello world", "hi"]))
    # <unk>, <eos>, then ' ', d, e, h, i, l, o, r, w
    assert tok.vocab_size == 11
    assert tok.encode("hold<eos>") == [5, 8, 7, 3, 1]
    assert tok.encode("hz") == [5, 0]
    assert tok.decode(tok.encode("hello hi<eos>")) == "hello hi<eos>"
    assert tok.decode(tok.encode("zoo")) == "<unk>oo"
    assert tok.token_to_id("w") == 10 and tok.id_to_token(2) == " "
    rare = CharTokenizer().train(iter(["aaab"]), min_frequency=2)
    assert rare.get_vocab() == {"<unk>": 0, "a": 1}
    strict = CharTokenizer("ab", unk_token=None)
    with pytest.raises(DataError, match="'c' is not in the vocabulary"):
        strict.encode("abc")


# BPE ------------------------------------------------------------------------------------
def test_bpe_hand_worked_merges():
    # aaabdaaabac: aa (4) -> Z; then Za and ab tie at 2, ab has the smaller ids;
    # then Z ab (2): the textbook example.
    tok = BPETokenizer().train(iter(["aaabdaaabac"]), vocab_size=259, min_frequency=1)
    assert tok.merges == [(b"a", b"a"), (b"a", b"b"), (b"aa", b"ab")]
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.id_to_token(258) == "aaab"
    # words keep a leading space; merges never cross pieces
    tok = BPETokenizer().train(iter(["low lower lowest"] * 10), vocab_size=260)
    assert tok.merges[:4] == [(b"l", b"o"), (b"lo", b"w"), (b" ", b"low"), (b" low", b"e")]
    assert tok.encode("lowest low") == [257, 101, 115, 116, 258]
    assert tok.token_to_id("Ġlow") == 258 and tok.id_to_token(258) == "Ġlow"


def test_bpe_incremental_counts_match_a_naive_recount():
    rng = random.Random(1)
    words = ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 7))) for _ in range(60)]
    text = " ".join(rng.choice(words) for _ in range(3000)) + " " + CORPUS
    tok = BPETokenizer().train(iter([text]), vocab_size=256 + 150, min_frequency=1)
    ids = {i: tok.merges[i] for i in range(len(tok.merges))}
    assert len(ids) == 150
    expected = naive_bpe(text, 150)
    as_bytes = []
    table = {i: bytes([i]) for i in range(256)}
    for k, (a, b) in enumerate(expected):
        as_bytes.append((table[a], table[b]))
        table[256 + k] = table[a] + table[b]
    assert tok.merges == as_bytes


def test_bpe_stops_at_vocab_size_and_min_frequency():
    tok = BPETokenizer().train(iter([CORPUS]), vocab_size=270)
    assert tok.vocab_size == 270 and len(tok.merges) == 14
    once = BPETokenizer().train(iter(["abcdef"]), vocab_size=1000, min_frequency=2)
    assert once.merges == [] and once.vocab_size == 256
    with pytest.raises(DataError, match="vocab_size must be at least 256"):
        BPETokenizer().train(iter(["x"]), vocab_size=100)


def test_bpe_round_trips_random_unicode_and_specials():
    tok = BPETokenizer().train(iter([CORPUS]), vocab_size=400,
                               special_tokens=["<pad>", "<eos>"])
    rng = random.Random(2)
    for _ in range(40):
        text = random_unicode(rng, 60)
        assert "".join(_PIECES.findall(text)) == text
        assert tok.decode(tok.encode(text)) == text
    text = "the fox<eos><pad> runs 東京<eos>"
    ids = tok.encode(text)
    assert ids.count(256) == 1 and ids.count(257) == 2 and ids[-1] == 257
    assert tok.decode(ids) == text
    assert len(tok.encode(" the quick brown fox")) < len(" the quick brown fox") / 2
    assert tok.encode_batch(["the", "fox"]) == [tok.encode("the"), tok.encode("fox")]
    assert tok.decode_batch(tok.encode_batch(["a b", "c"])) == ["a b", "c"]
    for a, b in tok.merges:
        assert b"<pad>" not in a + b


def test_bpe_trains_from_files_like_from_lines(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(CORPUS, encoding="utf-8")
    from_file = BPETokenizer().train(str(path), vocab_size=320)
    from_paths = BPETokenizer().train([path], vocab_size=320)
    from_lines = BPETokenizer().train(iter(CORPUS.splitlines(keepends=True)), vocab_size=320)
    assert from_file.merges == from_lines.merges == from_paths.merges
    with pytest.raises(DataError, match="no such file"):
        BPETokenizer().train(str(tmp_path / "missing.txt"), vocab_size=300)
    with pytest.raises(ember.EmberTypeError, match="iterable of strings"):
        BPETokenizer().train(3, vocab_size=300)


def test_tokenizer_save_load_round_trip(tmp_path):
    tok = BPETokenizer().train(iter([CORPUS]), vocab_size=330, special_tokens=["<eos>"])
    tok.save(tmp_path / "bpe.json")
    back = BPETokenizer.load(tmp_path / "bpe.json")
    assert back.merges == tok.merges and back.special_tokens == ["<eos>"]
    assert back.get_vocab() == tok.get_vocab()
    text = CORPUS[:200] + "<eos>"
    assert back.encode(text) == tok.encode(text)
    state = json.loads((tmp_path / "bpe.json").read_text())
    assert state["type"] == "BPETokenizer" and len(state["merges"]) == 330 - 257
    char = CharTokenizer(special_tokens=["<eos>"]).train(iter(["abc"]))
    char.save(tmp_path / "char.json")
    assert CharTokenizer.load(tmp_path / "char.json").get_vocab() == char.get_vocab()
    ByteTokenizer(["<s>"]).save(tmp_path / "byte.json")
    assert ByteTokenizer.load(tmp_path / "byte.json").encode("<s>") == [256]


@pytest.mark.parametrize("content, message", [
    (b"\x80\x03pickle", "not a JSON tokenizer file"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "BPETokenizer", "merg',
     "not a JSON tokenizer file"),
    (b"[1, 2, 3]", "not an ember tokenizer file"),
    (b'{"format": "ember.tokenizer", "version": 9, "type": "BPETokenizer"}', "version 9"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "CharTokenizer"}',
     "holds a 'CharTokenizer'"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "BPETokenizer", '
     b'"pre_tokenizer": "ember-words-v1", "special_tokens": [], "merges": [[97, 300]]}',
     "merge 0 joins 300"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "BPETokenizer", '
     b'"pre_tokenizer": "ember-words-v1", "special_tokens": [], "merges": [[97, "b"]]}',
     "merge 0 joins 'b'"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "BPETokenizer", '
     b'"pre_tokenizer": "ember-words-v1", "special_tokens": [1], "merges": []}',
     "special tokens must be non-empty strings"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "BPETokenizer", '
     b'"pre_tokenizer": "(a+)+$", "special_tokens": [], "merges": []}', "pre_tokenizer"),
    (b'{"format": "ember.tokenizer", "version": 1, "type": "BPETokenizer", '
     b'"pre_tokenizer": "ember-words-v1", "special_tokens": [], "merges": 5}',
     "'merges' must be a list"),
    (b"[" * 100000, "not a JSON tokenizer file"),
])
def test_load_rejects_corrupt_and_hostile_files(tmp_path, content, message):
    path = tmp_path / "tok.json"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as info:
        BPETokenizer.load(path)
    assert "tok.json" in str(info.value)


# Augmentation ---------------------------------------------------------------------------
def test_random_token_deletion_rate_order_and_determinism():
    tokens = list(range(10000))
    out = RandomTokenDeletion(p=0.3, generator=gen(0))(tokens)
    assert abs(len(out) / 10000 - 0.7) < 0.02
    assert out == sorted(out) and set(out) <= set(tokens)
    assert RandomTokenDeletion(p=0.3, generator=gen(0))(tokens) == out
    assert RandomTokenDeletion(p=0.3, generator=gen(1))(tokens) != out
    assert len(RandomTokenDeletion(p=1.0)(["a", "b", "c"])) == 1
    assert RandomTokenDeletion(p=0.5)([]) == []
    tensor = ember.arange(100)
    kept = RandomTokenDeletion(p=0.5, generator=gen(2))(tensor)
    assert isinstance(kept, ember.Tensor) and kept.tolist() == RandomTokenDeletion(
        p=0.5, generator=gen(2))(list(range(100)))
    with pytest.raises(DataError, match="probability"):
        RandomTokenDeletion(p=-0.1)


def test_random_token_swap():
    tokens = list(range(50))
    out = RandomTokenSwap(n=3, generator=gen(0))(tokens)
    assert sorted(out) == tokens and out != tokens
    assert 2 <= sum(a != b for a, b in zip(out, tokens)) <= 6
    assert tokens == list(range(50))  # the input is not changed
    assert RandomTokenSwap(n=3, generator=gen(0))(tokens) == out
    many = RandomTokenSwap(p=0.5, generator=gen(1))(list(range(1000)))
    moved = sum(a != b for a, b in zip(many, range(1000)))
    assert 400 <= moved <= 1000 and sorted(many) == list(range(1000))
    assert RandomTokenSwap(n=0)(tokens) == tokens and RandomTokenSwap()(["x"]) == ["x"]
    arr = RandomTokenSwap(n=1, generator=gen(3))(np.arange(2))
    assert arr.tolist() == [1, 0]
    with pytest.raises(DataError, match="not both"):
        RandomTokenSwap(n=1, p=0.1)


def test_random_token_masking():
    out = RandomTokenMasking(p=0.15, mask_token=-1, generator=gen(0))(list(range(10000)))
    masked = [i for i, t in enumerate(out) if t == -1]
    assert abs(len(masked) / 10000 - 0.15) < 0.02
    assert all(t == i for i, t in enumerate(out) if t != -1)
    ember.manual_seed(4)
    a = RandomTokenMasking(p=0.5, mask_token="[MASK]")(["a"] * 40)
    ember.manual_seed(4)
    assert RandomTokenMasking(p=0.5, mask_token="[MASK]")(["a"] * 40) == a
    assert "[MASK]" in a and "a" in a
    t = RandomTokenMasking(p=1.0, mask_token=0)(ember.tensor([5, 6, 7]))
    assert t.tolist() == [0, 0, 0]
    with pytest.raises(ember.EmberTypeError, match="list of tokens"):
        RandomTokenMasking()("a sentence")


def test_synonym_replacement():
    table = {"big": ["large", "huge"], "dog": ["hound"], "empty": []}
    words = ["the", "big", "dog", "empty"] * 2000
    out = SynonymReplacement(table, p=0.4, generator=gen(0))(words)
    bigs = [o for w, o in zip(words, out) if w == "big"]
    assert abs(sum(o != "big" for o in bigs) / len(bigs) - 0.4) < 0.04
    assert set(bigs) == {"big", "large", "huge"}
    assert abs(bigs.count("large") - bigs.count("huge")) < 0.15 * len(bigs)
    assert {o for w, o in zip(words, out) if w == "the"} == {"the"}
    assert {o for w, o in zip(words, out) if w == "empty"} == {"empty"}
    assert SynonymReplacement(table, p=0.4, generator=gen(0))(words) == out
    with pytest.raises(ember.EmberTypeError, match="dict of str"):
        SynonymReplacement({"a": "b"})
    with pytest.raises(ember.EmberTypeError, match="split a sentence"):
        SynonymReplacement(table)("big dog")
