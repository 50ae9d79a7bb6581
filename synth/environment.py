"""The local search environment: a BM25 index over a snapshot's kept pages and the four agent tools.

`build_index` cleans every kept article once per snapshot (a Beam transform, one resumable part per stage 1
page shard), splits it into numbered chunks and saves two bm25s indexes beside them (page bodies; titles
with their redirect aliases). `synth.search.SearchEnvironment` (re-exported here) loads
that folder and executes tool calls. Synthesis, the critic and RL share it, and the critic re-executes
recorded calls, so every observation is a pure function of (index, call): ranking ties break by page
order, and nothing depends on time or randomness. Errors (unknown tool or page, bad arguments) come back
as `(message, True)`, never as exceptions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import apache_beam
import bm25s

from ground.deadline import Deadline, PageTimeout
from ground.io import WorkUnits, parquet_file, read_records, shard_files, write_records
from ground.stage import begin_stage
from ground.storage import StorePath, as_path, writable_folder
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, IndexConfig
from schemas.environment import IndexedPage
from schemas.manifest import Manifest
from schemas.wiki import Entity, Page, SkippedRecord
from synth.search import BODY_INDEX, TITLE_INDEX, SearchEnvironment, SearchHit, tokenize  # noqa: F401 (re-exported)
from wikitext.plain_text import clean_wikitext, split_chunks

STAGE = "index"


def token_ids(token_lists: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    """Token ids with a vocabulary numbered in first-seen order. bm25s numbers its own vocabulary in set
    order, which follows the process's hash seed, so the saved index (and float ties in its scores)
    would differ from run to run."""
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(token, len(vocab)) for token in tokens] for tokens in token_lists]
    return ids, vocab


def bm25_of(texts: list[str]) -> bm25s.BM25:
    retriever = bm25s.BM25()
    retriever.index(token_ids(tokenize(texts)), show_progress=False)
    return retriever


def body_text(page: IndexedPage) -> str:
    return page.title + "\n" + "\n".join(page.chunks)


def title_text(page: IndexedPage) -> str:
    return " ".join([page.title, *page.aliases])


def _build_bm25(texts: list[str], folder: Path | StorePath) -> None:
    with writable_folder(folder) as local:
        bm25_of(texts).save(str(local), show_progress=False)


def environment_of(pages: list[IndexedPage], title_weight: float, environment_id: str) -> SearchEnvironment:
    """An in-memory environment over some pages (the same indexing as `write_index`, nothing saved)."""
    if not pages:
        return SearchEnvironment([], None, None, title_weight, environment_id)
    return SearchEnvironment(pages, bm25_of([body_text(p) for p in pages]), bm25_of([title_text(p) for p in pages]),
                             title_weight, environment_id)


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
        self.aliases = entity_aliases(read_records(Entity, as_path(self.graph_dir) / "entities"))

    def process(self, shard: str):
        parts = WorkUnits(self.out_dir, ["pages", "skipped"])
        unit_id = as_path(shard).stem
        if not parts.is_done(unit_id):
            kept, skipped = clean_pages(read_records(Page, shard), self.aliases, self.config)
            parts.write(unit_id, {"pages": (IndexedPage, kept), "skipped": (SkippedRecord, skipped)})
        yield unit_id


def write_index(pages: list[IndexedPage], out_dir: Path | StorePath, config: IndexConfig) -> dict[str, list[str]]:
    """Save page chunks as parquet shards and the two bm25s indexes; document i is pages[i]."""
    outputs: list[str] = []
    for start in range(0, max(len(pages), 1), config.shard_pages):
        path = out_dir / "pages" / f"pages-{start // config.shard_pages:05d}.parquet"
        write_records(IndexedPage, pages[start : start + config.shard_pages], path)
        outputs.append(str(path.relative_to(out_dir)))
    if pages:
        _build_bm25([body_text(p) for p in pages], out_dir / BODY_INDEX)
        _build_bm25([title_text(p) for p in pages], out_dir / TITLE_INDEX)
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
    graph_dir, out_dir = as_path(graph_dir), as_path(out_dir)
    run = begin_stage(STAGE, out_dir, config, upstream_dirs={"extract": graph_dir}, beside=True)
    if run.done:
        return run.finished
    out_dir = run.work_dir  # beside the previous index until `finish` moves it into place
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
    pages_in = sum(parquet_file(s).metadata.num_rows for s in shards)
    counts = Counter({"pages_in": pages_in, "kept": len(kept), "chunks": sum(len(p.chunks) for p in kept)})
    counts.update(f"skipped:{s.reason}" for s in skipped)
    return run.finish(dict(counts), outputs)
