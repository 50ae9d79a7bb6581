"""Reviewer rules: per-turn labels for trajectories nobody tampered with (the natural labelled set).

The rules are written to be read and checked by a person, and share no code with the critic's scoring
(only the answer matcher every stage uses, and the stop-word table's base words; their extension is their
own, `question_words`, not the critic's `agent_text`), so the critic measured on them is not graded against itself.
In order, the first of rules 1-5 that fires decides the tool criterion; the gain and reasoning rules add to
it:

1. malformed: the output could not be parsed, or the environment rejected the arguments.
2. not sensible: a call no reasonable searcher would make: a search whose query holds no word outside
   stop words, or copies our own instructions ("You are a research agent", "Error: ..."; the whole
   question as a query is a plain first search, judged by what it finds); or a page opened (or searched in) that does not exist and that neither the question nor
   an earlier result (an error or an empty result is none) named: a title made up, not read ("Jaws" shown
   counts for "Jaws (film)"; a misspelt shown name, each word of three letters or more beginning like a
   shown word, "Christopher Nolann", is a slip: a tool error). An existing page nobody named is a detour
   or a find (rule 6), not this.
3. tool error: the environment answered with an error (an unknown page, a page number past the end).
4. repeat: the same tool with the same arguments (case, spacing and search word order ignored) as an
   earlier call.
5. empty: the tool found nothing ("No results", "No occurrence").
6. nothing new of the chain (information gain): a non-answer turn whose result shows no name of the gold
   path (an entity, or a hop's value in any of its spellings) that the question and earlier results did not
   show, lists or opens no path entity's page for the first time, and puts no hop's head and value on one
   line for the first time (a page the question names, "Jaws" for "Jaws (film)", counts as a path page).
   It is a detour when the result names no path entity at all, else redundant.
7. unsupported claim (soundness): a sentence that asserts (no plan, question or hedge) a name or number
   that neither the question nor an earlier result contains; or two names that no single line of the
   question or an earlier result (a search hit with its snippet, a line of the page read) shows together (a
   value credited to the wrong entity); or that picks one value from a row an earlier result listed with
   several values ("Starring: A B, C D, E F": two or more names of two or more words) without saying why
   (no "because", "since", "means", "fits", "matches", "the one", nor an ordinal that the row's order or
   dates settle: "second", "latest", "only"); or a correct final answer no earlier result showed (a guess).
8. wrong answer (soundness): a final answer that does not match the gold answer or its aliases.
9. unmotivated action (soundness): a call (not an answer) that does not follow from its reasoning: the
   reasoning plans a step ("I will", "let me", "I need", ...) and the call's arguments share no word of three
   or more letters with it (unless the plan names the tool called and the arguments name something the
   question or a result named: "I will open it", "I will open the film's page"), or the tool the plan names ("I will search", "let me open", "I will look for") is not
   the one called; or the reasoning says it will give the answer, or states the answer (a value of at
   most six words: "The answer is 1943.") and plans no step, while it calls another tool; or the
   reasoning plans no step and the arguments share no such word with it, the question or an earlier
   result (a call from nowhere).
10. unsound reasoning (soundness): the reasoning contradicts what the agent read or said: it gives a row of
   a page it read another value ("the birth place of X is Y", "X's spouse is Y", "X was born in/on Y"
   while X's page showed "Birth place: Z"); or it states an answer ("the answer is X", "\\boxed{X}")
   other than one it stated earlier with no result in between, or two different answers in one turn.
A failed call (rules 1 and 3-5, or rule 2 when it errs or finds nothing) also fails information gain:
nothing was learned.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata

from knowledge.lexicon import stop_words
from schemas.questions import Question
from schemas.trajectory import Trajectory, Turn
from synth.matching import match_answer

_PLAN = re.compile(r"\b(i will|i'll|i need|let me|i should|to find|to be sure|in case|before answering|"
                   r"i could not|does not|do not|not|no|whether|perhaps|maybe|might)\b", re.I)
_REASON = re.compile(r"\b(because|since|means|fits|matches|the one|so that|which is why|first|second|third|last|latest|current|former|earlier|later|only|eldest|youngest)\b", re.I)
_CAPITALISED = re.compile(r"\b[A-Z][\w'.-]*(?:\s+(?:of|the|de|von|van|and)?\s*[A-Z][\w'.-]*)*|\b\d[\d,.]*\d\b|\b\d\b")
_ROW = re.compile(r"^\s*(?:\[page \d+\] )?([A-Z][\w ]{0,38}\w): (.+)$", re.M)
_TITLE = re.compile(r"^\d+\. (.+)$", re.M)
_STEP = re.compile(r"\b(i will|i'll|let me|i need|i should|next i)\b", re.I)
_WILL_ANSWER = re.compile(r"\b(?:i will|i'll|let me) (?:now )?(?:give|submit|state|provide)\b.{0,20}\banswer\b", re.I)
_PLANNED_TOOL = re.compile(r"\b(?:i will|i'll|let me|i need to|i should|next i)\s+(?:now\s+|first\s+|try to\s+)?"
                           r"(search|open|read|look\s+for)\b", re.I)
_TOOL_VERBS = {"search": {"search"}, "open_page": {"open", "read"}, "find_in_page": {"look for", "search", "open", "read"}}
_ANSWER_STATED = re.compile(r"\bthe (?:final )?answer is (?!in\b|on\b|at\b|not\b|probably\b|likely\b)([^.;:\n]+?)"
                            r"(?:,\s*because\b|\.(?:\s|$)|[;:\n]|$)", re.I)
_BOXED = re.compile(r"\\boxed\{([^}]*)\}")
_LABEL_OF = re.compile(r"\b[Tt]he ([a-z][a-z ]{1,30}?) of ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*)*) (?:is|was) ([^.;]+)")
_POSSESSIVE = re.compile(r"\b([A-Z][\w.-]*(?: [A-Z][\w.-]*)*)['’]s ([a-z][a-z ]{1,30}?) (?:is|was) ([^.;]+)")
_BORN = re.compile(r"\b([A-Z][\w.-]*(?: [A-Z][\w.-]*)*) was born (on|in) ([^.;]+?)(?=\.\s|[.;]|$)")
_STOP_WORDS = stop_words("question_words")
_OUR_WORDS = re.compile(r"\byou are an? [\w-]+ (?:agent|assistant)\b|\bresearch agent\b|\bone tool at a time\b|"
                        r"\bError:|could not be parsed", re.I)
_EMPTY = re.compile(r"^(No results|No occurrence)", re.I)
_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
_OPENERS = {"The", "I", "So", "It", "Its", "This", "That", "A", "An", "Now", "Before", "To", "Then", "Of", "He",
            "She", "They", "There", "Page", "First", "Results", "Final", "Let", "You", "Your", "We", "Our", "My",
            "His", "Her", "Their", "These", "Those", "Here"}  # capitalised words that are not names


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return " " + " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split()) + " "


def _has(haystack: str, name: str) -> bool:
    needle = _plain(name).strip()
    return bool(needle) and f" {needle} " in haystack


def _spellings(value: str, value_type: str) -> list[str]:
    """A hop value as pages write it: an ISO date spelled out, a number with separators, a title's bare name."""
    forms = [value, re.sub(r"\s*\([^)]*\)$", "", value), value.split(",")[0]]
    if value_type == "date" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        day = dt.date.fromisoformat(value)
        forms += [f"{day.day} {day:%B} {day.year}", f"{day:%B} {day.day}, {day.year}"]
    if value_type in ("number", "quantity"):
        try:
            forms.append(f"{float(value):,.0f}")
        except ValueError:
            pass
    return [f for f in dict.fromkeys(forms) if f.strip()]


def _call_key(turn: Turn) -> str:
    call = turn.tool_call
    arguments = {k: " ".join(str(v).lower().split()) for k, v in sorted(call.arguments.items())}
    if call.name == "search" and "query" in arguments:
        arguments["query"] = " ".join(sorted(set(arguments["query"].split())))
    if call.name == "open_page":
        arguments.setdefault("page", "1")
    return f"{call.name} {arguments}"


def label_turn(question: Question, trajectory: Trajectory, position: int) -> tuple[dict[str, bool], list[str]]:
    """(passes per criterion, failure kinds) of one turn by the rules above."""
    turn = trajectory.turns[position]
    earlier = trajectory.turns[:position]
    seen = _plain(" ".join([question.text, *(t.observation or "" for t in earlier if not t.tool_error)]))
    kinds: list[str] = []
    answer_turn = turn.tool_call is not None and turn.tool_call.name == "answer" or (
        turn.tool_call is None and turn.final_answer is not None)
    observation = turn.observation or ""
    if turn.parse_error or (turn.tool_call is None and turn.final_answer is None) or (
            turn.tool_error and observation.startswith("Error: invalid") or "not valid JSON" in observation):
        kinds.append("malformed_call")
    elif turn.tool_call is not None and not answer_turn and _not_sensible(question, turn, earlier):
        kinds.append("not_sensible")
    elif turn.tool_error:
        kinds.append("tool_error")
    elif turn.tool_call is not None and any(
            t.tool_call is not None and not t.parse_error and _call_key(t) == _call_key(turn) for t in earlier):
        kinds.append("repeated_call")
    elif not answer_turn and _EMPTY.match(observation):
        kinds.append("empty_result")
    tool_failed = bool(kinds)
    came_back_empty = turn.tool_error or (not answer_turn and bool(_EMPTY.match(observation)))
    learned_nothing = (tool_failed and kinds != ["not_sensible"]) or came_back_empty
    gains = not learned_nothing and (answer_turn or _adds_to_chain(question, turn, earlier, seen))
    if not tool_failed and not gains:
        kinds.append("off_path_detour" if not _names_path(question, _plain(observation)) else "redundant_turn")
    answer = turn.final_answer if answer_turn else None
    if answer_turn and answer is None and turn.tool_call is not None:
        answer = str(turn.tool_call.arguments.get("text", ""))
    if answer is not None and not tool_failed:
        if not match_answer(answer, question.answer, question.aliases).correct:
            kinds.append("wrong_answer")
        elif not any(_has(seen, f) for f in _spellings(question.answer, question.path.answer_type) + question.aliases):
            kinds.append("unsupported_claim")
    if "unsupported_claim" not in kinds and _unsupported(turn.reasoning, seen, earlier, question.text):
        kinds.append("unsupported_claim")
    if not answer_turn and turn.tool_call is not None and not turn.parse_error and _unmotivated(turn, seen):
        kinds.append("unmotivated_action")
    if _contradicts_a_row(turn.reasoning, earlier) or _changes_its_answer(turn, earlier):
        kinds.append("unsound_reasoning")
    passes = {
        "tool_accuracy": not tool_failed,
        "information_gain": gains,
        "logical_soundness": not {"unsupported_claim", "wrong_answer", "unmotivated_action",
                                  "unsound_reasoning"} & set(kinds),
    }
    return passes, kinds


def _not_sensible(question: Question, turn: Turn, earlier: list[Turn]) -> bool:
    """Rule 2: a query without content, an echo of our instructions, or a made-up title."""
    call = turn.tool_call
    if call.name == "search":
        query = str(call.arguments.get("query", ""))
        words = [w for w in _plain(query).split() if w not in _STOP_WORDS]
        return not words or bool(_OUR_WORDS.search(query))
    if call.name not in ("open_page", "find_in_page"):
        return False
    title = re.sub(r"\s*\([^)]*\)$", "", str(call.arguments.get("title", "")).strip())
    results = [t.observation or "" for t in earlier if not t.tool_error and not _EMPTY.match(t.observation or "")]
    shown = _plain(" ".join([question.text, *results]))
    return turn.tool_error and not _has(shown, title) and not _misspelt(title, shown)


def _misspelt(title: str, shown: str) -> bool:
    """A slip, not an invention: each word of the title (three letters or more) begins like a shown word."""
    words = [w for w in _plain(title).split() if len(w) > 2 and w not in _STOP_WORDS]
    starts = {w[:4] for w in shown.split()}
    return bool(words) and all(w[:4] in starts for w in words)


def _unmotivated(turn: Turn, seen: str) -> bool:
    """Rule 9: the call does not follow from the step the reasoning plans, from the answer it states, or
    from anything at all."""
    reasoning = turn.reasoning.strip()
    words = {w for w in _plain(" ".join(str(v) for v in turn.tool_call.arguments.values())).split() if len(w) > 2}
    if not _STEP.search(reasoning):
        from_nowhere = bool(reasoning) and bool(words) and not words & set(f"{_plain(reasoning)} {seen}".split())
        return bool(_stated_answers(reasoning)) or from_nowhere
    if _WILL_ANSWER.search(reasoning):
        return True
    planned = {" ".join(verb.lower().split()) for verb in _PLANNED_TOOL.findall(reasoning)}
    if planned and not planned & _TOOL_VERBS.get(turn.tool_call.name, set()):
        return True
    if planned and words & set(seen.split()):
        return False  # "I will open it": the planned tool, on something the question or a result named
    return bool(words) and not words & set(_plain(reasoning).split())


def _stated_answers(reasoning: str) -> list[str]:
    """Answers a reasoning states: "the answer is X", "\\boxed{X}", X a value of at most six words (not a
    restated question: "the answer is the capital of the state where ... was born")."""
    found = [a.strip(" .'\"") for a in _ANSWER_STATED.findall(reasoning) + _BOXED.findall(reasoning)]
    return [a for a in found if a and len(a.split()) <= 6]


def _changes_its_answer(turn: Turn, earlier: list[Turn]) -> bool:
    """Rule 10, second half: two different answers in this turn, or one other than the answer an earlier
    turn stated when no result came in between."""
    call = turn.tool_call
    answers = _stated_answers(turn.reasoning)
    if call is not None and call.name == "answer" and call.arguments.get("text"):
        answers.append(str(call.arguments["text"]))
    if not answers:
        return False
    if any(not match_answer(a, answers[0], []).correct for a in answers[1:]):
        return True
    for before in reversed(earlier):
        if before.observation and not before.tool_error and not _EMPTY.match(before.observation):
            return False  # a result came in: the agent may change its mind
        stated = _stated_answers(before.reasoning)
        if stated:
            return not match_answer(answers[0], stated[-1], []).correct
    return False


def _contradicts_a_row(reasoning: str, earlier: list[Turn]) -> bool:
    """Rule 10, first half: a claimed value of a row of a page read that the row does not hold."""
    pages: dict[str, dict[str, str]] = {}
    for t in earlier:
        if t.tool_call is not None and t.tool_call.name in ("open_page", "find_in_page") and not t.tool_error:
            rows = pages.setdefault(_plain(str(t.tool_call.arguments.get("title", ""))).strip(), {})
            rows.update({_plain(label).strip(): value for label, value in _ROW.findall(t.observation or "")})
    for sentence in _SENTENCES.split(reasoning):
        for entity, label, value in _row_claims(sentence):
            row = pages.get(_plain(entity).strip(), {}).get(_plain(label).strip())
            if row is not None and not _same_value(value, row):
                return True
    return False


def _row_claims(sentence: str) -> list[tuple[str, str, str]]:
    """(entity, row label, value) a sentence states: "the L of E is V", "E's L is V", "E was born in/on V"."""
    claims = [(entity, label, value) for label, entity, value in _LABEL_OF.findall(sentence)]
    claims += _POSSESSIVE.findall(sentence)
    for entity, preposition, value in _BORN.findall(sentence):
        place = preposition.lower() == "in" and not re.search(r"\d", value)
        claims.append((entity, "birth place" if place else "birth date", value))
    return claims


def _same_value(claimed: str, row: str) -> bool:
    """The claimed value is the row's, or one of its items, in any word order ("17 January 1964")."""
    words = set(_plain(claimed).split()) - _STOP_WORDS
    items = [set(_plain(item.split(" (")[0]).split()) for item in [row, *row.split(", ")]]
    return any(words <= item or (item and item <= words) for item in items)


def _names_path(question: Question, text: str) -> bool:
    return any(_has(text, n) for node in question.path.nodes for n in _spellings(node, "entity"))


def _adds_to_chain(question: Question, turn: Turn, earlier: list[Turn], seen: str) -> bool:
    text = _plain(turn.observation or "")
    for hop in question.path.hops:
        value, kind = (hop.tail, "entity") if hop.tail else (hop.value or "", hop.value_type)
        for name in (hop.head, value):
            forms = _spellings(name, kind if name == value else "entity")
            if any(_has(text, f) for f in forms) and not any(_has(seen, f) for f in forms):
                return True
        heads, values = _spellings(hop.head, "entity"), _spellings(value, kind)
        if any(_fact_shown(t, heads, values) for t in earlier):
            continue
        if _fact_shown(turn, heads, values):
            return True
    path_names = {_plain(n) for node in question.path.nodes for n in _spellings(node, "entity")}
    path_names |= {_plain(n) for n in _CAPITALISED.findall(question.text) if n.split()[0] not in _OPENERS}
    call = turn.tool_call
    if call is not None and call.name == "search":
        listed = {_plain(t) for t in _TITLE.findall(turn.observation or "")} & path_names
        before = {_plain(t) for e in earlier if e.tool_call and e.tool_call.name == "search"
                  for t in _TITLE.findall(e.observation or "")}
        return bool(listed - before)
    if call is not None and call.name in ("open_page", "find_in_page"):
        page = _plain(str(call.arguments.get("title", "")))
        opened = {_plain(str(e.tool_call.arguments.get("title", ""))) for e in earlier
                  if e.tool_call and e.tool_call.name in ("open_page", "find_in_page") and not e.tool_error}
        return any(_has(page, name) for name in path_names) and page not in opened
    return False


def _body_lines(turn: Turn) -> list[str]:
    """The result's lines after the tool's own header line ("2 match(es) of 'X' in 'Y':" names no fact)."""
    return [_plain(line) for line in (turn.observation or "").split("\n")[1:]] if not turn.tool_error else []


def _fact_shown(turn: Turn, heads: list[str], values: list[str]) -> bool:
    """A hop's head and value on one line of the result, or the value on the head's own page."""
    lines = _body_lines(turn)
    if any(any(_has(line, v) for v in values) and any(_has(line, h) for h in heads) for line in lines):
        return True
    call = turn.tool_call
    own_page = call is not None and call.name in ("open_page", "find_in_page") and any(
        _plain(str(call.arguments.get("title", ""))) == _plain(h) for h in heads)
    return own_page and any(_has(line, v) for line in lines for v in values)


def _several(value: str) -> list[str]:
    """A row's values when it lists several names (two or more of two or more words); a place written
    with commas ("Chicago, Illinois, U.S.") is one value."""
    items = [item.strip().split(" (")[0] for item in value.split(", ")]
    return items if sum(len(item.split()) >= 2 for item in items) >= 2 else []


def _unsupported(reasoning: str, seen: str, earlier: list[Turn], question_text: str) -> bool:
    rows = [_several(m.group(2)) for t in earlier for m in _ROW.finditer(t.observation or "")]
    for sentence in _SENTENCES.split(reasoning):
        if not sentence.strip() or sentence.rstrip().endswith("?") or _PLAN.search(sentence):
            continue
        claim = re.sub(r"\"[^\"]*\"|\([^)]*\)", " ", sentence)  # quotes are checked as excerpts, not claims
        names = [n for n in _CAPITALISED.findall(claim) if n.split()[0] not in _OPENERS or len(n.split()) > 1]
        names = [re.sub(r"['’]s$", "", " ".join(w for w in n.split() if w not in _OPENERS)) for n in names]
        if any(n and not _has(seen, n) for n in names):
            return True
        lines = [_plain(question_text)] + [_plain(block) for t in earlier if not t.tool_error
                                           for block in re.split(r"\n(?=\d+\. )|\n(?!\s)", t.observation or "")]
        lines += [_plain(f"{t.tool_call.arguments.get('title', '')} {t.observation}") for t in earlier
                  if t.tool_call is not None and t.tool_call.name in ("open_page", "find_in_page") and not t.tool_error]
        named = [n for n in dict.fromkeys(names) if n]
        if len(named) >= 2 and not any(all(_has(line, n) for n in named) for line in lines):
            return True
        for quote in re.findall(r"\"([^\"]{3,})\"", sentence):
            if _plain(quote).strip() not in seen:
                return True
        value = f" {claim} ".split(" is ", 1)[1] if " is " in f" {claim} " else ""  # what the sentence assigns
        picked = [n for n in names if n and _has(_plain(value), n)
                  and any(any(_plain(n) == _plain(i) for i in row) for row in rows)]
        if picked and not _REASON.search(sentence):
            return True
    return False
