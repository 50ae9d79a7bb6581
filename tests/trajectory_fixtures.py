"""A small hand-written snapshot for stage 3 tests: pages, entities, questions over their gold paths.

Written as editors write (infoboxes with nested templates, refs, redirects, a long page that needs several
chunks), so the index, the tools and the scripted policy meet the same markup they meet on a dump.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ground.io import write_records
from ground.stage import begin_stage
from schemas.questions import Path as QPath
from schemas.questions import PathHop, Question
from schemas.wiki import Entity, Page, Provenance

TS = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)

HISTORY = " ".join(
    f"In {1850 + i} the city council of Chicago approved plan number {i} for new streets and bridges near the lake."
    for i in range(60)
)

ARTICLES: dict[str, tuple[str, list[str]]] = {
    "Barack Obama": (
        "{{Infobox officeholder\n| name = Barack Obama\n| image = Obama.jpg\n"
        "| birth_date = {{birth date and age|1961|8|4}}\n| birth_place = [[Honolulu]], [[Hawaii]], U.S.\n"
        "| spouse = {{marriage|[[Michelle Obama]]|1992}}\n"
        "| alma_mater = {{plainlist|\n* [[Columbia University]]\n* [[Harvard Law School]]}}\n}}\n"
        "'''Barack Hussein Obama II''' (born August 4, 1961) is an American politician who served as the 44th "
        "president of the [[United States]].<ref>{{cite web|url=http://x|title=Bio}}</ref> "
        "He was born in [[Honolulu]].<!-- hidden note -->\n\n== Early life ==\n"
        "Obama studied at [[Columbia University|Columbia]] and later at [[Harvard Law School]]. "
        "[[File:Obama young.jpg|thumb|Obama as a student]]\n[[Category:Presidents]]",
        ["Obama", "Barack Hussein Obama"],
    ),
    "Michelle Obama": (
        "{{Infobox person\n| name = Michelle Obama\n| birth_name = Michelle LaVaughn Robinson\n"
        "| birth_date = {{birth date and age|1964|1|17}}\n| birth_place = [[Chicago]], Illinois, U.S.\n"
        "| spouse = {{marriage|[[Barack Obama]]|1992}}\n| alma_mater = [[Princeton University]]<br>[[Harvard Law School]]\n}}\n"
        "'''Michelle LaVaughn Obama''' (née Robinson) is an American attorney and author. "
        "She grew up on the South Side of [[Chicago]].",
        ["Michelle Robinson", "Michelle LaVaughn Robinson"],
    ),
    "Chicago": (
        "{{Infobox settlement\n| name = Chicago\n| subdivision_name = [[United States]]\n"
        "| subdivision_name1 = [[Illinois]]\n| established_date = {{start date|1837|3|4}}\n}}\n"
        "'''Chicago''' is the most populous city in the U.S. state of [[Illinois]].\n\n== History ==\n" + HISTORY,
        ["Chicago, Illinois"],
    ),
    "Illinois": (
        "{{Infobox U.S. state\n| name = Illinois\n| capital = [[Springfield, Illinois|Springfield]]\n"
        "| largest_city = [[Chicago]]\n}}\n'''Illinois''' is a state in the Midwestern United States.",
        [],
    ),
    "Springfield, Illinois": (
        "{{Infobox settlement\n| name = Springfield\n| subdivision_name1 = [[Illinois]]\n}}\n"
        "'''Springfield''' is the capital city of the U.S. state of [[Illinois]].",
        [],
    ),
    "Honolulu": (
        "{{Infobox settlement\n| name = Honolulu\n| subdivision_name1 = [[Hawaii]]\n}}\n"
        "'''Honolulu''' is the capital and most populous city of the U.S. state of [[Hawaii]].",
        [],
    ),
    "Hawaii": (
        "{{Infobox U.S. state\n| name = Hawaii\n| capital = [[Honolulu]]\n| admitted = {{start date|1959|8|21}}\n}}\n"
        "'''Hawaii''' is an island state of the United States in the Pacific Ocean.",
        ["State of Hawaii"],
    ),
    "Columbia University": (
        "{{Infobox university\n| name = Columbia University\n| established = {{start date|1754}}\n"
        "| city = [[New York City]]\n| country = [[United States]]\n}}\n"
        "'''Columbia University''' is a private Ivy League research university in [[New York City]].",
        ["Columbia College (New York)"],
    ),
    "Princeton University": (
        "{{Infobox university\n| name = Princeton University\n| established = {{start date|1746}}\n"
        "| city = [[Princeton, New Jersey|Princeton]]\n}}\n"
        "'''Princeton University''' is a private Ivy League research university in Princeton, New Jersey.",
        [],
    ),
    "Harvard Law School": (
        "{{Infobox law school\n| name = Harvard Law School\n| established = 1817\n| city = [[Cambridge, Massachusetts]]\n}}\n"
        "'''Harvard Law School''' is the law school of Harvard University.",
        [],
    ),
    "New York City": (
        "{{Infobox settlement\n| name = New York City\n| subdivision_name = [[United States]]\n}}\n"
        "'''New York City''' is the most populous city in the [[United States]].",
        ["NYC", "New York, New York"],
    ),
    "United States": (
        "{{Infobox country\n| conventional_long_name = United States of America\n| capital = [[Washington, D.C.]]\n}}\n"
        "The '''United States''' is a country primarily located in North America.",
        ["USA", "United States of America"],
    ),
}


def _page(page_id: int, title: str, text: str, ns: int = 0, redirect_to: str | None = None) -> Page:
    return Page(page_id=page_id, title=title, ns=ns, revision_id=1000 + page_id, timestamp=TS, text=text,
                redirect_to=redirect_to)


def make_graph(graph_dir: Path) -> Path:
    """Write a finished stage-1 output folder (pages, entities, manifest) for the fixture snapshot."""
    run = begin_stage("extract", graph_dir, {"fixture": "stage3"})
    pages = [_page(i + 1, title, text) for i, (title, (text, _)) in enumerate(ARTICLES.items())]
    pages += [
        _page(900, "NYC", "#REDIRECT [[New York City]]", redirect_to="New York City"),
        _page(901, "Springfield", "'''Springfield''' may refer to:\n* [[Springfield, Illinois]]\n{{disambiguation}}"),
        _page(902, "Template:Infobox person", "{{documentation}}", ns=10),
    ]
    entities = [
        Entity(title=title, type="thing", description=title, last_modified=TS, is_head=True, page_id=i + 1,
               revision_id=1001 + i, aliases=aliases)
        for i, (title, (_, aliases)) in enumerate(ARTICLES.items())
    ]
    write_records(Page, pages, graph_dir / "pages" / "pages-00000.parquet")
    write_records(Entity, entities, graph_dir / "entities" / "entities-00000.parquet")
    run.finish({"pages": len(pages)}, {})
    return graph_dir


def _hop(head: str, relation: str, tail: str | None = None, value: str | None = None, value_type: str = "entity") -> PathHop:
    page_id = list(ARTICLES).index(head) + 1
    return PathHop(
        head=head, relation=relation, tail=tail, value=value, value_type=value_type,
        provenance=Provenance(page_id=page_id, page_title=head, revision_id=1000 + page_id, timestamp=TS,
                              infobox="infobox", parameter=relation),
    )


def _question(qid: str, text: str, hops: list[PathHop], answer: str, aliases: list[str] = ()) -> Question:
    nodes = [hops[0].head] + [h.tail or h.value for h in hops]
    path = QPath(path_id=f"p-{qid}", start=hops[0].head, nodes=nodes, hops=hops, answer=answer,
                 answer_type=hops[-1].value_type, seed=0)
    return Question(question_id=qid, text=text, answer=answer, aliases=list(aliases), as_of=dt.date(2026, 6, 1),
                    hops=len(hops), path=path, engine="template")


QUESTIONS = [
    _question("q-spouse-birthplace", "In which city was the spouse of the 44th U.S. president born?",
              [_hop("Barack Obama", "spouse", "Michelle Obama"), _hop("Michelle Obama", "birth_place", "Chicago")],
              "Chicago", ["Chicago, Illinois"]),
    _question("q-capital", "What is the capital of the state whose largest city is where Michelle Obama was born?",
              [_hop("Michelle Obama", "birth_place", "Chicago"), _hop("Chicago", "subdivision_name", "Illinois"),
               _hop("Illinois", "capital", "Springfield, Illinois")],
              "Springfield, Illinois", ["Springfield"]),
    _question("q-founded", "In what year was the university attended by Barack Obama's wife founded?",
              [_hop("Barack Obama", "spouse", "Michelle Obama"), _hop("Michelle Obama", "alma_mater", "Princeton University"),
               _hop("Princeton University", "established", value="1746", value_type="date")],
              "1746"),
    _question("q-country", "In which country is the city of the university Barack Obama attended before law school?",
              [_hop("Barack Obama", "alma_mater", "Columbia University"), _hop("Columbia University", "city", "New York City"),
               _hop("New York City", "subdivision_name", "United States")],
              "United States", ["USA", "United States of America"]),
]


def make_questions(questions_dir: Path) -> Path:
    """Write a finished stage-2 output folder holding QUESTIONS."""
    run = begin_stage("questions", questions_dir, {"fixture": "stage3"})
    write_records(Question, QUESTIONS, questions_dir / "questions" / "questions-00000.parquet")
    run.finish({"kept": len(QUESTIONS)}, {})
    return questions_dir


def make_snapshot(root: Path) -> Path:
    """The whole stage 3 input under `root`: graph, search index and questions."""
    from schemas.config import IndexConfig
    from synth.environment import build_index

    make_graph(root / "graph")
    build_index(root / "graph", root / "index", IndexConfig(chunk_chars=400))
    make_questions(root / "questions")
    return root
