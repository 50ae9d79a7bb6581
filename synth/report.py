"""`hopsmith question-report OUT`: how hard a run's questions are, measured afresh from its outputs.

Nothing here trusts a question's own flags or re-runs a gate: the start entity is looked for in the text
(by its name, or by the object of a fact that identifies it in the world: an inverse-functional property);
the text, and each description alone, is searched in another retriever than the agents' index (TF-IDF with
its own tokenisation over the same pages); the answer is guessed from the run's other questions that end
in the same relation; a break scan reads text and answer. Each figure can fail (tests feed crafted bad
questions and see it move). The same figures go into the run summary and the dataset card, with the gates
the questions stage ran.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph.csr import load_csr
from ground.errors import UserError
from ground.io import read_manifest, read_records, read_table, shard_files
from ground.storage import as_path
from knowledge.ontology import load_ontology
from knowledge.phrasebook import scan_question
from schemas.config import QuestionConfig, WalkConfig
from schemas.environment import IndexedPage
from schemas.questions import Path as Path_
from schemas.questions import Question
from schemas.wiki import Entity, SkippedRecord
from synth import describe, gates, text_gates
from synth.matching import normalize_answer
from synth.question_plan import WORLD_FITS_TAG

TOP_ANSWERS = 5


def question_shape(question: Question) -> str:
    return next((o.removeprefix("shape:") for o in question.obfuscations if o.startswith("shape:")), "chain")


TREE_PLACES = ("start", "intermediate", "answer")
TREE_PLACE_WORDS = {"start": "at the start", "intermediate": "at an intermediate", "answer": "at the answer"}
TREE_SHORTFALL = 0.05  # a realised tree share this far below the configured one is explained in the report


def _tree_places(question: Question) -> set[str]:
    """Where a tree question's branches intersect: at the start, an intermediate, or the answer."""
    positions = {int(o.removeprefix("tree_at:")) for o in question.obfuscations if o.startswith("tree_at:")}
    return {"start" if p == 0 else "answer" if p == question.hops else "intermediate" for p in positions}


FACT_WINDOW = 6  # words before a name that state its fact ("whose notable works include the novel X")


@functools.cache
def _fact_stems(relation: str) -> frozenset[str]:
    """The words a question states a relation's fact in: the lexicon's frames and the attribute table's own."""
    forms = describe.attribute_table()["relations"].get(relation, {})
    return frozenset(text_gates.relation_stems(relation) | text_gates.content_stems(" ".join(forms.values()).replace("{o}", " ")))


def identifying_fact_named(graph, node: int, text: str) -> str | None:
    """The name of an object of an inverse-functional fact of `node` that `text` states, with a word of the
    relation among the few before it ("whose spouse is Jack Lowden", "followed by 'Salem's Lot"), or None: such
    a text names the entity in all but name. A name stated for another fact ("whose writers include Noah
    Baumbach", of a film Baumbach's wife directed) does not count."""
    ontology = load_ontology()
    words = normalize_answer(text).split()
    for edge in range(graph.indptr[node], graph.indptr[node + 1]):
        relation = graph.relation_names[graph.rel[edge]]
        obj = int(graph.dst[edge])
        if not ontology.identifies_subject(relation, graph.entity_type[obj]):
            continue
        label = graph.label(obj)
        for form in dict.fromkeys((label, label.split(" (")[0])):
            name = normalize_answer(form).split()
            for i in range(len(words) - len(name) + 1) if name else ():
                before = {w[: text_gates.STEM] for w in words[max(i - FACT_WINDOW, 0) : i]}
                if words[i : i + len(name)] == name and before & _fact_stems(relation):
                    return form
    return None


class TfidfProbe:
    """A retriever that is not the agents' index, for the report's probes: TF-IDF cosine over each page's
    title and text, with its own tokenisation (every word, one-letter ones and stop words included, a plural
    -s dropped) where the index ranks by bm25s over stop-word-free tokens. What it finds first, one search
    finds in another engine too; the gates never read it."""

    def __init__(self, pages: list[tuple[str, str]]):
        self.titles = [title for title, _ in pages]
        counts = [Counter(self.tokens(f"{title} {text}")) for title, text in pages]
        frequency = Counter(term for count in counts for term in count)
        self.idf = {term: math.log((1 + len(pages)) / (1 + n)) + 1 for term, n in frequency.items()}
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for doc, count in enumerate(counts):
            weights = {term: (1 + math.log(n)) * self.idf[term] for term, n in count.items()}
            norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
            for term, weight in weights.items():
                self.postings.setdefault(term, []).append((doc, weight / norm))

    @staticmethod
    def tokens(text: str) -> list[str]:
        words = re.findall(r"[^\W_]+", text.casefold())
        return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words]

    def rank(self, query: str, top_k: int) -> list[str]:
        scores: Counter = Counter()
        for term, n in Counter(self.tokens(query)).items():
            weight = (1 + math.log(n)) * self.idf.get(term, 0.0)
            for doc, doc_weight in self.postings.get(term, ()):
                scores[doc] += weight * doc_weight
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:top_k]
        return [self.titles[doc] for doc, _ in best]


def described_entities(question: Question) -> dict[str, str]:
    """Entity -> the description the question gives it instead of its name (the planner's record of what it
    wrote, `entity:<title>-><description>`)."""
    found = {}
    for obfuscation in question.obfuscations:
        if obfuscation.startswith("entity:") and "->" in obfuscation:
            title, description = obfuscation.removeprefix("entity:").split("->", 1)
            found[title] = description
    return found


def description_first(probe: TfidfProbe, questions: list[Question]) -> tuple[int, int]:
    """(questions whose start description alone ranks the start first, questions where some unnamed
    intermediate's description alone ranks that intermediate first) under the probe retriever."""
    start = intermediate = 0
    for question in questions:
        described = described_entities(question)
        if question.path.start in described:
            start += probe.rank(described[question.path.start], 1) == [question.path.start]
        intermediate += any(probe.rank(described[node], 1) == [node] for node in question.path.nodes[1:-1]
                            if node in described)
    return start, intermediate


def question_search_hits(probe: TfidfProbe, questions: list[Question], top_k: int) -> int:
    """Questions whose whole text, searched in the probe retriever, lists the answer's page in the top k."""
    return sum(question.answer in probe.rank(question.text, top_k) for question in questions
               if question.path.answer_type == "entity")


def prior_guess_hits(questions: list[Question]) -> int:
    """Questions answered by guessing the commonest answer among the run's other questions that end in the
    same relation (leave-one-out; ties go to the first answer in sorted order)."""
    groups: dict[str, Counter] = {}
    for question in questions:
        groups.setdefault(question.path.hops[-1].relation, Counter())[normalize_answer(question.answer)] += 1
    hits = 0
    for question in questions:
        answers = groups[question.path.hops[-1].relation]
        answer = normalize_answer(question.answer)
        others = answers.copy()
        others[answer] -= 1
        top = max(others.values(), default=0)
        hits += top > 0 and min(a for a, n in others.items() if n == top) == answer
    return hits


def world_fits_over(questions: list[Question], max_fits: float) -> tuple[int, int]:
    """(described starts estimated to fit more than `max_fits` entities of the whole wiki, described starts
    estimated): the planner's `world_fits` tag, by the census or the reviewed prior of
    data/questions/world_holders.toml, read where the gate did not use it (the named-anchor rule)."""
    estimates = [float(o.removeprefix(WORLD_FITS_TAG)) for q in questions for o in q.obfuscations
                 if o.startswith(WORLD_FITS_TAG)]
    return sum(e > max_fits for e in estimates), len(estimates)


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


BreakScanner = Callable[[str, str], list[str]]  # (question text, answer) -> the breaks found


def question_report(out: str | Path, top_k: int | None = None,
                    scan_breaks: BreakScanner | None = None) -> dict[str, Any]:
    """The report of the run folder `out` (its questions/, graph/, paths/ and, when built, index/)."""
    out = as_path(out)
    report = measure({name: out / name for name in ("graph", "paths", "questions", "index")}, top_k, scan_breaks)
    if report is None:
        raise UserError(f"{out} holds no finished questions and graph stages (run `hopsmith dataset --out {out}`)")
    return report


_MEASURED: dict[tuple, dict[str, Any] | None] = {}


def measure(folders: dict[str, Path], top_k: int | None = None,
            scan_breaks: BreakScanner | None = None) -> dict[str, Any] | None:
    """`measure_stages`, once per process for the same finished stages: `hopsmith dataset` puts the report in
    the card and prints it again in its summary (0.8 CPU-s on the sample each time)."""
    if scan_breaks is not None:  # a caller's own scanner: not the default report
        return measure_stages(folders, top_k, scan_breaks)
    finished = {name: read_manifest(folder) for name, folder in folders.items()}
    identity = (top_k, tuple(sorted((name, str(folders[name]), m.key, m.finished_at)
                                    for name, m in finished.items() if m is not None)))
    if identity not in _MEASURED:
        _MEASURED[identity] = measure_stages(folders, top_k)
    return copy.deepcopy(_MEASURED[identity])


def measure_stages(folders: dict[str, Path], top_k: int | None = None,
                   scan_breaks: BreakScanner | None = None) -> dict[str, Any] | None:
    """The report from the stage folders `graph`, `paths`, `questions` and `index` (the last may be unbuilt);
    None unless the graph and questions stages have finished.

    The difficulty figures come from probes the gates do not run: another retriever (`TfidfProbe`, over the
    index's pages) for the question and for each description alone, the leave-one-out prior guess among
    the run's questions, and a break scan (`scan_breaks`, else the phrasebook's scanner, whose patterns are a
    table of their own, not the writers' templates)."""

    manifest = read_manifest(folders["questions"])
    if manifest is None or read_manifest(folders["graph"]) is None:
        return None
    config = QuestionConfig.model_validate(manifest.config)
    walk = read_manifest(folders["paths"])
    walk_config = WalkConfig.model_validate(walk.config) if walk else WalkConfig()
    graph = load_csr(folders["graph"], as_of=config.as_of, window_days=walk_config.window_days or 182,
                     exclude_relations=walk_config.exclude_relations)
    facts = gates.FactIndex(graph)
    types = {row["title"]: row["type"] for row in read_table(Entity, folders["graph"] / "entities")
             .select(["title", "type"]).to_pylist()}
    aliases = {row["title"]: row["aliases"] or [] for row in read_table(Entity, folders["graph"] / "entities")
               .select(["title", "aliases"]).to_pylist()}
    probe = None
    if read_manifest(folders["index"]) is not None:
        probe = TfidfProbe([(page.title, " ".join(page.chunks)) for shard in shard_files(folders["index"] / "pages")
                            for page in read_records(IndexedPage, shard)])
    top_k = top_k or config.one_search_top_k or 5
    questions = list(read_records(Question, folders["questions"] / "questions"))
    scan_breaks = scan_breaks or scan_question

    by_shape: Counter = Counter()
    answers: Counter = Counter()
    relations: Counter = Counter()
    classes: Counter = Counter()
    named = identified_start = identified_intermediate = broken = famous_start = famous_answer = 0
    for question in questions:
        path = question.path
        nodes = [graph.node_id(n) for n in path.nodes[:-1]]
        identifies = [n is not None and identifying_fact_named(graph, n, question.text) is not None
                      for n in nodes]
        identified_start += identifies[0]
        identified_intermediate += any(identifies[1:])
        by_shape[f"{question.hops} hops, {question_shape(question)}"] += 1
        answers[normalize_answer(question.answer)] += 1
        relations.update(h.relation for h in path.hops)
        classes.update(types[n] or "untyped" for n in path.nodes if n in types)
        named += identifies[0] or text_gates.intermediate_leak(question.text, [path.start, *aliases.get(path.start, [])]) is not None
        broken += bool(scan_breaks(question.text, question.answer))
        famous = gates.famous_ends(facts, path, config.fame_quantile)
        famous_start += path.start in famous
        famous_answer += path.answer in famous
    total = len(questions)
    start_first = unnamed_first = searched = None
    if probe is not None:
        start_first, unnamed_first = description_first(probe, questions)
        searched = question_search_hits(probe, questions, top_k)
    over, estimated = world_fits_over(questions, config.census_max_fits)
    gated = config.require_named_anchor and (config.census is not None or config.world_prior)
    top = answers.most_common(TOP_ANSWERS)
    tree_share = _share(sum(n for k, n in by_shape.items() if k.endswith("tree")), total)
    tree_at = Counter(place for question in questions for place in _tree_places(question))
    return {
        "questions": total,
        "by_hops_and_shape": dict(sorted(by_shape.items())),
        "tree_share": tree_share,
        "tree_share_configured": walk_config.tree_share,
        "tree_at": {place: tree_at[place] for place in TREE_PLACES},
        "tree_note": tree_note(folders, walk, walk_config, tree_share),
        "yield_by_hops": yield_by_hops(folders, Counter(q.hops for q in questions)),
        "names_start_share": _share(named, total),
        "identifies_start_share": _share(identified_start, total),
        "identifies_intermediate_share": _share(identified_intermediate, total),
        "question_search_share": None if probe is None else _share(searched, total),
        "question_search_top_k": top_k,
        "start_description_first_share": None if probe is None else _share(start_first, total),
        "unnamed_description_first_share": None if probe is None else _share(unnamed_first, total),
        "prior_guess_share": _share(prior_guess_hits(questions), total),
        "phrasebook_break_share": _share(broken, total),
        "world_uniqueness": ("" if not config.require_named_anchor else f"census {config.census}" if config.census
                             else "prior" if config.world_prior else "narrow anchor"),
        # a figure the gate itself enforced cannot fail: reported only where the named-anchor rule ran
        "world_fits_over_share": None if gated else _share(over, estimated),
        "world_fits_estimated": estimated,
        "world_fits_max": config.census_max_fits,
        "fame": {"quantile": config.fame_quantile, "famous_keep": config.famous_keep,
                 "famous_start_share": _share(famous_start, total), "famous_answer_share": _share(famous_answer, total)},
        "top_answers": [[answer, count] for answer, count in top],
        "top5_answer_share": _share(sum(n for _, n in top), total),
        "max_answer_share": _share(top[0][1], total) if top else 0.0,
        "relations": dict(relations.most_common()),
        "classes": dict(classes.most_common()),
        "gates": gates_run(config, read_manifest(folders["index"]) is not None,
                           closed_book=not any("shortcut:offline" in q.obfuscations for q in questions)),
        "engine": manifest.engines.get("writer", ""),
    }


def yield_by_hops(folders: dict[str, Path], kept: Counter) -> dict[str, dict[str, Any]]:
    """Per hop count: the paths the walk found, the questions kept, and the commonest reasons the rest were
    rejected (why 4-hop questions are few: mostly a shorter route to the answer in a dense graph)."""
    if read_manifest(folders["paths"]) is None:
        return {}
    hops = {row["path_id"]: len(row["hops"]) for row in
            read_table(Path_, folders["paths"] / "paths").select(["path_id", "hops"]).to_pylist()}
    rejected: dict[int, Counter] = {}
    for record in read_records(SkippedRecord, folders["questions"] / "skipped"):
        if record.title in hops:
            rejected.setdefault(hops[record.title], Counter())[record.reason] += 1
    return {str(count): {"paths": paths, "questions": kept.get(count, 0),
                    "rejected": dict(rejected.get(count, Counter()).most_common(3))}
            for count, paths in sorted(Counter(hops.values()).items())}


def tree_note(folders: dict[str, Path], walk, walk_config: WalkConfig, tree_share: float) -> str:
    """Why the tree share falls short of the configured one, in plain words (empty when it does not): how
    many walks drawn to branch found a hop whose objects branches can tell apart, and what the questions
    stage did with the paths whose final hop branches."""
    if walk is None or tree_share >= walk_config.tree_share - TREE_SHORTFALL:
        return ""
    drawn, branched = walk.counts.get("walks:may_branch", 0), walk.counts.get("walks:branched", 0)
    paths = read_table(Path_, folders["paths"] / "paths").select(["path_id", "conditions"]).to_pylist()
    tree_paths = {row["path_id"] for row in paths if "branching_final_hop" in (row["conditions"] or [])}
    fates = Counter(record.reason for record in read_records(SkippedRecord, folders["questions"] / "skipped")
                    if record.title in tree_paths)
    rejected = ", ".join(f"{reason} {count}" for reason, count in fates.most_common(4)) or "none"
    return (f"walk.tree_share is {walk_config.tree_share:.0%} but {tree_share:.0%} of the questions are trees: a "
            f"tree needs an entity that two or more stated facts pin down only together (a start whose attributes "
            f"each fit other entities too, or a hop to several objects that its branches tell apart), and the "
            f"graph offers too few; of {drawn} walks drawn to branch, {branched} took a hop whose several objects "
            f"are all pages with facts; {len(tree_paths)} distinct paths branch at the answer, "
            f"{sum(fates.values())} of them rejected ({rejected})")


def gates_run(config: QuestionConfig, searched: bool, closed_book: bool = True) -> list[str]:
    """The gates every kept question passed in this configuration (the card claims no other); `closed_book`
    is False when some question's shortcut check fell back to the offline gates."""
    ran = ["vague_answer", "partial_list", "fewer_hops", "reversed_place", "multi_valued_hop", "alternative_answer", "tree_branch",
           "identifying_clue", "clue_shortcut", "trivial_final_hop", "answer_leak",
           "evidence_leak", "intermediate_leak", "missing_as_of", "untimed_hop", "duplicate", "answer_cap",
           "relation_answer_cap"]
    if config.max_bare_run is not None:
        ran.append("bare_run")
    if config.famous_keep < 1.0:
        ran.append("famous")
    if config.require_named_anchor:
        ran.append("not_unique_in_world")
    if config.describe_start > 0:
        ran += ["start_not_unique", "start_leak"]
    if config.reject_dominant_answer:
        ran.append("dominant_answer")
    if searched and config.one_search_top_k:
        ran.append("one_search")
    if searched and (config.description_search_top_k or config.start_description_search_top_k):
        ran += ["description_search", "description_answer"]
    if config.shortcut is not None and not config.shortcut.offline and closed_book:
        ran.append("shortcut")
    return sorted(ran)


def report_rows(report: dict[str, Any]) -> list[list[Any]]:
    """The report as (statistic, value) rows, for the run summary and the card."""
    def probed(key: str) -> str:
        return "not measured (no index)" if report[key] is None else f"{report[key]:.1%}"
    return [
        ["questions", report["questions"]],
        *[[f"questions: {key}", count] for key, count in report["by_hops_and_shape"].items()],
        *[[f"{count}-hop paths -> questions", f"{row['paths']} -> {row['questions']} (rejected most: "
           + ", ".join(f"{reason} {n}" for reason, n in row["rejected"].items()) + ")"]
          for count, row in report.get("yield_by_hops", {}).items()],
        ["tree-shaped share", f"{report['tree_share']:.1%} (configured {report['tree_share_configured']:.0%}; "
         + "branches meet " + ", ".join(f"{TREE_PLACE_WORDS[place]} in {n}" for place, n in report.get("tree_at", {}).items())
         + ")"
         + (f" ({report['tree_note']})" if report.get("tree_note") else "")],
        ["share naming the start entity (or a fact of it that identifies it in the world)",
         f"{report['names_start_share']:.1%} (by such a fact: {report.get('identifies_start_share', 0.0):.1%})"],
        ["share naming a fact that identifies an intermediate in the world",
         f"{report.get('identifies_intermediate_share', 0.0):.1%}"],
        [f"share whose text, searched in a TF-IDF retriever (not the agents' bm25s), lists the answer in the top "
         f"{report['question_search_top_k']}", probed("question_search_share")],
        ["share whose start description alone ranks the start first (TF-IDF probe)",
         probed("start_description_first_share")],
        ["share where an unnamed entity's description alone ranks it first (TF-IDF probe)",
         probed("unnamed_description_first_share")],
        ["share answered by the commonest answer of the other questions ending in the same relation",
         f"{report['prior_guess_share']:.1%}"],
        ["share with a template break (scan of text and answer)", f"{report['phrasebook_break_share']:.1%}"],
        [f"share of described starts that may fit more than {report.get('world_fits_max', 1.5):g} entities of the "
         "whole wiki (the planner's estimate by the reviewed prior or a census, not a measurement)",
         "gated (the questions.world_prior or census rule rejected them)" if report.get("world_fits_over_share") is None
         else f"{report['world_fits_over_share']:.1%} of {report.get('world_fits_estimated', 0)} (not gated: "
              "questions.world_prior = true rejects them)"],
        ["fame mix (start / answer among the top pages by in-links)",
         f"{report['fame']['famous_start_share']:.1%} / {report['fame']['famous_answer_share']:.1%} (top "
         f"{1 - report['fame']['quantile']:.0%} of pages; such paths kept at {report['fame']['famous_keep']:.0%})"],
        ["top-5 answer share", f"{report['top5_answer_share']:.1%}"],
        ["largest share of one answer", f"{report['max_answer_share']:.1%}"],
        ["relations used", ", ".join(f"{k} ({v})" for k, v in list(report["relations"].items())[:12])],
        ["classes used", ", ".join(f"{k} ({v})" for k, v in list(report["classes"].items())[:12])],
        ["gates passed by every question", ", ".join(report["gates"])],
    ]


def print_report(report: dict[str, Any]) -> None:
    from rich.table import Table

    from ground.progress import console

    table = Table(title="hopsmith question report")
    table.add_column("statistic")
    table.add_column("value", overflow="fold")
    for name, value in report_rows(report):
        table.add_row(str(name), str(value))
    console().print(table)
