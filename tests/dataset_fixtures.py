"""Hand-made canonical records for the stage 5 tests: questions and judged trajectories of every turn kind."""

from __future__ import annotations

import datetime as dt

from schemas.critic import CriterionScore, JudgedTrajectory, TurnJudgement
from schemas.evaluation import OutputItem, QuestionResult, RolloutResult
from schemas.questions import Path, PathHop, Question
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from schemas.wiki import Provenance

AS_OF = dt.date(2025, 6, 1)


def make_question(index: int, hops: int = 2) -> Question:
    provenance = Provenance(
        page_id=100 + index,
        page_title=f"Film {index}",
        revision_id=9000 + index,
        timestamp=dt.datetime(2025, 3, 1, tzinfo=dt.UTC),
        infobox="film",
        parameter="director",
    )
    nodes = [f"Film {index}", *(f"Person {index}.{h}" for h in range(1, hops + 1))]
    path_hops = [
        PathHop(
            head=nodes[h],
            relation="director" if h == 0 else "spouse",
            tail=nodes[h + 1],
            value_type="entity",
            provenance=provenance,
            in_window=h == 0,
        )
        for h in range(hops)
    ]
    path = Path(
        path_id=f"p{index}",
        start=nodes[0],
        nodes=nodes,
        hops=path_hops,
        answer=nodes[-1],
        answer_type="entity",
        seed=0,
        conditions=["unique_answer"],
    )
    return Question(
        question_id=f"q{index:03d}",
        text=f"Who is the spouse of the director of the film numbered {index}?",
        answer=nodes[-1],
        aliases=[f"P. {index}"],
        as_of=AS_OF,
        hops=hops,
        obfuscations=["type"],
        path=path,
        engine="template",
    )


def _judgement(trajectory_id: str, turn_index: int, passed: bool) -> TurnJudgement:
    score = CriterionScore(score=1.0 if passed else 0.0, passed=passed, rationale="fixture")
    return TurnJudgement(
        trajectory_id=trajectory_id,
        turn_index=turn_index,
        tool_accuracy=score,
        information_gain=CriterionScore(score=0.7, passed=True),
        logical_soundness=score,
        failed_checks=[] if passed else ["repeated_call"],
        verdict=passed,
        reward=1.0 if passed else -1.0,
        loss_mask=int(passed),
        engine="offline",
    )


def make_judged(
    question: Question,
    framework: str = "tagged",
    rollout: int = 0,
    *,
    finished: bool = True,
    unparsed: bool = True,
) -> JudgedTrajectory:
    """A trajectory with search/open_page calls (tricky text), an unparsed turn, and a final answer."""
    trajectory_id = f"{question.question_id}-{framework}-{rollout}"
    turns = [
        Turn(
            index=0,
            reasoning="Start by finding the film.\nIt is numbered.",
            tool_call=ToolCall(
                call_id="c0", name="search", arguments={"query": 'film "numbered" ü', "top_k": 5}
            ),
            observation="1. Film 0 — a film\n2. <b>Other</b> {not json}",
        ),
        Turn(
            index=1,
            reasoning="Open it.",
            tool_call=ToolCall(
                call_id="c1", name="open_page", arguments={"title": question.path.start, "page": 1}
            ),
            observation="Directed by Person.\n\nChunk 1/1",
        ),
        Turn(
            index=2,
            reasoning="Search again (redundant).",
            tool_call=ToolCall(
                call_id="c2", name="search", arguments={"query": 'film "numbered" ü', "top_k": 5}
            ),
            observation="1. Film 0 — a film",
        ),
    ]
    if unparsed:
        turns.append(
            Turn(
                index=len(turns),
                raw_output="Thought: hmm\nAction: search[",
                parse_error="no Action Input",
                observation="Error: could not parse a tool call from your output.",
            )
        )
    turns.append(
        Turn(
            index=len(turns),
            reasoning="Find the spouse.",
            tool_call=ToolCall(
                call_id=f"c{len(turns)}",
                name="find_in_page",
                arguments={"title": question.path.nodes[1], "text": "spouse"},
            ),
            observation=f"Spouse: {question.answer}",
            tool_error=False,
        )
    )
    if finished:
        turns.append(
            Turn(
                index=len(turns),
                reasoning="The spouse is known.",
                final_answer=question.answer,
                tool_call=ToolCall(
                    call_id=f"c{len(turns)}", name="answer", arguments={"text": question.answer}
                ),
            )
        )
    passed = {0: True, 1: True, 2: False}
    judgements = [
        _judgement(trajectory_id, t.index, passed.get(t.index, t.tool_call is not None)) for t in turns
    ]
    trajectory = Trajectory(
        trajectory_id=trajectory_id,
        question_id=question.question_id,
        question=question.text,
        answer=question.answer,
        aliases=question.aliases,
        as_of=question.as_of,
        framework=framework,
        policy="offline-scripted",
        engine="offline",
        seed=0,
        rollout=rollout,
        turns=turns,
        final_answer=question.answer if finished else None,
        stop_reason="answered" if finished else "max_turns",
        outcome=Outcome(exact_match=finished, f1=1.0 if finished else 0.0, correct=finished),
        environment="bm25:test",
    )
    return JudgedTrajectory(
        trajectory=trajectory, judgements=judgements, outcome_reward=1.0 if finished else 0.0
    )


def make_result(question: Question, correct: list[bool]) -> QuestionResult:
    """The difficulty stage's record of a question whose rollouts were graded `correct`."""
    rollouts = [
        RolloutResult(rollout=i, tool_call_counts={"search": 1}, status="completed", retrieved_docids=["1"],
                      result=[OutputItem(output=question.answer if ok else "wrong")],
                      final_answer=question.answer if ok else "wrong", correct=ok, f1=float(ok), turns=2, searches=1)
        for i, ok in enumerate(correct)
    ]
    return QuestionResult(query_id=question.question_id, query=question.text, hops=question.hops, shape="chain",
                          final_relation=question.path.hops[-1].relation, evidence_docids=["1"], gold_docids=["1"],
                          policy="scripted", framework="function_calling", engine="offline", rollouts=rollouts,
                          pass_rate=sum(correct) / len(correct))


def write_upstream(out, questions: list[Question], judged: list[JudgedTrajectory],
                   correct: dict[str, list[bool]] | None = None) -> dict:
    """Finished `questions`, `index`, `difficulty` and `judge` stage folders holding the given records (no real
    stages). A question's difficulty rollouts are `correct[question_id]`, by default one right and one wrong."""
    from ground.io import write_records
    from ground.stage import begin_stage
    from pipeline.dataset import stage_dirs

    dirs = stage_dirs(out)
    results = [make_result(q, (correct or {}).get(q.question_id, [True, False])) for q in questions]
    for stage, table, model, records, engines in (
        ("questions", "questions", Question, questions, {"writer": "fixture"}),
        ("index", "pages", Question, [], {"writer": "fixture"}),
        ("difficulty", "results", QuestionResult, results, {"policy": "offline:function_calling"}),
        ("judge", "judged", JudgedTrajectory, judged, {"writer": "fixture"}),
    ):
        run = begin_stage(stage, dirs[stage], {"fixture": len(records)})
        write_records(model, records, dirs[stage] / table / "part-00000.parquet")
        run.finish({"kept": len(records)}, {table: [f"{table}/part-00000.parquet"]}, engines=engines)
    return dirs


def sample_records(count: int = 12) -> tuple[list[Question], list[JudgedTrajectory]]:
    """Questions of 2-4 hops and, per question, trajectories that answered, failed and ran out of turns."""
    questions = [make_question(i, hops=2 + i % 3) for i in range(count)]
    judged = []
    for question in questions:
        judged.append(make_judged(question, "tagged"))
        react = make_judged(question, "react", unparsed=False)
        # its own words: without them its conversation would equal the tagged run's once the SFT renders
        # leave the tagged run's unparsed turn out, and the dataset stage would skip it as a duplicate
        react.trajectory.turns[2].reasoning = "Search once more to be sure."
        judged.append(react)
        judged.append(make_judged(question, "function_calling", finished=False))
    return questions, judged


def build_fixture_dataset(out):
    """A dataset folder built by the real dataset stage from the hand-made records; returns its path."""
    from pipeline.dataset import build_dataset
    from schemas.config import DatasetConfig

    questions, judged = sample_records()
    dirs = write_upstream(out, questions, judged)
    build_dataset(DatasetConfig(out=str(out), test_fraction=0.25, max_rows_per_shard=7), dirs)
    return dirs["dataset"]
