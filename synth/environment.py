"""The local search environment: a BM25 index over a snapshot's kept pages and the four agent tools.

`build_index` cleans every kept article once per snapshot (a Beam transform, one resumable part per stage 1
page shard), splits it into numbered chunks and saves two bm25s indexes beside them (page bodies; titles
with their redirect aliases). `SearchEnvironment` loads
that folder and executes tool calls. Synthesis, the critic and RL share it, and the critic re-executes
recorded calls, so every observation is a pure function of (index, call): ranking ties break by page
order, and nothing depends on time or randomness. Errors (unknown tool or page, bad arguments) come back
as `(message, True)`, never as exceptions.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam
import bm25s
import numpy as np
import pyarrow.parquet as pq
from bm25s.stopwords import STOPWORDS_EN

from pipeline.beam import pipeline_options
from pipeline.errors import UserError
from pipeline.extract import Deadline, PageTimeout
from pipeline.io import WorkUnits, read_manifest, read_records, shard_files, write_records
from pipeline.stage import begin_stage
from pipeline.wikitext import normalize_title
from schemas.config import BeamOptions, IndexConfig
from schemas.environment import IndexedPage
from schemas.manifest import Manifest
from schemas.wiki import Entity, Page, SkippedRecord
from synth.tools import validate_call
from synth.wikitext import clean_wikitext, split_chunks, split_sentences

STAGE = "index"
BODY_INDEX = "bm25_body"
TITLE_INDEX = "bm25_title"
SNIPPET_CHARS = 240
MAX_FIND_MATCHES = 8
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(STOPWORDS_EN)


def _title_key(title: str) -> str:
    return normalize_title(title).casefold()


def tokenize(texts: list[str]) -> list[list[str]]:
    """Lower-cased word tokens without English stopwords (bm25s's pattern and list): one tokenizer for
    documents and queries, cheap enough to run on every search call."""
    return [[token for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS] for text in texts]


def _build_bm25(texts: list[str], folder: Path) -> None:
    retriever = bm25s.BM25()
    retriever.index(tokenize(texts), show_progress=False)
    retriever.save(str(folder), show_progress=False)


def _clean_page(page: Page, config: IndexConfig, aliases: list[str]) -> IndexedPage | SkippedRecord:
    try:
        with Deadline(config.page_timeout_s).alarm():
            text = clean_wikitext(page.text)
    except PageTimeout as error:
        return SkippedRecord(title=page.title, stage=STAGE, reason="timeout", detail=str(error), page_id=page.page_id)
    except Exception as error:  # mwparserfromhell raises several types on broken markup
        return SkippedRecord(title=page.title, stage=STAGE, reason="parse_error", detail=str(error)[:200], page_id=page.page_id)
    chunks = split_chunks(text, config.chunk_chars)
    if not chunks:
        return SkippedRecord(title=page.title, stage=STAGE, reason="empty_text", page_id=page.page_id)
    return IndexedPage(
        title=page.title, page_id=page.page_id, revision_id=page.revision_id, aliases=aliases, chunks=chunks
    )


def clean_pages(pages: Iterable[Page], entity_aliases: dict[str, list[str]], config: IndexConfig
                ) -> tuple[list[IndexedPage], list[SkippedRecord]]:
    """Clean the articles stage 1 kept as entities (one shard's worth); everything else is a skip with a reason."""
    kept: list[IndexedPage] = []
    skipped: list[SkippedRecord] = []
    for page in pages:
        reason = None
        if page.ns != 0:
            reason = "not_article"
        elif page.redirect_to is not None:
            reason = "redirect"
        elif page.title not in entity_aliases:
            reason = "not_entity"
        if reason:
            skipped.append(SkippedRecord(title=page.title, stage=STAGE, reason=reason, page_id=page.page_id))
            continue
        result = _clean_page(page, config, entity_aliases[page.title])
        (kept if isinstance(result, IndexedPage) else skipped).append(result)
    return kept, skipped


def deduplicate(pages: Iterable[IndexedPage]) -> tuple[list[IndexedPage], list[SkippedRecord]]:
    """Pages in index order (title, then page id); a title seen again is a `duplicate` skip."""
    unique: list[IndexedPage] = []
    duplicates: list[SkippedRecord] = []
    for page in sorted(pages, key=lambda p: (p.title, p.page_id)):
        if unique and unique[-1].title == page.title:
            duplicates.append(SkippedRecord(title=page.title, stage=STAGE, reason="duplicate", page_id=page.page_id))
        else:
            unique.append(page)
    return unique, duplicates


def entity_aliases(entities: Iterable[Entity]) -> dict[str, list[str]]:
    return {e.title: sorted(set(e.aliases)) for e in entities}


def index_pages(pages: list[Page], entities: list[Entity], config: IndexConfig) -> tuple[list[IndexedPage], list[SkippedRecord]]:
    """The whole index selection without Beam: clean, then deduplicate; skips in a stable order."""
    kept, skipped = clean_pages(pages, entity_aliases(entities), config)
    unique, duplicates = deduplicate(kept)
    return unique, sorted(skipped + duplicates, key=_skip_order)


def _skip_order(record: SkippedRecord) -> tuple:
    return (record.title, record.page_id or 0, record.reason)


class _CleanShard(apache_beam.DoFn):
    """Cleans one stage 1 page shard into a resumable part; entity aliases are read once per worker."""

    def __init__(self, graph_dir: str, out_dir: str, config: IndexConfig):
        self.graph_dir, self.out_dir, self.config = graph_dir, out_dir, config
        self.aliases: dict[str, list[str]] = {}

    def setup(self):
        self.aliases = entity_aliases(read_records(Entity, Path(self.graph_dir) / "entities"))

    def process(self, shard: str):
        parts = WorkUnits(self.out_dir, ["pages", "skipped"])
        unit_id = Path(shard).stem
        if not parts.is_done(unit_id):
            kept, skipped = clean_pages(read_records(Page, shard), self.aliases, self.config)
            parts.write(unit_id, {"pages": (IndexedPage, kept), "skipped": (SkippedRecord, skipped)})
        yield unit_id


def write_index(pages: list[IndexedPage], out_dir: Path, config: IndexConfig) -> dict[str, list[str]]:
    """Save page chunks as parquet shards and the two bm25s indexes; document i is pages[i]."""
    outputs: list[str] = []
    for start in range(0, max(len(pages), 1), config.shard_pages):
        path = out_dir / "pages" / f"pages-{start // config.shard_pages:05d}.parquet"
        write_records(IndexedPage, pages[start : start + config.shard_pages], path)
        outputs.append(str(path.relative_to(out_dir)))
    if pages:
        _build_bm25([p.title + "\n" + "\n".join(p.chunks) for p in pages], out_dir / BODY_INDEX)
        _build_bm25([" ".join([p.title, *p.aliases]) for p in pages], out_dir / TITLE_INDEX)
    return {"pages": outputs, "bm25": [BODY_INDEX, TITLE_INDEX] if pages else []}


def build_index(
    graph_dir: str | Path,
    out_dir: str | Path,
    config: IndexConfig | None = None,
    beam: BeamOptions | None = None,
    beam_args: Iterable[str] = (),
) -> Manifest:
    """Build the search index of a snapshot once: `out_dir` gets page chunks, bm25s indexes and a manifest.

    Cleaning runs as a Beam transform, one resumable part per stage 1 page shard; the BM25 indexes are
    then built in this process from the cleaned pages.
    """
    config = config or IndexConfig()
    graph_dir, out_dir = Path(graph_dir), Path(out_dir)
    run = begin_stage(STAGE, out_dir, config, upstream_dirs={"extract": graph_dir})
    if run.done:
        return run.finished
    shards = shard_files(graph_dir / "pages")
    with apache_beam.Pipeline(options=pipeline_options(beam, list(beam_args))) as pipeline:
        _ = (
            pipeline
            | "Shards" >> apache_beam.Create([str(s) for s in shards], reshuffle=False)
            | "Reshuffle" >> apache_beam.Reshuffle()
            | "Clean" >> apache_beam.ParDo(_CleanShard(str(graph_dir), str(out_dir), config))
        )
    parts = WorkUnits(out_dir, ["pages", "skipped"])
    cleaned = [page for s in shards for page in read_records(IndexedPage, parts.part_path("pages", s.stem))]
    skipped = [record for s in shards for record in read_records(SkippedRecord, parts.part_path("skipped", s.stem))]
    kept, duplicates = deduplicate(cleaned)
    skipped = sorted(skipped + duplicates, key=_skip_order)
    outputs = write_index(kept, out_dir, config)
    write_records(SkippedRecord, skipped, out_dir / "skipped" / "skipped-00000.parquet")
    outputs["skipped"] = ["skipped/skipped-00000.parquet"]
    pages_in = sum(pq.ParquetFile(s).metadata.num_rows for s in shards)
    counts = Counter({"pages_in": pages_in, "kept": len(kept), "chunks": sum(len(p.chunks) for p in kept)})
    counts.update(f"skipped:{s.reason}" for s in skipped)
    return run.finish(dict(counts), outputs)


@dataclass(frozen=True)
class SearchHit:
    title: str
    score: float
    snippet: str


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

    @classmethod
    def load(cls, index_dir: str | Path) -> SearchEnvironment:
        index_dir = Path(index_dir)
        manifest = read_manifest(index_dir)
        if manifest is None:
            raise FileNotFoundError(f"no finished search index in {index_dir} (run `hopsmith index`)")
        pages = [page for shard in shard_files(index_dir / "pages") for page in read_records(IndexedPage, shard)]
        body = titles = None
        if pages:
            body = bm25s.BM25.load(str(index_dir / BODY_INDEX), mmap=True, show_progress=False)
            titles = bm25s.BM25.load(str(index_dir / TITLE_INDEX), mmap=True, show_progress=False)
        title_weight = float(manifest.config.get("title_weight", IndexConfig().title_weight))
        return cls(pages, body, titles, title_weight=title_weight, environment_id=manifest.key)

    def resolve(self, title: str) -> IndexedPage | None:
        """The page a title names, following redirects (aliases) and ignoring case and underscores."""
        index = self._by_key.get(_title_key(title))
        return None if index is None else self.pages[index]

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
        tokens = tokenize([query])[0]
        if not self.pages or not tokens:
            return []
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
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:top_k]
        query_tokens = set(tokens)
        return [SearchHit(self.pages[i].title, float(scores[i]), self._snippet(self.pages[i], query_tokens)) for i in order]

    def _snippet(self, page: IndexedPage, query_tokens: set[str]) -> str:
        best, best_overlap = "", 0
        for chunk in page.chunks:
            for sentence in split_sentences(chunk):
                overlap = len(query_tokens & set(_TOKEN.findall(sentence.lower())))
                if overlap > best_overlap:
                    best, best_overlap = sentence, overlap
        best = best or split_sentences(page.chunks[0])[0]
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
        page = self.resolve(title)
        if page is None:
            return self._unknown_page(title)
        needle = " ".join(text.split()).casefold()
        if not needle:
            return "Error: invalid arguments for find_in_page: text: is blank", True
        matches = []
        for number, chunk in enumerate(page.chunks, 1):
            for sentence in split_sentences(chunk):
                if needle in " ".join(sentence.split()).casefold():
                    matches.append(f"[page {number}] {sentence}")
        if not matches:
            return f"No occurrence of {text!r} in {page.title!r}.", False
        shown = matches[:MAX_FIND_MATCHES]
        more = f" (showing {len(shown)} of {len(matches)})" if len(matches) > len(shown) else ""
        return f"{len(matches)} match(es) of {text!r} in {page.title!r}{more}:\n" + "\n".join(shown), False


def register(subparsers) -> None:
    defaults = IndexConfig()
    parser = subparsers.add_parser(
        "index",
        help="stage 3 environment: build the bm25s search index over a snapshot's kept pages",
        description="Clean every kept article of stage 1 (templates rendered, refs dropped), split it into "
        "numbered chunks and build the BM25 index the search tools use. Runs once per snapshot.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/index", help="index folder (default: %(default)s)")
    parser.add_argument("--chunk-chars", type=int, default=defaults.chunk_chars,
                        help="most characters of one open_page chunk (default: %(default)s)")
    parser.add_argument("--title-weight", type=float, default=defaults.title_weight,
                        help="weight of the title/alias field in ranking (default: %(default)s)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    if read_manifest(args.graph) is None:
        raise UserError(f"no finished stage 1 output in {args.graph} (run `hopsmith extract` first)")
    config = IndexConfig(chunk_chars=args.chunk_chars, title_weight=args.title_weight)
    manifest = build_index(args.graph, args.out, config, beam_args=beam_args)
    counts = manifest.counts
    print(f"index: {counts['pages_in']} pages in, {counts['kept']} indexed in {counts['chunks']} chunks -> {args.out}")
    for key, value in counts.items():
        if key.startswith("skipped:"):
            print(f"  {key:<28} {value}")
    return 0
