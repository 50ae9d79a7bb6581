"""Stage 3 on the shipped sample: the index over stage 1's pages, and offline runs over stage 2's questions."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from critic.text import contains_phrase, normalize, surface_forms
from graph.walk_stage import run_walks
from ground.io import read_records
from schemas.config import IndexConfig, QuestionConfig, TrajectoryConfig, WalkConfig
from schemas.environment import IndexedPage
from schemas.questions import Question
from schemas.trajectory import Trajectory
from synth.environment import SearchEnvironment, build_index
from synth.frameworks import FRAMEWORKS, get_framework
from synth.matching import match_answer
from synth.phrasing import date_periods
from synth.policies import ERROR_KINDS
from synth.policies.searcher import UNIDENTIFIED_ANSWER, distinctive, question_periods, result_titles
from synth.questions import run_questions
from synth.trajectories import run_trajectories
from tests.conftest import copy_stages
from tests.test_trajectories import HIGH_RATES

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"
FACTS = json.loads((ROOT / "tests" / "data" / "sample_facts.json").read_text())
QUESTIONS = 12


@pytest.fixture(scope="module")
def sample(tmp_path_factory, sample_stages):
    if not DUMP.is_file():
        pytest.skip("the shipped sample is missing")
    out = copy_stages(sample_stages, tmp_path_factory.mktemp("sample3"), ("extract",))  # stage 1 as shipped
    run_walks(out / "graph", out / "paths", WalkConfig(hops=[2, 3], walks_per_start=4))
    run_questions(out / "graph", out / "paths", out / "questions", QuestionConfig(max_questions=40), cache_dir=None)
    build_index(out / "graph", out / "index", IndexConfig(chunk_chars=300))
    config = TrajectoryConfig(rollouts=1, error_rates=HIGH_RATES, max_questions=QUESTIONS, questions_per_unit=6)
    run_trajectories(out / "questions", out / "index", out / "trajectories", config, cache_dir=None)
    return out


@pytest.fixture(scope="module")
def env(sample):
    return SearchEnvironment.load(sample / "index")


def test_every_title_query_ranks_its_page_first(env):
    assert len(env.pages) > 150
    misses = [page.title for page in env.pages if env.search(page.title, 5)[0].title != page.title]
    assert misses == []


def test_pagination_covers_the_whole_page(env):
    page = env.resolve("Christopher Nolan")
    assert len(page.chunks) > 2
    texts = [env.execute("open_page", {"title": "Christopher Nolan", "page": n})[0] for n in range(1, len(page.chunks) + 1)]
    assert all(text.startswith(f"Christopher Nolan - page {n} of {len(page.chunks)}.") for n, text in enumerate(texts, 1))
    body = " ".join(text.split("\n\n", 1)[1] for text in texts)
    assert "Birth date: 30 July 1970" in body and "Emma Thomas" in body
    assert env.execute("open_page", {"title": "Christopher Nolan", "page": len(page.chunks) + 1})[1] is True


@pytest.mark.parametrize(("redirect", "target"), sorted(FACTS["redirects"].items()))
def test_redirects_are_followed(env, redirect, target):
    text, error = env.execute("open_page", {"title": redirect})
    assert not error and text.startswith(f"{target} (redirected from {redirect!r}) - page 1 of ")


def test_excluded_pages_are_not_in_the_index_and_errors_are_results(env, sample):
    indexed = {page.title for page in read_records(IndexedPage, sample / "index" / "pages")}
    assert not indexed & {title for title in FACTS["excluded"] if title not in FACTS["redirects"]}
    assert not indexed & set(FACTS["skipped"])
    text, error = env.execute("open_page", {"title": "Heath Ledger"})
    assert error and "no page titled 'Heath Ledger'" in text
    assert env.execute("search", {"query": ""})[1] is True


def test_offline_runs_on_the_sample_are_real_and_graded(sample, env):
    trajectories = list(read_records(Trajectory, sample / "trajectories" / "trajectories"))
    assert len(trajectories) == QUESTIONS * len(FRAMEWORKS)
    kinds, honest_answers = set(), []
    for trajectory in trajectories:
        framework = get_framework(trajectory.framework)
        assert trajectory.outcome == match_answer(trajectory.final_answer, trajectory.answer, trajectory.aliases)
        injected = {turn.injected_error for turn in trajectory.turns} - {None}
        kinds |= injected
        # a run that gives up says so with no answer; one that answers submits what an observation showed
        if "premature_answer" not in injected and trajectory.final_answer not in (None, UNIDENTIFIED_ANSWER):
            assert trajectory.final_answer.casefold() in " ".join(t.observation or "" for t in trajectory.turns[:-1]).casefold()
            honest_answers.append(trajectory.outcome.correct)
        for turn in trajectory.turns:
            if turn.parse_error and "only repeats the prompt" in turn.parse_error:
                continue  # an answer the question already contains is a failed turn, recorded without its call
            assert framework.parse(framework.output_of(turn), f"call_{turn.index}").tool_call == turn.tool_call
            if turn.tool_call is not None:
                assert (turn.observation, turn.tool_error) == env.execute(turn.tool_call.name, turn.tool_call.arguments)
    assert kinds == set(ERROR_KINDS)
    assert sum(honest_answers) >= 0.5 * len(honest_answers) > 0  # no longer right by construction


def test_honest_turns_act_on_what_was_seen_and_look_up_no_numbered_key(sample):
    """What the turn critic asks of an honest turn: no search repeats an earlier query, every page it opens or
    looks in was named by the question or an earlier observation, no find_in_page text is a numbered infobox
    key ('constituency4') or a bare common word, and no reasoning names the gold answer before an observation
    (or the question) contained it."""
    trajectories = list(read_records(Trajectory, sample / "trajectories" / "trajectories"))
    answer_types = {q.question_id: q.path.answer_type for q in read_records(Question, sample / "questions" / "questions")}
    searches = lookups = answers = opened = 0
    for trajectory in trajectories:
        queries: set[str] = set()
        seen = normalize(trajectory.question)
        for turn in trajectory.turns:
            call = turn.tool_call
            if turn.injected_error is None:
                if not contains_phrase(seen, trajectory.answer):
                    assert not contains_phrase(normalize(turn.reasoning), trajectory.answer), turn.reasoning
                if call is not None and call.name == "search":
                    assert normalize(call.arguments["query"]) not in queries, call.arguments
                    searches += 1
                elif call is not None and call.name in ("open_page", "find_in_page"):
                    assert normalize(call.arguments["title"]) in seen, (trajectory.question, call.arguments)
                    opened += 1
                    if call.name == "find_in_page":
                        assert distinctive(call.arguments["text"]) and not re.fullmatch(r"[A-Za-z_ ]+\d+", call.arguments["text"])
                        lookups += 1
                elif call is not None and call.name == "answer" and trajectory.outcome.correct:
                    forms = surface_forms(trajectory.answer, answer_types[trajectory.question_id])
                    assert any(contains_phrase(seen, form) for form in forms), turn.reasoning
                    answers += 1
            if call is not None and call.name == "search":
                queries.add(normalize(call.arguments.get("query", "")))
            if turn.observation and not turn.tool_error:
                seen += " " + normalize(turn.observation)
    assert searches > 30 and lookups > 0 and opened > 100 and answers > 10


def test_the_searcher_reads_matching_results_first_rejects_misfits_and_backtracks_on_real_pages(sample):
    """On real pages: after a search that lists a page the question names, that page is the first opened; a
    candidate that does not fit the question's description is set aside with the clue it misses; several
    values of a row are ranked by the question's description."""
    trajectories = list(read_records(Trajectory, sample / "trajectories" / "trajectories"))
    done = Counter()
    for trajectory in trajectories:
        question = trajectory.question.casefold()
        honest = [t for t in trajectory.turns if t.injected_error is None and t.tool_call is not None]
        for turn, following in zip(honest, honest[1:], strict=False):
            read = {t.tool_call.arguments.get("title") for t in trajectory.turns[: following.index] if t.tool_call}
            start_search = "I need to identify" in turn.reasoning or "reformulate the query" in turn.reasoning
            if turn.tool_call.name != "search" or following.tool_call.name != "open_page" or not start_search:
                continue
            named = [t for t in result_titles(turn.observation or "")
                     if t not in read and len(t.split(" (")[0]) > 2 and re.search(rf"\b{re.escape(t.split(' (')[0].casefold())}\b", question)]
            if named:
                assert following.tool_call.arguments["title"] in named, (trajectory.question, named, following.tool_call)
                done["named first"] += 1
        reasoning = " ".join(t.reasoning for t in trajectory.turns if t.injected_error is None)
        done["rejected"] += "does not fit the question's description (" in reasoning
        done["ranked"] += "fits the question's description best" in reasoning
    assert all(done[k] > 0 for k in ("named first", "rejected", "ranked")), done


def test_question_periods_read_back_every_period_the_phrasing_writes():
    for year in (1209, 1901, 1933, 1950, 1965, 1969, 1987, 2000, 2024):
        for phrase, span in date_periods(year):
            assert question_periods(f"A novel published in {phrase} was written by a writer.") == [(phrase, span)]
