"""The offline critic on crafted turns: each programmatic check, information gain, soundness and signals."""

import datetime as dt

import pytest

from critic.checks import normalized_call, run_checks
from critic.evidence import Knowledge
from critic.gain import information_gain
from critic.scoring import judge_trajectory, judge_turns
from critic.signals import loss_mask, outcome_reward, turn_reward
from critic.soundness import claims_part, logical_soundness
from schemas.config import JudgeConfig
from schemas.critic import JudgedTrajectory
from schemas.questions import Path as GoldPath
from schemas.questions import PathHop, Question
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from schemas.wiki import Provenance

STAMP = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
QUESTION_TEXT = "In which city was the spouse of the director of Jaws born?"
SPIELBERG_RESULTS = (
    "Results for 'Jaws director':\n1. Jaws (film)\n   Jaws is a 1975 American thriller film directed by Steven "
    "Spielberg.\n2. Steven Spielberg\n   Steven Allan Spielberg (born December 18, 1946) is an American filmmaker."
)
SPIELBERG_PAGE = (
    "Steven Spielberg - page 1 of 1.\n\nBorn: December 18, 1946, Cincinnati, Ohio, U.S.\nSpouse: Amy Irving "
    "(m. 1985; div. 1989), Kate Capshaw (m. 1991)\nSteven Allan Spielberg is an American filmmaker. He directed Jaws "
    "(1975) and Jurassic Park (1993)."
)
CAPSHAW_PAGE = (
    "Kate Capshaw - page 1 of 1.\n\nBorn: November 3, 1953, Fort Worth, Texas, U.S.\nSpouse: Steven Spielberg "
    "(m. 1991)\nKate Capshaw is an American former actress."
)


def _hop(head, relation, tail=None, value=None, value_type="entity"):
    provenance = Provenance(page_id=1, page_title=head, revision_id=1, timestamp=STAMP)
    return PathHop(head=head, relation=relation, tail=tail, value=value, value_type=value_type, provenance=provenance)


QUESTION = Question(
    question_id="q-jaws", text=QUESTION_TEXT, answer="Fort Worth, Texas", aliases=["Fort Worth"],
    as_of=dt.date(2025, 6, 1), hops=2, engine="test",
    path=GoldPath(path_id="p", start="Steven Spielberg", nodes=["Steven Spielberg", "Kate Capshaw", "Fort Worth, Texas"],
                  hops=[_hop("Steven Spielberg", "spouse", "Kate Capshaw"),
                        _hop("Kate Capshaw", "birth_place", "Fort Worth, Texas")],
                  answer="Fort Worth, Texas", answer_type="entity", seed=0),
)


def turn(index, name=None, arguments=None, observation=None, reasoning="", **fields):
    call = ToolCall(call_id=f"c{index}", name=name, arguments=arguments or {}) if name else None
    if name == "answer" and "final_answer" not in fields:
        fields["final_answer"] = (arguments or {}).get("text")
    return Turn(index=index, reasoning=reasoning, tool_call=call, observation=observation, **fields)


def trajectory(turns, answer=None):
    final = answer if answer is not None else next((t.final_answer for t in reversed(turns) if t.final_answer), None)
    correct = final is not None and final.startswith("Fort Worth")
    return Trajectory(
        trajectory_id="t1", question_id=QUESTION.question_id, question=QUESTION_TEXT, answer=QUESTION.answer,
        aliases=QUESTION.aliases, as_of=QUESTION.as_of, framework="tagged", policy="test", engine="test", seed=0,
        turns=turns, final_answer=final, stop_reason="answered" if final else "max_turns",
        outcome=Outcome(exact_match=correct, f1=float(correct), correct=correct),
    )


def failed(checks):
    return [(c.name, c.kind) for c in checks if not c.passed]


SEARCH = turn(0, "search", {"query": "Jaws director"}, SPIELBERG_RESULTS, "I need the director of Jaws.")


# --- programmatic tool-call checks -----------------------------------------------------------------------

def test_a_good_call_passes_every_check():
    checks = run_checks(SEARCH, [])
    assert [c.name for c in checks] == [
        "parsed", "tool_exists", "arguments_valid", "ran_without_error", "not_repeated", "result_not_empty"]
    assert failed(checks) == []


def test_unparsed_output_fails_first_and_alone():
    checks = run_checks(turn(1, parse_error="no Action line found", raw_output="Acion: search"), [SEARCH])
    assert failed(checks) == [("parsed", "malformed_call")] and len(checks) == 1


def test_unknown_tool_and_invalid_arguments_are_malformed_calls():
    assert failed(run_checks(turn(1, "browse", {"url": "x"}, "Error: unknown tool", tool_error=True), [])) == [
        ("tool_exists", "malformed_call")]
    bad = run_checks(turn(1, "open_page", {"title": "Kate Capshaw", "page": 0}, "Error: ...", tool_error=True), [])
    assert failed(bad) == [("arguments_valid", "malformed_call")]
    assert "greater than or equal to 1" in bad[-1].detail and bad[-1].cap == 0.0


def test_a_call_that_errored_fails_ran_without_error():
    checks = run_checks(turn(1, "open_page", {"title": "Kate Capshow"}, "Error: no page titled 'Kate Capshow'.",
                             tool_error=True), [])
    assert failed(checks) == [("ran_without_error", "tool_error")]


@pytest.mark.parametrize("arguments", [
    {"query": "Jaws director"},
    {"query": "  jaws   DIRECTOR ", "top_k": 5},
    {"query": "director, Jaws"},
])
def test_a_repeat_is_found_after_normalisation(arguments):
    repeat = turn(1, "search", arguments, SPIELBERG_RESULTS)
    assert normalized_call(repeat.tool_call) == normalized_call(SEARCH.tool_call)
    assert failed(run_checks(repeat, [SEARCH])) == [("not_repeated", "repeated_call")]


def test_different_arguments_are_not_repeats_and_the_window_limits_repeats():
    assert failed(run_checks(turn(1, "search", {"query": "Jaws director", "top_k": 10}, SPIELBERG_RESULTS), [SEARCH])) == []
    page1 = turn(0, "open_page", {"title": "Steven Spielberg"}, SPIELBERG_PAGE)
    page2 = turn(1, "open_page", {"title": "Steven Spielberg", "page": 2}, SPIELBERG_PAGE)
    assert failed(run_checks(page2, [page1])) == []
    old_repeat = turn(5, "search", {"query": "Jaws director"}, SPIELBERG_RESULTS)
    filler = [turn(i, "search", {"query": f"query {i}"}, "Results for 'x':\n1. X\n   x") for i in range(1, 5)]
    assert failed(run_checks(old_repeat, [SEARCH, *filler], repeat_window=3)) == []
    assert failed(run_checks(old_repeat, [SEARCH, *filler])) == [("not_repeated", "repeated_call")]


@pytest.mark.parametrize("observation", [
    "No results for 'Jaws directorr'. Try other keywords.",
    "No occurrence of 'Cambridge' in 'Steven Spielberg'.",
    "",
    None,
])
def test_an_empty_result_fails(observation):
    checks = run_checks(turn(1, "find_in_page", {"title": "Steven Spielberg", "text": "Cambridge"}, observation), [])
    assert failed(checks) == [("result_not_empty", "empty_result")]


def test_the_answer_call_needs_no_result():
    answer = turn(3, "answer", {"text": "Fort Worth"}, None)
    assert failed(run_checks(answer, [SEARCH])) == []


# --- information gain ------------------------------------------------------------------------------------

def _knowledge_after(*turns):
    knowledge = Knowledge.start(QUESTION_TEXT, QUESTION)
    for t in turns:
        knowledge.add(t)
    return knowledge


def test_gold_path_evidence_is_gain_and_seeing_it_again_is_not():
    open_page = turn(1, "open_page", {"title": "Steven Spielberg"}, SPIELBERG_PAGE, "Open his page.")
    first = information_gain(open_page, _knowledge_after(SEARCH))
    assert first.score >= 0.6 and "Steven Spielberg --spouse--> Kate Capshaw" in first.new_units
    again = information_gain(turn(2, "find_in_page", {"title": "Steven Spielberg", "text": "Spouse"},
                                  "1 match(es) of 'Spouse' in 'Steven Spielberg':\n[page 1] Spouse: Amy Irving "
                                  "(m. 1985; div. 1989), Kate Capshaw (m. 1991)"),
                             _knowledge_after(SEARCH, open_page))
    assert again.score < 0.1 and again.new_units == ()


def test_useful_progress_off_the_gold_path_scores_above_zero():
    off_path = turn(1, "open_page", {"title": "Jaws (film)"},
                    "Jaws (film) - page 1 of 1.\n\nDirected by: Steven Spielberg\nJaws is a 1975 thriller film about a "
                    "great white shark terrorising Amity Island, based on the novel by Peter Benchley.")
    gain = information_gain(off_path, _knowledge_after(SEARCH))
    assert gain.new_units == () and gain.score >= JudgeConfig().thresholds["information_gain"]


def test_a_detour_to_an_unrelated_page_scores_zero():
    detour = turn(1, "open_page", {"title": "Mount Everest"},
                  "Mount Everest - page 1 of 1.\n\nMount Everest is Earth's highest mountain above sea level, in the "
                  "Mahalangur Himal sub-range of the Himalayas.", "Perhaps Mount Everest is related; let me open it.")
    gain = information_gain(detour, _knowledge_after(SEARCH))
    assert gain.score == 0.0 and gain.relevance == 0.0


def test_errors_and_empty_results_add_no_information():
    error = turn(1, "open_page", {"title": "Kate Capshow"}, "Error: no page titled 'Kate Capshow'.", tool_error=True)
    empty = turn(1, "find_in_page", {"title": "Steven Spielberg", "text": "Cambridge"},
                 "No occurrence of 'Cambridge' in 'Steven Spielberg'.")
    assert information_gain(error, _knowledge_after(SEARCH)).score == 0.0
    assert information_gain(empty, _knowledge_after(SEARCH)).score == 0.0


# --- logical soundness -----------------------------------------------------------------------------------

def _soundness(t, *earlier, answer=None):
    return logical_soundness(t, trajectory([*earlier, t], answer), QUESTION, _knowledge_after(*earlier))


def test_claims_from_earlier_observations_are_sound_and_invented_ones_are_not():
    opened = turn(1, "open_page", {"title": "Steven Spielberg"}, SPIELBERG_PAGE)
    sound = turn(2, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE,
                 "Spielberg married Kate Capshaw in 1991. I will open her page.")
    invented = turn(2, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE,
                    "Spielberg married Kate Capshaw in 1991; she was born in Dallas. I will open her page.")
    assert _soundness(sound, SEARCH, opened).score == 1.0
    result = _soundness(invented, SEARCH, opened)
    assert result.score < 0.5 and result.kinds == ("unsupported_claim",) and "Dallas" in result.unsupported


def test_plans_hedges_and_negations_assert_nothing():
    for reasoning in ("Perhaps Kate Capshaw was born in Dallas; I will check her page.",
                      "The results do not list Kate Capshaw. I will open her page.",
                      "Was Kate Capshaw born in Dallas?"):
        t = turn(2, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE, reasoning)
        assert _soundness(t, SEARCH).kinds == (), reasoning


def test_names_known_separately_but_never_related_are_an_unsupported_relation():
    detour = turn(1, "open_page", {"title": "Jaws (film)"}, "Jaws (film) - page 1 of 1.\n\nJaws is set on Amity Island.")
    claim = turn(2, "search", {"query": "Amity Island"}, "Results for 'Amity Island':\n1. Amity Island\n   A place.",
                 "Steven Spielberg was born on Amity Island.")
    result = _soundness(claim, SEARCH, detour)
    assert result.kinds == ("unsupported_claim",) and any("in this relation" in u for u in result.unsupported)


def test_a_value_picked_from_a_listed_row_needs_a_reason():
    cast = turn(0, "open_page", {"title": "Jaws (film)"}, "Jaws (film) - page 1 of 1.\n\nStarring: Roy Scheider, "
                "Robert Shaw, Richard Dreyfuss\nCountry: United States")
    knowledge = _knowledge_after(SEARCH, cast)
    picked = claims_part("The starring of Jaws is Robert Shaw. I will open his page.", knowledge)
    assert picked.kind == "unsupported_claim" and "picked from a list" in picked.detail
    reasoned = claims_part("Robert Shaw is the one the question means, since his page answers the next part.", knowledge)
    assert reasoned.kind is None
    assert claims_part("The country of Jaws is United States.", knowledge).kind is None  # a row with one value


def test_an_iso_date_claim_is_supported_by_its_spelled_form():
    opened = turn(1, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE)
    t = turn(2, "answer", {"text": "Fort Worth"}, None, "Kate Capshaw, born 1953-11-03, was born in Fort Worth.")
    assert _soundness(t, SEARCH, opened).score == 1.0


def test_an_action_that_does_not_follow_its_reasoning_is_unsound():
    t = turn(1, "search", {"query": "Jurassic Park sequels"}, "Results for 'x':\n1. X\n   x",
             "Steven Spielberg directed Jaws. I will now give the answer.")
    assert _soundness(t, SEARCH).kinds == ("unmotivated_action",)
    unexplained = turn(1, "open_page", {"title": "Mount Everest"}, "Mount Everest - page 1 of 1.\n\nA mountain.",
                       "Steven Spielberg directed Jaws. I will open her page.")
    assert _soundness(unexplained, SEARCH).kinds == ("unmotivated_action",)


def test_final_answers_must_be_right_and_shown():
    opened = turn(1, "open_page", {"title": "Steven Spielberg"}, SPIELBERG_PAGE)
    read = turn(2, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE)
    right = turn(3, "answer", {"text": "Fort Worth, Texas"}, None, "She was born in Fort Worth, Texas.")
    assert _soundness(right, SEARCH, opened, read).score == 1.0
    guess = turn(2, "answer", {"text": "Fort Worth, Texas"}, None, "The answer is probably Fort Worth, Texas.")
    assert _soundness(guess, SEARCH, opened).kinds == ("unsupported_claim",)
    wrong = turn(2, "answer", {"text": "Cincinnati"}, None, "The answer is Cincinnati.")
    assert _soundness(wrong, SEARCH, opened).kinds == ("wrong_answer",)
    failed_call = turn(2, "answer", {"answer": "Cincinnati"}, "Error: invalid arguments", tool_error=True)
    assert _soundness(failed_call, SEARCH, opened).score == 1.0


# --- verdicts and training signals -----------------------------------------------------------------------

def _run():
    return [
        SEARCH,
        turn(1, "open_page", {"title": "Steven Spielberg"}, SPIELBERG_PAGE, "Steven Spielberg directed Jaws. I will open his page."),
        turn(2, "open_page", {"title": "steven  spielberg"}, SPIELBERG_PAGE, "I will open Steven Spielberg again."),
        turn(3, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE, "His second wife is Kate Capshaw. I will open her page."),
        turn(4, "answer", {"text": "Fort Worth, Texas"}, None, "Kate Capshaw was born in Fort Worth, Texas."),
    ]


def test_each_turn_gets_three_scores_a_verdict_and_kinds():
    judgements = judge_turns(trajectory(_run()), QUESTION, JudgeConfig())
    assert [j.turn_index for j in judgements] == [0, 1, 2, 3, 4]
    assert [j.verdict for j in judgements] == [True, True, False, True, True]
    repeated = judgements[2]
    assert repeated.failure_kinds == ["repeated_call"] and "not_repeated" in repeated.failed_checks
    assert not repeated.tool_accuracy.passed and not repeated.information_gain.passed
    for j in judgements:
        for criterion in (j.tool_accuracy, j.information_gain, j.logical_soundness):
            assert 0.0 <= criterion.score <= 1.0 and criterion.rationale
        assert j.engine == "offline" and j.trajectory_id == "t1"


def test_mask_mode_masks_failed_turns_and_penalty_mode_keeps_them_with_a_negative_reward():
    masked = judge_turns(trajectory(_run()), QUESTION, JudgeConfig(failed_turns="mask", loss_policy="verdict"))
    penalised = judge_turns(trajectory(_run()), QUESTION, JudgeConfig(failed_turns="penalty", failed_turn_reward=-0.5,
                                                                      loss_policy="verdict"))
    assert [j.loss_mask for j in masked] == [1, 1, 0, 1, 1]
    assert [j.loss_mask for j in penalised] == [1, 1, 1, 1, 1]
    assert masked[2].reward == -1.0 and penalised[2].reward == -0.5
    assert all(0.0 < j.reward <= 1.0 for j in masked if j.verdict)


def test_critical_policy_trains_only_the_turns_that_moved_the_run_toward_the_answer():
    judgements = judge_turns(trajectory(_run()), QUESTION, JudgeConfig())  # `critical` is the default
    assert [j.critical for j in judgements] == [False, True, False, True, True]
    assert judgements[1].critical_reasons == ["retrieves Steven Spielberg --spouse--> Kate Capshaw"]
    assert judgements[3].critical_reasons == ["retrieves Kate Capshaw --birth_place--> Fort Worth, Texas"]
    assert judgements[4].critical_reasons == ["final answer"]
    assert [j.loss_mask for j in judgements] == [0, 1, 0, 1, 1]  # the search stays in context, loss 0
    graded = judge_turns(trajectory(_run()), QUESTION, JudgeConfig(loss_policy="verdict"))
    assert [j.reward for j in judgements] == [j.reward for j in graded]  # RL rewards keep their graded values
    penalised = judge_turns(trajectory(_run()), QUESTION, JudgeConfig(failed_turns="penalty"))
    assert [j.loss_mask for j in penalised] == [0, 1, 1, 1, 1]  # a failed turn is still penalised
    restated = _run()[:4] + [turn(4, "open_page", {"title": "Fort Worth, Texas"}, "Fort Worth - page 1 of 1.\n\n"
                                  "Fort Worth is a city in Texas.", "Kate Capshaw is his wife. I will open Fort Worth.")]
    assert not any(j.critical for j in judge_turns(trajectory(restated), QUESTION, JudgeConfig()))  # no answer given


def test_a_run_that_ends_on_a_wrong_answer_has_no_critical_turn():
    """Every turn of a run that missed the answer led away from it: none trains, whatever it retrieved."""
    wrong = _run()[:4] + [turn(4, "answer", {"text": "Dallas"}, None, "The answer is Dallas.")]
    judgements = judge_turns(trajectory(wrong), QUESTION, JudgeConfig())
    assert judgements[1].verdict and not any(j.critical or j.loss_mask for j in judgements)


def test_a_turn_naming_what_no_observation_showed_fails_as_ungrounded():
    """Opening the answer's page by name before any result listed it is knowledge only the gold path has."""
    peek = [SEARCH, turn(1, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE, "I will open Kate Capshaw.")]
    judgements = judge_turns(trajectory(peek), QUESTION, JudgeConfig())
    assert "ungrounded" in judgements[1].failure_kinds and not judgements[1].logical_soundness.passed
    assert "Kate Capshaw" in judgements[1].logical_soundness.rationale
    assert "ungrounded" not in judge_turns(trajectory(_run()), QUESTION, JudgeConfig())[3].failure_kinds


def test_a_check_of_a_fact_already_retrieved_is_context_and_its_statement_is_not_new_later():
    check = turn(2, "find_in_page", {"title": "Kate Capshaw", "text": "Steven Spielberg"},
                 "1 match(es) of 'Steven Spielberg' in 'Kate Capshaw':\n[page 1] Spouse: Steven Spielberg (m. 1991)",
                 "The infobox of Steven Spielberg lists Kate Capshaw as his spouse. To be sure, I will check that "
                 "her page names him.")
    run = [SEARCH, _run()[1], check,
           turn(3, "open_page", {"title": "Kate Capshaw"}, CAPSHAW_PAGE, "Kate Capshaw is his wife. I will open her page."),
           turn(4, "answer", {"text": "Fort Worth, Texas"}, None, "Kate Capshaw was born in Fort Worth, Texas.")]
    judgements = judge_turns(trajectory(run), QUESTION, JudgeConfig())
    assert judgements[2].verdict and not judgements[2].critical  # passes, stays in context with loss 0
    assert judgements[3].critical_reasons == ["retrieves Kate Capshaw --birth_place--> Fort Worth, Texas"]
    assert [j.loss_mask for j in judgements] == [0, 1, 0, 1, 1]
    unchecked = judge_turns(trajectory(run[:2] + run[3:]), QUESTION, JudgeConfig())  # the same without the check
    assert unchecked[2].critical_reasons == judgements[3].critical_reasons


def test_a_result_sharing_one_common_word_with_the_question_adds_nothing_of_the_chain():
    knowledge = Knowledge.start(QUESTION_TEXT, QUESTION)
    for earlier in _run()[:2]:
        knowledge.add(earlier)
    lookup = turn(2, "search", {"query": "Steven Spielberg"},
                  "Results for 'Steven Spielberg':\n1. Steven Spielberg\n   Steven Allan Spielberg is an American "
                  "filmmaker.\n2. Chicago\n   In 1850 the city council of Chicago approved plan number 0 for new "
                  "streets and bridges near the lake.", "I will search for Steven Spielberg.")
    gain = information_gain(lookup, knowledge)  # "city" is the question's word, but nothing here is its chain
    assert not gain.new_units and gain.score < JudgeConfig().thresholds["information_gain"], gain


def test_reward_is_the_weighted_mean_of_scores_and_outcome_reward_follows_correctness():
    scores = {"tool_accuracy": 1.0, "information_gain": 0.5, "logical_soundness": 0.0}
    config = JudgeConfig(weights={"tool_accuracy": 2.0, "information_gain": 2.0, "logical_soundness": 0.0})
    assert turn_reward(scores, True, config) == 0.75
    assert turn_reward(scores, False, config) == config.failed_turn_reward
    assert loss_mask(False, True, JudgeConfig()) == 0 and loss_mask(True, True, JudgeConfig()) == 1
    assert loss_mask(True, False, JudgeConfig()) == 0 and loss_mask(True, False, JudgeConfig(loss_policy="verdict")) == 1
    assert outcome_reward(trajectory(_run()), JudgeConfig()) == 1.0
    assert outcome_reward(trajectory(_run()[:2]), JudgeConfig(wrong_outcome_reward=-0.25)) == -0.25
    judged = judge_trajectory(trajectory(_run()), QUESTION, JudgeConfig())
    assert isinstance(judged, JudgedTrajectory) and judged.outcome_reward == 1.0


def test_thresholds_decide_the_verdict_and_are_validated():
    lenient = JudgeConfig(thresholds={"tool_accuracy": 0.05, "information_gain": 0.0, "logical_soundness": 0.5})
    assert judge_turns(trajectory(_run()), QUESTION, lenient)[2].verdict
    with pytest.raises(ValueError):
        JudgeConfig(thresholds={"tool_accuracy": 0.5})


def test_judge_config_comes_from_a_toml_file_and_flags(tmp_path):
    import argparse

    from cli.judge import add_judge_arguments, judge_config_from_args
    from ground.errors import UserError

    parser = argparse.ArgumentParser()
    add_judge_arguments(parser)
    dataset_style = tmp_path / "dataset.toml"
    dataset_style.write_text('[judge]\nfailed_turns = "penalty"\n[judge.thresholds]\ninformation_gain = 0.3\n'
                             '[judge.judge]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n')
    config = judge_config_from_args(parser.parse_args(["--config", str(dataset_style), "--threshold",
                                                       "tool_accuracy=0.7"]))
    assert config.failed_turns == "penalty" and config.judge.model == "m"
    assert config.thresholds == {"tool_accuracy": 0.7, "information_gain": 0.3, "logical_soundness": 0.5}
    top_level = tmp_path / "judge.toml"
    top_level.write_text('failed_turn_reward = -2.0\n[judge]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "n"\n')
    config = judge_config_from_args(parser.parse_args(["--config", str(top_level), "--judge-concurrency", "3"]))
    assert config.failed_turn_reward == -2.0 and config.judge.model == "n" and config.judge.max_concurrency == 3
    with pytest.raises(UserError):
        judge_config_from_args(parser.parse_args(["--weight", "tool_accuracy=heavy"]))
