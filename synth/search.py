"""The search tools at run time: `SearchEnvironment` loads an index folder written by `synth.environment`
and executes tool calls.

Kept apart from the index build (Beam, wikitext cleaning) so that the agent loops, the critic and the verl
plugin load an index without importing the pipeline's build dependencies. Every observation is a pure
function of (index, call): ranking ties break by page order, and nothing depends on time or randomness.
Errors (unknown tool or page, bad arguments) come back as `(message, True)`, never as exceptions.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from ground.io import read_manifest, read_records, shard_files
from ground.storage import as_path, readable_folder
from knowledge.lexicon import stop_words
from schemas.config import IndexConfig
from schemas.environment import IndexedPage
from synth.tools import validate_call
from wikitext.markup import normalize_title
from wikitext.plain_text import split_sentences

BODY_INDEX = "bm25_body"
TITLE_INDEX = "bm25_title"
SNIPPET_CHARS = 240
MAX_FIND_MATCHES = 8
CACHED_PAGES = 4096  # pages whose sentences stay split (an LRU: a full-corpus index must not hold them all)
CACHED_SEARCHES = 4096  # searches whose ranked hits stay known: rollouts of a question repeat their queries
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = stop_words("search")  # bm25s's English list (data/stop_words.toml)


@functools.lru_cache(maxsize=16384)  # every open_page and find_in_page resolves a title
def _title_key(title: str) -> str:
    return normalize_title(title).casefold()


def tokenize(texts: list[str]) -> list[list[str]]:
    """Lower-cased word tokens without English stopwords (bm25s's pattern and stop words): one tokenizer for
    documents and queries, cheap enough to run on every search call."""
    return [[token for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS] for text in texts]


@dataclass(frozen=True)
class SearchHit:
    title: str
    score: float
    snippet: str


@dataclass(frozen=True)
class Sentence:
    """A sentence of a page as the tools match it, split once per environment (`split_sentences`)."""

    text: str
    chunk: int  # its page number (1-based)
    words: frozenset[str]  # its lower-cased word tokens, stop words kept: what a snippet shares with a query
    folded: str  # whitespace-collapsed and case-folded: what find_in_page looks in


class SearchEnvironment:
    """The tools over one index folder. `execute(name, arguments) -> (observation, is_error)`."""

    def __init__(self, pages: list[IndexedPage], body: bm25s.BM25 | None, titles: bm25s.BM25 | None,
                 title_weight: float = 2.0, environment_id: str = ""):
        self.pages = pages
        self.environment_id = environment_id
        self._body = body
        self._titles = titles
        self._title_weight = title_weight
        self._by_key: dict[str, int] = {}
        for i, page in enumerate(pages):
            for alias in page.aliases:
                self._by_key.setdefault(_title_key(alias), i)
        for i, page in enumerate(pages):  # a real title wins over another page's alias
            self._by_key[_title_key(page.title)] = i
        # Memoised per environment: every observation is a pure function of (index, call).
        self._sentences = functools.lru_cache(maxsize=CACHED_PAGES)(self._split_page)
        self._ranked = functools.lru_cache(maxsize=CACHED_SEARCHES)(self._rank)

    @property
    def title_weight(self) -> float:
        return self._title_weight

    @classmethod
    def load(cls, index_dir: str | Path) -> SearchEnvironment:
        index_dir = as_path(index_dir)
        manifest = read_manifest(index_dir)
        if manifest is None:
            raise FileNotFoundError(f"no finished search index in {index_dir} (run `hopsmith index`)")
        pages = [page for shard in shard_files(index_dir / "pages") for page in read_records(IndexedPage, shard)]
        body = titles = None
        if pages:
            body = bm25s.BM25.load(str(readable_folder(index_dir / BODY_INDEX)), mmap=True, show_progress=False)
            titles = bm25s.BM25.load(str(readable_folder(index_dir / TITLE_INDEX)), mmap=True, show_progress=False)
            for model in (body, titles):  # still mapped; plain arrays skip np.memmap's wrapping of every slice
                model.scores = {key: np.asarray(value) if isinstance(value, np.memmap) else value
                                for key, value in model.scores.items()}
        title_weight = float(manifest.config.get("title_weight", IndexConfig().title_weight))
        return cls(pages, body, titles, title_weight=title_weight, environment_id=manifest.key)

    def resolve(self, title: str) -> IndexedPage | None:
        """The page a title names, following redirects (aliases) and ignoring case and underscores."""
        index = self._by_key.get(_title_key(title))
        return None if index is None else self.pages[index]

    def _split_page(self, index: int) -> tuple[Sentence, ...]:
        return tuple(Sentence(sentence, number, frozenset(_TOKEN.findall(sentence.lower())),
                              " ".join(sentence.split()).casefold())
                     for number, chunk in enumerate(self.pages[index].chunks, 1) for sentence in split_sentences(chunk))

    # --- tools -------------------------------------------------------------------------------------

    def execute(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one tool call. Every failure is an observation the agent sees, flagged as an error."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return f"Error: arguments of {name} are not valid JSON", True
        parsed, error = validate_call(name, arguments)
        if error is not None:
            return f"Error: {error}", True
        if name == "search":
            return self._search_text(parsed.query, parsed.top_k)
        if name == "open_page":
            return self._open_page(parsed.title, parsed.page)
        if name == "find_in_page":
            return self._find_in_page(parsed.title, parsed.text)
        return f"Final answer submitted: {parsed.text}", False

    def search(self, query: str, top_k: int = 5) -> list[SearchHit]:
        """Ranked pages: BM25 over bodies plus weighted BM25 over titles and aliases; an exact title first."""
        return list(self._ranked(query, top_k))

    def titles(self, query: str, top_k: int = 5) -> tuple[str, ...]:
        """The titles `search` ranks first, without the snippets a reader sees: for a gate that asks only which
        pages come first (a page's first snippet splits its text into sentences, most of a first search)."""
        order, _, _ = self._order(query, top_k)
        return tuple(self.pages[i].title for i in order)

    def _rank(self, query: str, top_k: int) -> tuple[SearchHit, ...]:
        order, scores, tokens = self._order(query, top_k)
        query_tokens = set(tokens)
        return tuple(SearchHit(self.pages[i].title, float(scores[i]), self._snippet(int(i), query_tokens)) for i in order)

    def _order(self, query: str, top_k: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The indices of the top k pages in rank order, every page's score and the query's tokens."""
        tokens = tokenize([query])[0]
        if not self.pages or not tokens:
            return np.array([], np.int64), np.array([]), tokens
        scores = self._body.get_scores(tokens).astype(np.float64)
        if self._title_weight:
            scores += self._title_weight * self._titles.get_scores(tokens)
        exact = self._by_key.get(_title_key(query))
        if exact is not None:
            scores[exact] = scores.max() + 1.0
        candidates = np.flatnonzero(scores > 0)
        if len(candidates) > top_k:  # keep every page tied with the k-th score, then order exactly
            kth = np.partition(scores[candidates], len(candidates) - top_k)[len(candidates) - top_k]
            candidates = candidates[scores[candidates] >= kth]
        return candidates[np.lexsort((candidates, -scores[candidates]))][:top_k], scores, tokens

    def _snippet(self, index: int, query_tokens: set[str]) -> str:
        """The page's first sentence sharing the most words with the query (else its first sentence), cut."""
        sentences = self._sentences(index)
        best, best_overlap = "", 0
        for sentence in sentences:
            overlap = len(query_tokens & sentence.words)
            if overlap > best_overlap:
                best, best_overlap = sentence.text, overlap
        best = best or sentences[0].text
        return best if len(best) <= SNIPPET_CHARS else best[: SNIPPET_CHARS - 3].rstrip() + "..."

    def _search_text(self, query: str, top_k: int) -> tuple[str, bool]:
        hits = self.search(query, top_k)
        if not hits:
            return f"No results for {query!r}. Try other keywords.", False
        lines = [f"Results for {query!r}:"]
        for rank, hit in enumerate(hits, 1):
            lines.append(f"{rank}. {hit.title}\n   {hit.snippet}")
        return "\n".join(lines), False

    def _unknown_page(self, title: str) -> tuple[str, bool]:
        return f"Error: no page titled {title!r}. Use search to find the exact title.", True

    def _open_page(self, title: str, chunk: int) -> tuple[str, bool]:
        page = self.resolve(title)
        if page is None:
            return self._unknown_page(title)
        total = len(page.chunks)
        if chunk > total:
            return f"Error: {page.title!r} has {total} page(s); page {chunk} does not exist.", True
        redirect = f" (redirected from {title!r})" if _title_key(title) != _title_key(page.title) else ""
        more = f" Call open_page with page={chunk + 1} to read on." if chunk < total else ""
        header = f"{page.title}{redirect} - page {chunk} of {total}.{more}"
        return f"{header}\n\n{page.chunks[chunk - 1]}", False

    def _find_in_page(self, title: str, text: str) -> tuple[str, bool]:
        index = self._by_key.get(_title_key(title))
        if index is None:
            return self._unknown_page(title)
        page = self.pages[index]
        needle = " ".join(text.split()).casefold()
        if not needle:
            return "Error: invalid arguments for find_in_page: text: is blank", True
        matches = [f"[page {sentence.chunk}] {sentence.text}" for sentence in self._sentences(index)
                   if needle in sentence.folded]
        if not matches:
            return f"No occurrence of {text!r} in {page.title!r}.", False
        shown = matches[:MAX_FIND_MATCHES]
        more = f" (showing {len(shown)} of {len(matches)})" if len(matches) > len(shown) else ""
        return f"{len(matches)} match(es) of {text!r} in {page.title!r}{more}:\n" + "\n".join(shown), False
