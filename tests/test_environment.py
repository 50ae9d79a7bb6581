"""The local search environment: index build accounting, ranking, pagination, redirects, errors as results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import synth.environment as environment
from ground.io import read_records
from schemas.config import IndexConfig
from schemas.wiki import Entity, SkippedRecord
from synth.environment import SearchEnvironment, build_index
from tests.trajectory_fixtures import ARTICLES, _page, make_graph
from wikitext.plain_text import clean_wikitext, format_date, split_chunks


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("env")
    make_graph(root / "graph")
    build_index(root / "graph", root / "index", IndexConfig(chunk_chars=400))
    return root / "index"


@pytest.fixture(scope="module")
def env(index_dir):
    return SearchEnvironment.load(index_dir)


def test_index_accounts_for_every_page(index_dir):
    manifest = build_index(index_dir.parent / "graph", index_dir, IndexConfig(chunk_chars=400))  # finished: skipped
    counts = manifest.counts
    assert counts["kept"] == len(ARTICLES)
    assert counts["pages_in"] == counts["kept"] + sum(v for k, v in counts.items() if k.startswith("skipped:"))
    reasons = {s.title: s.reason for s in read_records(SkippedRecord, index_dir / "skipped")}
    assert reasons == {"NYC": "redirect", "Springfield": "not_entity", "Template:Infobox person": "not_article"}


def test_cleaning_renders_facts_and_drops_markup():
    text = clean_wikitext(ARTICLES["Barack Obama"][0])
    assert "Birth date: 4 August 1961" in text
    assert "Spouse: Michelle Obama (m. 1992)" in text
    assert "Alma mater: Columbia University, Harvard Law School" in text
    assert "studied at Columbia and later" in text
    for markup in ("[[", "{{", "<ref", "cite web", "Obama.jpg", "hidden note", "Category", "thumb"):
        assert markup not in text
    assert format_date("1961-08") == "August 1961" and format_date("1746") == "1746"


def test_chunks_respect_the_size_and_keep_all_words():
    text = clean_wikitext(ARTICLES["Chicago"][0])
    chunks = split_chunks(text, 300)
    assert len(chunks) > 5 and all(len(c) <= 300 for c in chunks)
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())


@pytest.mark.parametrize("title", sorted(ARTICLES))
def test_a_title_query_ranks_that_page_first(env, title):
    assert env.search(title, 5)[0].title == title


def test_search_ranks_content_and_formats_results(env):
    text, is_error = env.execute("search", {"query": "capital city of Illinois", "top_k": 3})
    assert not is_error
    assert text.startswith("Results for 'capital city of Illinois':\n1. ")
    assert text.count("\n   ") == 3
    assert "Springfield, Illinois" in [hit.title for hit in env.search("capital city of Illinois", 3)]
    assert env.execute("search", {"query": "qwertyuiop"}) == ("No results for 'qwertyuiop'. Try other keywords.", False)


def test_open_page_paginates(env):
    first, error = env.execute("open_page", {"title": "Chicago"})
    assert not error and first.startswith("Chicago - page 1 of ")
    total = int(first.split(" of ")[1].split(".")[0])
    assert total > 3
    pages = [env.execute("open_page", {"title": "Chicago", "page": n})[0] for n in range(1, total + 1)]
    assert "Call open_page with page=2" in pages[0] and "Call open_page" not in pages[-1]
    assert "plan number 59" in pages[-1] and "plan number 59" not in pages[0]
    text, error = env.execute("open_page", {"title": "Chicago", "page": total + 1})
    assert error and f"has {total} page(s)" in text


def test_redirects_are_followed(env):
    text, error = env.execute("open_page", {"title": "NYC"})
    assert not error and text.startswith("New York City (redirected from 'NYC') - page 1 of 1.")
    assert env.resolve("michelle_robinson").title == "Michelle Obama"
    found, error = env.execute("find_in_page", {"title": "Michelle Robinson", "text": "princeton"})
    assert not error and "[page 1] Alma mater: Princeton University, Harvard Law School" in found


def test_find_in_page(env):
    text, error = env.execute("find_in_page", {"title": "Chicago", "text": "plan number 42 "})
    assert not error and "1 match(es)" in text and "In 1892 the city council" in text
    assert env.execute("find_in_page", {"title": "Hawaii", "text": "Chicago"}) == ("No occurrence of 'Chicago' in 'Hawaii'.", False)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("open_page", {"title": "Atlantis"}, "no page titled 'Atlantis'"),
        ("find_in_page", {"title": "Atlantis", "text": "x"}, "no page titled 'Atlantis'"),
        ("search", {"q": "Chicago"}, "invalid arguments for search"),
        ("search", {"query": "Chicago", "top_k": 0}, "top_k"),
        ("open_page", {"title": "Chicago", "page": "two"}, "page"),
        ("open_page", '{"title": "Chicago"', "not valid JSON"),
        ("open_page", ["Chicago"], "must be a JSON object"),
        ("browse", {"url": "http://x"}, "unknown tool 'browse'"),
        ("answer", {}, "invalid arguments for answer"),
        ("find_in_page", {"title": "Chicago", "text": "  "}, "text: is blank"),
    ],
)
def test_errors_are_results(env, name, arguments, message):
    text, is_error = env.execute(name, arguments)
    assert is_error and text.startswith("Error: ") and message in text


def test_answer_and_determinism(env, index_dir):
    assert env.execute("answer", {"text": "Chicago"}) == ("Final answer submitted: Chicago", False)
    again = SearchEnvironment.load(index_dir)
    assert again.environment_id == env.environment_id
    for call in [("search", {"query": "university New York"}), ("open_page", {"title": "Obama", "page": 1})]:
        assert again.execute(*call) == env.execute(*call)


def test_a_page_that_cleans_too_slowly_is_a_counted_skip(monkeypatch):
    def slow(text):
        time.sleep(0.5)
        return text

    monkeypatch.setattr(environment, "clean_wikitext", slow)
    page = _page(1, "Honolulu", ARTICLES["Honolulu"][0])
    entity = Entity(title="Honolulu", type="city", description="", last_modified=page.timestamp, is_head=True,
                    page_id=1, revision_id=1)
    kept, skipped = environment.index_pages([page], [entity], IndexConfig(page_timeout_s=0.05))
    assert kept == [] and [(s.title, s.reason) for s in skipped] == [("Honolulu", "timeout")]


def test_an_interrupted_index_build_resumes_from_its_cleaned_parts(index_dir, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(index_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").unlink()  # killed after cleaning, before the BM25 build finished
    (copy / ".pending-key").write_text(manifest["key"])
    shutil.rmtree(copy / "bm25_body")
    part = next((copy / "parts" / "pages").glob("*.parquet"))
    cleaned_at = part.stat().st_mtime_ns
    again = build_index(index_dir.parent / "graph", copy, IndexConfig(chunk_chars=400))
    assert part.stat().st_mtime_ns == cleaned_at and again.counts == manifest["counts"]
    assert SearchEnvironment.load(copy).execute("search", {"query": "Honolulu"}) == \
        SearchEnvironment.load(index_dir).execute("search", {"query": "Honolulu"})


_BUILD_BM25 = """
import sys
from synth.environment import _build_bm25
from tests.trajectory_fixtures import ARTICLES
_build_bm25([text for text, *_ in ARTICLES.values()], __import__("pathlib").Path(sys.argv[1]))
"""


def test_bm25_files_do_not_depend_on_the_hash_seed(tmp_path):
    """bm25s numbers a vocabulary in set order; ours is first-seen, so two processes save the same bytes."""
    saved = {}
    for seed in ("1", "2"):
        folder = tmp_path / seed
        subprocess.run([sys.executable, "-c", _BUILD_BM25, str(folder)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}, cwd=Path(__file__).parent.parent)
        saved[seed] = {f.name: f.read_bytes() for f in sorted(folder.iterdir())}
    assert saved["1"].keys() == saved["2"].keys() and "vocab.index.json" in saved["1"]
    assert saved["1"] == saved["2"]
