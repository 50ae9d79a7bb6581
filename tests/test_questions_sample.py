"""Stage 2 on the shipped sample: stage 1's graph -> walks -> template questions of 2, 3 and 4 hops."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from graph.walks import run_walks
from pipeline.extract import run_extract
from pipeline.io import read_records
from schemas.config import ExtractConfig, QuestionConfig, WalkConfig
from schemas.questions import Question
from schemas.wiki import Entity, Relation, SkippedRecord
from synth import gates
from synth.questions import run_questions
from tests.test_questions import assert_reads_as_english

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream-index.txt.bz2"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample")
    run_extract(ExtractConfig(dump=str(DUMP), index=str(INDEX)), out / "graph")
    walks = run_walks(out / "graph", out / "paths", WalkConfig())
    manifest = run_questions(out / "graph", out / "paths", out / "questions", QuestionConfig(), cache_dir=None)
    questions = list(read_records(Question, out / "questions" / "questions"))
    skipped = list(read_records(SkippedRecord, out / "questions" / "skipped"))
    relations = list(read_records(Relation, out / "graph" / "relations"))
    entities = {e.title: e for e in read_records(Entity, out / "graph" / "entities")}
    return walks, manifest, questions, skipped, relations, entities


def test_questions_of_two_three_and_four_hops_with_every_path_accounted_for(sample):
    walks, manifest, questions, skipped, _, _ = sample
    assert {2, 3, 4} <= {q.hops for q in questions}
    assert all(manifest.counts[f"questions:hops_{h}"] >= 3 for h in (2, 3, 4))
    assert len(questions) + len(skipped) == manifest.counts["paths:read"] == walks.counts["paths:kept"]
    assert all(walks.counts[f"rejected:{c}"] > 0 for c in ("dead_end", "hub", "multiple_objects", "inverse_hop"))
    assert manifest.counts["rejected:alternative_answer"] > 0 and manifest.counts["rejected:fewer_hops"] > 0
    assert len({q.question_id for q in questions}) == len(questions)


def test_no_question_leaks_its_answer_or_names_an_intermediate(sample):
    _, _, questions, _, _, entities = sample
    for question in questions:
        assert gates.answer_leak(question.text, question.answer, question.aliases) is None, question.text
        assert gates.intermediate_leak(question.text, question.path.nodes[1:-1]) is None, question.text
        if question.answer in entities:
            assert set(entities[question.answer].aliases) <= set(question.aliases)


def test_each_answer_is_reached_by_following_its_path_in_the_graph(sample):
    _, _, questions, _, relations, entities = sample
    objects = defaultdict(set)
    for relation in relations:
        obj = relation.tail if relation.value_type == "entity" else relation.value
        objects[(relation.head, relation.relation)].add(obj)
    for question in questions:
        path = question.path
        current = path.start
        assert entities[current].is_head
        for hop, following in zip(path.hops, path.nodes[1:], strict=True):
            assert hop.head == current and hop.provenance.page_title == current
            assert (hop.tail or hop.value) in objects[(current, hop.relation)]
            assert following.startswith(hop.tail or hop.value)  # literals read with their unit
            current = following
        assert current == question.answer
        assert len(objects[(path.hops[-1].head, path.hops[-1].relation)]) == 1  # a single answer
        assert any(h.in_window for h in path.hops)


def test_questions_read_as_english_and_state_the_as_of_date(sample):
    _, manifest, questions, _, _, _ = sample
    for question in questions:
        assert_reads_as_english(question.text)
        assert question.engine == "template" and question.as_of == manifest.as_of.date()
        stated = question.text.startswith(f"As of {question.as_of:%B %Y}, ")
        assert stated == any(o.startswith("as_of:") for o in question.obfuscations)


# Read and checked by hand against the sample's pages (facts, fuzzed periods, grammar) when written.
CHECKED = {  # relations are ontology properties (graph/ontology.py)
    ("The Prestige (novel)", ("author", "birthPlace"), "Cheadle, Greater Manchester"):
        "The novel The Prestige was written by an English novelist who died in the 2020s. Where was this English "
        "novelist born?",
    ("The Silmarillion", ("publisher", "foundingDate"), "1914"):
        "In what year was the publisher of The Silmarillion, a company based in the United Kingdom, founded?",
    ("Roma (2018 film)", ("director", "birthPlace"), "Mexico City"):
        "Where was the director of the 2018 film Roma, a Mexican filmmaker born in the mid-20th century, born?",
    ("Jaws (film)", ("starring", "deathDate"), "2008-02-10"):
        "When did the lead actor of the film Jaws, an American actor born in the 1930s, die?",
    ("Jaws (film)", ("starring", "deathPlace"), "Little Rock, Arkansas"):
        "Name the place of death of the lead actor of the film Jaws, an American actor born in the 1930s.",
    ("Cillian Murphy", ("almaMater", "foundingDate"), "1845"):
        "Cillian Murphy studied at a public research university in Ireland. In what year was this public research "
        "university founded?",
    ("It (novel)", ("publisher", "foundingDate"), "1925"):
        "The novel It was published by a company based in New York City. In what year was this company founded?",
    ("Dune (novel)", ("author", "birthPlace"), "Tacoma, Washington"):
        "Where was the author of the novel Dune, a writer born in the early 20th century, born?",
}


def test_a_handful_checked_by_hand(sample):
    _, _, questions, _, _, _ = sample
    by_chain = {(q.path.start, tuple(h.relation for h in q.path.hops), q.answer): q.text for q in questions}
    found = {chain: by_chain[chain] for chain in CHECKED if chain in by_chain}
    assert len(found) >= 6, sorted(set(CHECKED) - set(found))  # tolerate small changes in stage 1's sample
    assert found == {chain: CHECKED[chain] for chain in found}
