"""Text: tokenizers (bytes, characters, byte-level BPE) and token-list augmentation.

Every tokenizer maps ``str -> list[int]`` and back, round-tripping any text exactly
(ByteTokenizer and BPETokenizer: any Unicode text; CharTokenizer: text in its
vocabulary). Special tokens (``"<pad>"``, ``"<eos>"`` ...) written in the text encode to
their own ids. Tokenizers save to and load from JSON, never pickle.

>>> from ember.data.text import BPETokenizer
>>> tok = BPETokenizer().train(iter(["low lower lowest"] * 10), vocab_size=260)
>>> tok.decode(tok.encode("lowest low"))
'lowest low'

Augmentations take a list of tokens (ids or strings), a 1-D NumPy array or an ember
tensor, and return the same kind; random draws come from ``generator`` (an
:class:`ember.Generator`) or from ember's default generator, so ``ember.manual_seed``
makes them repeat.
"""
from __future__ import annotations

import heapq
import json
import numbers
import os
import re
from collections import Counter, defaultdict
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..errors import EmberTypeError
from ..ops.creation import from_numpy
from ..ops.random import Generator, default_generator
from ..serialization import atomic_write
from ..tensor import Tensor
from .errors import DataError

__all__ = ["ByteTokenizer", "CharTokenizer", "BPETokenizer", "RandomTokenDeletion",
           "RandomTokenSwap", "RandomTokenMasking", "SynonymReplacement"]

_FORMAT = "ember.tokenizer"
_VERSION = 1

# Words (with one leading space), numbers, runs of other symbols, whitespace. Every
# character falls in one class, so the pieces always join back into the text.
_PRE_TOKENIZER = "ember-words-v1"
_PIECES = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")


def _byte_symbols() -> list[str]:
    """A printable character for each byte (GPT-2's table): bytes that print stand for
    themselves, the rest take characters from 256 upwards, so ' ' shows as 'Ġ'."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    symbols, extra = {}, 0
    for b in range(256):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


_BYTE_SYMBOLS = _byte_symbols()


def _to_bytes(text: str) -> bytes:
    # surrogatepass: even a lone surrogate (from a bad decode upstream) round-trips.
    return text.encode("utf-8", "surrogatepass")


def _from_bytes(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # ids that cut a character in half
        return data.decode("utf-8", "replace")


def _texts(owner: str, files_or_iterator) -> Iterator[str]:
    """The texts to train on: a path or a list of paths (read line by line as UTF-8), or
    any other iterable of strings."""
    if isinstance(files_or_iterator, (str, os.PathLike)):
        files_or_iterator = [files_or_iterator]
    if isinstance(files_or_iterator, (list, tuple)) and all(
            isinstance(f, (str, os.PathLike)) for f in files_or_iterator):
        for path in files_or_iterator:
            if not os.path.isfile(path):
                raise DataError(f"{owner}.train: no such file: {os.fspath(path)!r} (to train "
                                f"on strings, pass an iterator: iter(texts))")
            with open(path, encoding="utf-8", errors="replace") as f:
                yield from f
        return
    try:
        iterator = iter(files_or_iterator)
    except TypeError:
        raise EmberTypeError(f"{owner}.train: expected a file path, a list of paths or an "
                             f"iterable of strings, got {type(files_or_iterator).__name__}"
                             ) from None
    for text in iterator:
        if not isinstance(text, str):
            raise EmberTypeError(f"{owner}.train: the iterator must yield str, got "
                                 f"{type(text).__name__}")
        yield text


def _check_special_tokens(owner: str, tokens) -> list[str]:
    tokens = list(tokens or ())
    if any(not isinstance(t, str) or not t for t in tokens):
        raise DataError(f"{owner}: special tokens must be non-empty strings, got {tokens!r}")
    if len(set(tokens)) != len(tokens):
        raise DataError(f"{owner}: special tokens must be distinct, got {tokens!r}")
    return tokens


class _Tokenizer:
    """What every tokenizer shares: special-token splitting, batches, JSON files."""

    _special: list[str]
    _special_ids: dict[str, int]

    def _set_special(self, tokens: list[str], first_id: int) -> None:
        self._special = tokens
        self._special_ids = {t: first_id + i for i, t in enumerate(tokens)}
        longest_first = sorted(tokens, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, longest_first))) if tokens \
            else None

    @property
    def special_tokens(self) -> list[str]:
        return list(self._special)

    def _split_special(self, text: str) -> Iterator[tuple[str, bool]]:
        """``(piece, is_special)`` in order."""
        if self._special_re is None:
            if text:
                yield text, False
            return
        start = 0
        for m in self._special_re.finditer(text):
            if m.start() > start:
                yield text[start:m.start()], False
            yield m.group(), True
            start = m.end()
        if start < len(text):
            yield text[start:], False

    def _check_text(self, text) -> None:
        if not isinstance(text, str):
            raise EmberTypeError(f"{type(self).__name__}.encode: expected str, got "
                                 f"{type(text).__name__}")

    def _check_id(self, i) -> int:
        if isinstance(i, bool) or not isinstance(i, (numbers.Integral, np.integer)) or \
                not 0 <= i < self.vocab_size:
            raise DataError(f"{type(self).__name__}.decode: id {i!r} is not in the "
                            f"vocabulary of size {self.vocab_size}")
        return int(i)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` of each text."""
        return [self.encode(t) for t in texts]

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        """:meth:`decode` of each id list."""
        return [self.decode(ids) for ids in batch]

    def __len__(self) -> int:
        return self.vocab_size

    def get_vocab(self) -> dict[str, int]:
        """Every token string and its id."""
        return {self.id_to_token(i): i for i in range(self.vocab_size)}

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer to ``path`` as JSON (atomically: a crash leaves the old
        file)."""
        state = {"format": _FORMAT, "version": _VERSION, "type": type(self).__name__}
        state.update(self._state())
        atomic_write(os.fspath(path), json.dumps(state, ensure_ascii=False).encode())

    @classmethod
    def load(cls, path: str | os.PathLike):
        """A tokenizer read from a file :meth:`save` wrote. The file is checked: a corrupt
        or hand-edited one raises :class:`~ember.data.DataError` saying what is wrong."""
        where = f"{cls.__name__}.load: {os.fspath(path)!r}"
        try:
            with open(path, "rb") as f:
                state = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise DataError(f"{where} is not a JSON tokenizer file ({e})") from None
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise DataError(f"{where} is not an ember tokenizer file")
        if state.get("version") != _VERSION:
            raise DataError(f"{where} has version {state.get('version')!r}; this ember reads "
                            f"version {_VERSION}")
        if state.get("type") != cls.__name__:
            raise DataError(f"{where} holds a {state.get('type')!r}, not a {cls.__name__}")
        try:
            return cls._from_state(state)
        except (DataError, EmberTypeError) as e:
            raise DataError(f"{where} is invalid: {e}") from None

    @staticmethod
    def _field(state: dict, key: str, kind: type):
        if not isinstance(state.get(key), kind):
            raise DataError(f"field {key!r} must be a {kind.__name__}, got "
                            f"{type(state.get(key)).__name__}")
        return state[key]


class ByteTokenizer(_Tokenizer):
    """Ids 0–255 are the UTF-8 bytes of the text; special tokens follow from 256.

    >>> tok = ByteTokenizer(special_tokens=["<eos>"])
    >>> tok.encode("hé<eos>")
    [104, 195, 169, 256]
    >>> tok.decode([104, 195, 169, 256])
    'hé<eos>'
    """

    def __init__(self, special_tokens: Sequence[str] = ()):
        self._set_special(_check_special_tokens("ByteTokenizer", special_tokens), 256)

    @property
    def vocab_size(self) -> int:
        return 256 + len(self._special)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``."""
        self._check_text(text)
        ids: list[int] = []
        for piece, special in self._split_special(text):
            if special:
                ids.append(self._special_ids[piece])
            else:
                ids.extend(_to_bytes(piece))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (bytes that are not valid UTF-8 become U+FFFD)."""
        data = bytearray()
        for i in ids:
            i = self._check_id(i)
            data += bytes([i]) if i < 256 else _to_bytes(self._special[i - 256])
        return _from_bytes(bytes(data))

    def token_to_id(self, token: str) -> int | None:
        if token in self._special_ids:
            return self._special_ids[token]
        return _BYTE_SYMBOLS.index(token) if token in _BYTE_SYMBOLS else None

    def id_to_token(self, id: int) -> str | None:
        if not 0 <= id < self.vocab_size:
            return None
        return _BYTE_SYMBOLS[id] if id < 256 else self._special[id - 256]

    def _state(self) -> dict:
        return {"special_tokens": self._special}

    @classmethod
    def _from_state(cls, state: dict) -> "ByteTokenizer":
        return cls(cls._field(state, "special_tokens", list))

    def __repr__(self) -> str:
        return f"ByteTokenizer(vocab_size={self.vocab_size}, special_tokens={self._special})"


class CharTokenizer(_Tokenizer):
    """One id per character: ``unk_token`` (if any) is id 0, the special tokens follow,
    then the characters in code-point order.

    Args:
        chars: the characters of the vocabulary (a string or an iterable); or build it
            from text with :meth:`train`.
        unk_token: the token unknown characters encode to; ``None`` makes them an error.
        special_tokens: extra tokens that encode to one id each.

    >>> tok = CharTokenizer().train(iter(["hello"]))
    >>> tok.encode("hex")
    [2, 1, 0]
    >>> tok.decode(tok.encode("hole"))
    'hole'
    """

    def __init__(self, chars: Iterable[str] = (), unk_token: str | None = "<unk>",
                 special_tokens: Sequence[str] = ()):
        if unk_token is not None and (not isinstance(unk_token, str) or not unk_token):
            raise DataError(f"CharTokenizer: unk_token must be a non-empty string or None, "
                            f"got {unk_token!r}")
        special = _check_special_tokens("CharTokenizer", special_tokens)
        if unk_token is not None and unk_token not in special:
            special = [unk_token] + special
        self.unk_token = unk_token
        self._set_chars(special, chars)

    def _set_chars(self, special: list[str], chars: Iterable[str]) -> None:
        chars = sorted(set(chars))
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise DataError("CharTokenizer: chars must be single characters")
        self._set_special(special, 0)
        self._chars = chars
        self._char_ids = {c: len(special) + i for i, c in enumerate(chars)}

    def train(self, files_or_iterator, min_frequency: int = 1) -> "CharTokenizer":
        """Set the vocabulary to the characters seen ``min_frequency`` times or more in a
        file (a path or a list of paths) or an iterable of strings; returns self."""
        counts: Counter = Counter()
        for text in _texts("CharTokenizer", files_or_iterator):
            counts.update(text)
        self._set_chars(self._special, (c for c, n in counts.items() if n >= min_frequency))
        return self

    @property
    def vocab_size(self) -> int:
        return len(self._special) + len(self._chars)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``; characters not in the vocabulary become ``unk_token``."""
        self._check_text(text)
        unk = self._special_ids.get(self.unk_token)
        ids: list[int] = []
        for piece, special in self._split_special(text):
            if special:
                ids.append(self._special_ids[piece])
                continue
            for c in piece:
                i = self._char_ids.get(c, unk)
                if i is None:
                    raise DataError(f"CharTokenizer.encode: character {c!r} is not in the "
                                    f"vocabulary and there is no unk_token")
                ids.append(i)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens, ``unk_token`` included, as written)."""
        n = len(self._special)
        return "".join(self._special[i] if i < n else self._chars[i - n]
                       for i in map(self._check_id, ids))

    def token_to_id(self, token: str) -> int | None:
        return self._special_ids.get(token, self._char_ids.get(token))

    def id_to_token(self, id: int) -> str | None:
        if not 0 <= id < self.vocab_size:
            return None
        n = len(self._special)
        return self._special[id] if id < n else self._chars[id - n]

    def _state(self) -> dict:
        return {"unk_token": self.unk_token, "special_tokens": self._special,
                "chars": "".join(self._chars)}

    @classmethod
    def _from_state(cls, state: dict) -> "CharTokenizer":
        unk = state.get("unk_token")
        if unk is not None and not isinstance(unk, str):
            raise DataError(f"field 'unk_token' must be a string or null, got {unk!r}")
        special = cls._field(state, "special_tokens", list)
        chars = cls._field(state, "chars", str)
        if len(set(chars)) != len(chars):
            raise DataError("field 'chars' repeats a character")
        return cls(chars, unk, special)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, unk_token={self.unk_token!r})"


class BPETokenizer(_Tokenizer):
    """Byte-level byte-pair encoding: text is split into words, numbers, symbols and
    spaces (a space sticks to the word after it), each piece becomes its UTF-8 bytes, and
    learned merges join adjacent tokens, lowest rank first. Any text encodes, and
    ``decode(encode(text)) == text``.

    Ids 0–255 are the bytes, then the special tokens, then one id per merge in the order
    learned. Token strings show bytes as GPT-2 does (``'Ġthe'`` is ``' the'``).

    >>> tok = BPETokenizer().train("corpus.txt", vocab_size=1000,  # doctest: +SKIP
    ...                            special_tokens=["<pad>", "<eos>"])
    >>> tok.save("tokenizer.json")  # doctest: +SKIP
    """

    def __init__(self, merges: Sequence[tuple[int, int]] = (),
                 special_tokens: Sequence[str] = ()):
        self._build(_check_special_tokens("BPETokenizer", special_tokens),
                    [tuple(m) for m in merges])

    def _build(self, special: list[str], merges: list[tuple[int, int]]) -> None:
        self._set_special(special, 256)
        first = 256 + len(special)
        token_bytes: list[bytes | None] = [bytes([b]) for b in range(256)] + [None] * len(special)
        ranks = {}
        for rank, (a, b) in enumerate(merges):
            new = first + rank
            for part in (a, b):
                if not isinstance(part, int) or isinstance(part, bool) or not 0 <= part < new \
                        or 256 <= part < first:
                    raise DataError(f"BPETokenizer: merge {rank} joins {part!r}, which is not "
                                    f"a byte or an earlier merge's id")
            if (a, b) in ranks:
                raise DataError(f"BPETokenizer: merge {rank} repeats the pair {(a, b)}")
            ranks[(a, b)] = rank
            token_bytes.append(token_bytes[a] + token_bytes[b])
        self._merges = merges
        self._ranks = ranks
        self._first_merge = first
        self._token_bytes = token_bytes
        self._token_ids = {"".join(_BYTE_SYMBOLS[x] for x in t): i
                           for i, t in enumerate(token_bytes) if t is not None}
        self._token_ids.update(self._special_ids)
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self._token_bytes)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The learned merges in order, as pairs of byte strings."""
        return [(self._token_bytes[a], self._token_bytes[b]) for a, b in self._merges]

    # Training ---------------------------------------------------------------------------
    def train(self, files_or_iterator, vocab_size: int, min_frequency: int = 2,
              special_tokens: Sequence[str] = ()) -> "BPETokenizer":
        """Learn merges until the vocabulary holds ``vocab_size`` tokens (256 bytes,
        the special tokens, the merges) or no pair occurs ``min_frequency`` times.
        Replaces any earlier training; returns self.

        Args:
            files_or_iterator: a path or list of paths (UTF-8 text), or an iterable of
                strings (pass ``iter(list_of_texts)`` for strings in memory).
            vocab_size: the size to stop at.
            min_frequency: the fewest occurrences a pair needs to be merged.
            special_tokens: tokens kept whole (never split or merged).

        The most frequent pair is merged first; ties go to the pair of smaller ids. Pair
        counts are updated only in the words a merge touches.
        """
        special = _check_special_tokens("BPETokenizer.train", special_tokens)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral) or \
                vocab_size < 256 + len(special):
            raise DataError(f"BPETokenizer.train: vocab_size must be at least 256 + the "
                            f"{len(special)} special tokens, got {vocab_size!r}")
        self._build(special, [])
        counts: Counter = Counter()
        for text in _texts("BPETokenizer", files_or_iterator):
            for piece, is_special in self._split_special(text):
                if not is_special:
                    counts.update(_PIECES.findall(piece))
        words = [list(_to_bytes(w)) for w in counts]
        freqs = list(counts.values())
        merges = _learn_merges(words, freqs, vocab_size - 256 - len(special),
                               max(int(min_frequency), 1), 256 + len(special))
        self._build(special, merges)
        return self

    # Encoding ---------------------------------------------------------------------------
    def _encode_piece(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        word = list(_to_bytes(piece))
        ranks = self._ranks
        while len(word) > 1:
            best = min(zip(word, word[1:]), key=lambda p: ranks.get(p, len(ranks)))
            rank = ranks.get(best)
            if rank is None:
                break
            word = _merge_pair(word, best[0], best[1], self._first_merge + rank)
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[piece] = word
        return word

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``.

        >>> BPETokenizer().encode("hi")
        [104, 105]
        """
        self._check_text(text)
        ids: list[int] = []
        for part, special in self._split_special(text):
            if special:
                ids.append(self._special_ids[part])
                continue
            for piece in _PIECES.findall(part):
                ids.extend(self._encode_piece(piece))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; special tokens appear as written (bytes that are not
        valid UTF-8, from an id list cut mid-character, become U+FFFD)."""
        out = bytearray()
        for i in ids:
            i = self._check_id(i)
            data = self._token_bytes[i]
            out += data if data is not None else _to_bytes(self._special[i - 256])
        return _from_bytes(bytes(out))

    def token_to_id(self, token: str) -> int | None:
        return self._token_ids.get(token)

    def id_to_token(self, id: int) -> str | None:
        if not 0 <= id < self.vocab_size:
            return None
        data = self._token_bytes[id]
        return self._special[id - 256] if data is None else \
            "".join(_BYTE_SYMBOLS[b] for b in data)

    # Files ------------------------------------------------------------------------------
    def _state(self) -> dict:
        return {"pre_tokenizer": _PRE_TOKENIZER, "special_tokens": self._special,
                "merges": [list(m) for m in self._merges]}

    @classmethod
    def _from_state(cls, state: dict) -> "BPETokenizer":
        if state.get("pre_tokenizer") != _PRE_TOKENIZER:
            raise DataError(f"pre_tokenizer {state.get('pre_tokenizer')!r} is not "
                            f"{_PRE_TOKENIZER!r}")
        special = cls._field(state, "special_tokens", list)
        merges = cls._field(state, "merges", list)
        if any(not isinstance(m, list) or len(m) != 2 for m in merges):
            raise DataError("every merge must be a list of two ids")
        return cls(merges, special)

    def __repr__(self) -> str:
        return (f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self._merges)}, "
                f"special_tokens={self._special})")


def _merge_pair(word: list[int], a: int, b: int, new: int) -> list[int]:
    """``word`` with each ``a, b`` (left to right, not overlapping) replaced by ``new``."""
    out, i, n = [], 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def _learn_merges(words: list[list[int]], freqs: list[int], n_merges: int,
                  min_frequency: int, first_id: int) -> list[tuple[int, int]]:
    """BPE's merge loop over unique words with their counts. Pair counts live in a dict
    with a max-heap of (count, pair) entries that go stale when a count changes (a fresh
    entry is pushed instead); each merge rewrites only the words holding the pair."""
    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for w, (word, f) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += f
            where[pair].add(w)
    heap = [(-c, pair) for pair, c in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -neg:
            continue  # stale
        if -neg < min_frequency:
            break
        new = first_id + len(merges)
        merges.append(pair)
        changed = set()
        for w in where.pop(pair):
            word, f = words[w], freqs[w]
            merged = _merge_pair(word, pair[0], pair[1], new)
            if len(merged) == len(word):
                continue  # the pair left this word in an earlier merge
            for p in zip(word, word[1:]):
                pair_counts[p] -= f
                changed.add(p)
            for p in zip(merged, merged[1:]):
                pair_counts[p] += f
                where[p].add(w)
                changed.add(p)
            words[w] = merged
        for p in changed:
            c = pair_counts[p]
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                del pair_counts[p]
        pair_counts.pop(pair, None)
    return merges


# Augmentation ---------------------------------------------------------------------------
def _rng(generator) -> np.random.Generator:
    return (generator or default_generator())._rng


def _check_generator(owner: str, generator) -> None:
    if generator is not None and not isinstance(generator, Generator):
        raise EmberTypeError(f"{owner}: generator must be an ember.Generator or None, got "
                             f"{type(generator).__name__}")


def _check_probability(owner: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise DataError(f"{owner}: p should be a probability in [0, 1], got p={p!r}")
    return float(p)


class _Tokens:
    """A token sequence as a list or an array, and how to give a result back."""

    def __init__(self, tokens, owner: str):
        self.kind = "tensor" if isinstance(tokens, Tensor) else (
            "array" if isinstance(tokens, np.ndarray) else "list")
        if self.kind == "list":
            if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
                raise EmberTypeError(f"{owner}: expected a list of tokens, a 1-D array or "
                                     f"tensor, got {type(tokens).__name__}")
            self.items = list(tokens)
        else:
            self.items = tokens.numpy(force=True) if self.kind == "tensor" else tokens
            if self.items.ndim != 1:
                raise EmberTypeError(f"{owner}: expected a 1-D sequence of tokens, got shape "
                                     f"{tuple(self.items.shape)}")

    def __len__(self) -> int:
        return len(self.items)

    def select(self, keep: np.ndarray):
        if self.kind == "list":
            return [self.items[i] for i in np.flatnonzero(keep)]
        return self.wrap(self.items[keep])

    def wrap(self, items):
        if self.kind == "tensor":
            return from_numpy(np.ascontiguousarray(items))
        return items


class RandomTokenDeletion:
    """Drop each token independently with probability ``p``; if every token would go,
    one drawn at random stays (EDA's random deletion).

    >>> RandomTokenDeletion(p=0.0)([1, 2, 3])
    [1, 2, 3]
    """

    def __init__(self, p: float = 0.1, generator: Generator | None = None):
        self.p = _check_probability("RandomTokenDeletion", p)
        _check_generator("RandomTokenDeletion", generator)
        self.generator = generator

    def __call__(self, tokens):
        seq = _Tokens(tokens, "RandomTokenDeletion")
        n = len(seq)
        if n == 0:
            return seq.select(np.zeros(0, bool))
        rng = _rng(self.generator)
        keep = rng.random(n) >= self.p
        if not keep.any():
            keep[rng.integers(n)] = True
        return seq.select(keep)

    def __repr__(self) -> str:
        return f"RandomTokenDeletion(p={self.p})"


class RandomTokenSwap:
    """Swap two distinct random positions, ``n`` times, or ``round(p * len(tokens))``
    times when ``p`` is given (EDA's random swap).

    >>> sorted(RandomTokenSwap(n=3)([1, 2, 3, 4]))
    [1, 2, 3, 4]
    """

    def __init__(self, n: int | None = None, p: float | None = None,
                 generator: Generator | None = None):
        if n is not None and p is not None:
            raise DataError("RandomTokenSwap: give n (swaps per call) or p (swaps per "
                            "token), not both")
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)
                              or n < 0):
            raise DataError(f"RandomTokenSwap: n should be a non-negative int, got {n!r}")
        self.n = 1 if n is None and p is None else n
        self.p = None if p is None else _check_probability("RandomTokenSwap", p)
        _check_generator("RandomTokenSwap", generator)
        self.generator = generator

    def __call__(self, tokens):
        seq = _Tokens(tokens, "RandomTokenSwap")
        size = len(seq)
        swaps = self.n if self.p is None else int(round(self.p * size))
        items = list(seq.items) if seq.kind == "list" else seq.items.copy()
        if size < 2 or swaps == 0:
            return seq.wrap(items)
        rng = _rng(self.generator)
        first = rng.integers(0, size, swaps)
        second = (first + rng.integers(1, size, swaps)) % size  # never the same position
        for i, j in zip(first.tolist(), second.tolist()):
            items[i], items[j] = items[j], items[i]
        return seq.wrap(items)

    def __repr__(self) -> str:
        return f"RandomTokenSwap(n={self.n}, p={self.p})"


class RandomTokenMasking:
    """Replace each token by ``mask_token`` independently with probability ``p``.

    >>> RandomTokenMasking(p=1.0, mask_token=0)([5, 6])
    [0, 0]
    """

    def __init__(self, p: float = 0.15, mask_token=0, generator: Generator | None = None):
        self.p = _check_probability("RandomTokenMasking", p)
        _check_generator("RandomTokenMasking", generator)
        self.mask_token = mask_token
        self.generator = generator

    def __call__(self, tokens):
        seq = _Tokens(tokens, "RandomTokenMasking")
        mask = _rng(self.generator).random(len(seq)) < self.p
        if seq.kind == "list":
            return [self.mask_token if m else t for t, m in zip(seq.items, mask.tolist())]
        out = seq.items.copy()
        out[mask] = self.mask_token
        return seq.wrap(out)

    def __repr__(self) -> str:
        return f"RandomTokenMasking(p={self.p}, mask_token={self.mask_token!r})"


class SynonymReplacement:
    """Replace each word that has synonyms in ``table``, with probability ``p``, by one
    of them drawn uniformly.

    Args:
        table: word -> list of synonyms.
        p: the probability of replacing a word that has synonyms.
        generator: the :class:`ember.Generator` to draw from.

    >>> SynonymReplacement({"big": ["large"]}, p=1.0)(["a", "big", "dog"])
    ['a', 'large', 'dog']
    """

    def __init__(self, table: dict[str, list[str]], p: float = 0.1,
                 generator: Generator | None = None):
        if not isinstance(table, dict) or any(
                not isinstance(k, str) or not isinstance(v, (list, tuple))
                or not all(isinstance(s, str) for s in v) for k, v in table.items()):
            raise EmberTypeError("SynonymReplacement: table must be a dict of str -> list of "
                                 "str")
        self.table = {k: list(v) for k, v in table.items() if v}
        self.p = _check_probability("SynonymReplacement", p)
        _check_generator("SynonymReplacement", generator)
        self.generator = generator

    def __call__(self, words: Sequence[str]) -> list[str]:
        if isinstance(words, str) or not isinstance(words, Sequence):
            raise EmberTypeError(f"SynonymReplacement: expected a list of words, got "
                                 f"{type(words).__name__} (split a sentence first)")
        rng = _rng(self.generator)
        replace = (rng.random(len(words)) < self.p).tolist()
        choice = rng.random(len(words)).tolist()
        out = list(words)
        for i, word in enumerate(words):
            synonyms = self.table.get(word)
            if synonyms and replace[i]:
                out[i] = synonyms[int(choice[i] * len(synonyms))]
        return out

    def __repr__(self) -> str:
        return f"SynonymReplacement(words={len(self.table)}, p={self.p})"
