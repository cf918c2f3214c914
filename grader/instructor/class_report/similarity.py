"""Answers suspiciously alike: winnowing fingerprints (Schleimer, Wilkerson and Aiken, as MOSS and
``copydetect`` use them) of each learner's solution cells, and of the library's sources.

- Tokens come from Python's ``tokenize``; identifiers become ``V`` (renaming variables changes
  nothing), numbers ``N`` and strings ``S``; keywords, operators, builtins and attribute names
  (``.sum``) stay; comments, blank lines and indentation do not count.
- Every ``K`` consecutive tokens are hashed (a k-gram); of each ``WINDOW`` consecutive k-gram
  hashes the smallest is kept: the fingerprints. Any passage of
  ``K + WINDOW - 1`` tokens that two documents share yields a fingerprint they share.
- Ignored: every k-gram of the course's own notebook code (the source notebook: the release's
  scaffold and instructor cells, and the model answer, which any correct answer resembles: two
  learners who both wrote it are not a finding), and every fingerprint more than ``common(n)``
  learners' documents of a notebook share (an idiom of the class, not a copy), or more than
  ``LIBRARY_COMMON`` library files share (an idiom of the library: a type annotation, a loop header).
- Candidate pairs come from an inverted index (fingerprint -> documents), never from all pairs;
  a pair of learners is flagged when it shares at least ``MIN_SHARED`` fingerprints, and a learner
  and the library file they share the most with likewise (the library's code counts however many
  learners share it).

Flagging only: it changes no grade. The shared passages of a flagged pair are marked with every
k-gram the two share (not only the fingerprints), to be shown side by side.
"""
from __future__ import annotations

import builtins
import io
import keyword
import math
import multiprocessing
import os
import re
import tokenize
import zlib
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

K = 5                   # tokens per k-gram
WINDOW = 4              # k-grams per winnowing window: shared runs of K + WINDOW - 1 = 8 tokens are found
MIN_SHARED = 10         # shared fingerprints (about 25 tokens of code) that flag a pair
LIBRARY_COMMON = 2      # library files that may share a fingerprint before it is the library's idiom
LIBRARY = "library"     # the learner name of the library's documents
PARALLEL_FROM = 400     # documents from which fingerprints are made in worker processes

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}
_KEEP_NAMES = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))
_FALLBACK = re.compile(r"#[^\n]*|[A-Za-z_]\w*|\d[\w.]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|\S")
_TOKEN_HASH: dict[str, int] = {}


def common(documents: int) -> int:
    """How many documents of a notebook may share a fingerprint before it is the class's idiom."""
    return max(5, math.ceil(0.05 * documents))


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(normalised token, start, end) with character offsets into ``text``; text that ``tokenize``
    cannot read (a cell that does not parse) is split by a simple pattern instead."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    found: list[tuple[str, int, int]] = []
    try:
        previous = ""
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _SKIP:
                continue
            start = starts[token.start[0] - 1] + token.start[1]
            end = starts[min(token.end[0] - 1, len(starts) - 1)] + token.end[1]
            found.append((_normalised(token.type, token.string, previous), start, end))
            previous = token.string
        return found
    except (tokenize.TokenError, IndentationError, SyntaxError):
        found, previous = [], ""
        for match in _FALLBACK.finditer(text):
            word = match.group()
            if word.startswith("#"):
                continue
            kind = tokenize.NAME if word[0].isalpha() or word[0] == "_" else tokenize.NUMBER if word[0].isdigit() \
                else tokenize.STRING if word[0] in "'\"" else tokenize.OP
            found.append((_normalised(kind, word, previous), match.start(), match.end()))
            previous = word
        return found


def _normalised(kind: int, text: str, previous: str) -> str:
    if kind == tokenize.NAME:
        return text if text in _KEEP_NAMES or previous == "." else "V"
    if kind == tokenize.NUMBER:
        return "N"
    if kind == tokenize.STRING or kind in _FSTRING:
        return "S"
    return text


_FSTRING = {getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)}


def _token_hash(token: str) -> int:
    value = _TOKEN_HASH.get(token)
    if value is None:
        value = _TOKEN_HASH[token] = zlib.crc32(token.encode())
    return value


def kgram_hashes(words: list[str]) -> list[int]:
    """The hash of every K consecutive tokens (stable across runs: built from the tokens' CRC-32)."""
    ids = [_token_hash(w) for w in words]
    return [hash(tuple(ids[i:i + K])) for i in range(len(ids) - K + 1)]


def winnow(hashes: list[int]) -> set[int]:
    """The smallest hash of each WINDOW consecutive k-grams (a document shorter than one window: its smallest)."""
    if not hashes:
        return set()
    if len(hashes) <= WINDOW:
        return {min(hashes)}
    chosen = set()
    for start in range(len(hashes) - WINDOW + 1):
        window = hashes[start:start + WINDOW]
        chosen.add(min(window))
    return chosen


def fingerprints_of(text: str) -> set[int]:
    return winnow(kgram_hashes([w for w, _, _ in tokens(text)]))


@dataclass
class Document:
    learner: str                 # LIBRARY for a library file
    assignment: str              # the notebook; the file's path for a library file
    text: str
    fingerprints: set[int] = field(repr=False)

    @classmethod
    def of(cls, learner: str, assignment: str, text: str) -> "Document":
        return cls(learner, assignment, text, fingerprints_of(text))

    @cached_property
    def words(self) -> list[tuple[str, int, int]]:
        """Its tokens with their offsets: needed only to mark a flagged pair, so made only then."""
        return tokens(self.text)

    @cached_property
    def hashes(self) -> list[int]:
        return kgram_hashes([w for w, _, _ in self.words])


def documents_of(items: list[tuple[str, str, str]], workers: int | None = None) -> list[Document]:
    """``Document.of(learner, notebook, text)`` for each item; a large class's fingerprints are made in
    ``workers`` processes (default: one per core), tokenizing being the report's longest step."""
    workers = workers or os.cpu_count() or 1
    texts = [text for _, _, text in items]
    if workers > 1 and len(texts) >= PARALLEL_FROM:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            prints = list(pool.map(fingerprints_of, texts, chunksize=max(1, len(texts) // (4 * workers))))
    else:
        prints = [fingerprints_of(text) for text in texts]
    return [Document(learner, notebook, text, fingerprint)
            for (learner, notebook, text), fingerprint in zip(items, prints)]


def course_code(sources: list[str]) -> set[int]:
    """Every k-gram of the course's own code (cells of the source notebook), to ignore."""
    ignored: set[int] = set()
    for source in sources:
        ignored.update(kgram_hashes([w for w, _, _ in tokens(source)]))
    return ignored


def library_documents(root: Path) -> list[Document]:
    """One document per Python file of the library (``lib/tensorcraft``)."""
    return [Document.of(LIBRARY, str(path.relative_to(root.parent)), path.read_text(encoding="utf-8"))
            for path in sorted(root.rglob("*.py"))]


@dataclass
class Pair:
    one: Document
    other: Document
    shared: int                  # fingerprints the two share (outside course code and class idioms)
    similarity: float            # shared / the smaller document's fingerprints

    def marks(self, ignored: set[int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Character ranges of each document covered by a k-gram both hold (course code left out)."""
        both = (set(self.one.hashes) & set(self.other.hashes)) - ignored
        return _covered(self.one, both), _covered(self.other, both)


def _covered(document: Document, shared: set[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for i, h in enumerate(document.hashes):
        if h in shared:
            start, end = document.words[i][1], document.words[i + K - 1][2]
            if ranges and start <= ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
            else:
                ranges.append((start, end))
    return ranges


def similar_pairs(documents: list[Document], ignored: dict[str, set[int]], library: list[Document] = (),
                  min_shared: int = MIN_SHARED) -> list[Pair]:
    """The flagged pairs: learners of the same notebook, and a learner and a library file.
    ``ignored``: notebook -> the k-grams of its course code."""
    by_notebook: dict[str, list[int]] = defaultdict(list)
    for number, document in enumerate(documents):
        by_notebook[document.assignment].append(number)
    library_index: dict[int, list[int]] = defaultdict(list)
    for number, document in enumerate(library):
        for h in document.fingerprints:
            library_index[h].append(number)
    library_index = {h: files for h, files in library_index.items() if len(files) <= LIBRARY_COMMON}
    pairs: list[Pair] = []
    for notebook, members in sorted(by_notebook.items()):
        skip = ignored.get(notebook, set())
        index: dict[int, list[int]] = defaultdict(list)
        for number in members:
            for h in documents[number].fingerprints - skip:
                index[h].append(number)
        limit = common(len(members))
        shared: dict[tuple[int, int], int] = defaultdict(int)
        for holders in index.values():
            if 2 <= len(holders) <= limit:
                for i, first in enumerate(holders):
                    for second in holders[i + 1:]:
                        shared[(first, second)] += 1
        for (first, second), count in shared.items():
            if count >= min_shared:
                pairs.append(_pair(documents[first], documents[second], count))
        for number in members:
            hits: dict[int, int] = defaultdict(int)
            for h in documents[number].fingerprints - skip:
                for file in library_index.get(h, ()):
                    hits[file] += 1
            best = max(hits.items(), key=lambda item: (item[1], -item[0]), default=None)
            if best and best[1] >= min_shared:
                pairs.append(_pair(documents[number], library[best[0]], best[1]))
    return sorted(pairs, key=lambda p: (-p.shared, p.one.assignment, p.one.learner, p.other.learner))


def _pair(one: Document, other: Document, count: int) -> Pair:
    smaller = min(len(one.fingerprints), len(other.fingerprints)) or 1
    return Pair(one, other, count, count / smaller)
