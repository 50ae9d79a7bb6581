"""The honest side of the offline scripted searcher: it plans each call from what its turns showed.

It follows the question's gold path (read only through `GoldPath`), but not where the facts are: each
hop's page is opened directly when an earlier search already listed it, else located with `search`
(reformulating the query when the page is not listed, never spending a search that would only re-list
pages already seen), read with `open_page`, and the fact located with `find_in_page` (only for a text the
page contains and whose matches show the fact) or by reading on page by page when the first chunk does
not state it. Its reasoning names what it looks for by relation, only asserts what an earlier
observation showed, and says where it read a value ("The infobox of Inception lists Christopher Nolan as
its director"). Because it knows the gold path, its runs are shorter and surer than a real searcher's;
the card says so.

Rollouts of one question differ where a searcher's would (a per-rollout style drawn from the episode seed):
the wording and order of queries, whether a fact is looked up with find_in_page before the page is read,
a look at another listed page that mentions the entity, checking other values of a listed row (several
cast members) before the one the path follows, reading the results of the question's search ranked above
the start before it, a check that the start's page names what the question describes it by (the reason for
picking it), a look at the row that dates each period the question gives ("published in the mid-1960s"),
and a last check of the answer before giving it. These are the reading a searcher without the gold path
does; without them the runs were about 5 turns a hop and critical turns a third of all turns.

The mistakes of a run are not made here: synth.policies.error_injection wraps this searcher and perturbs
some of its turns.
"""

from __future__ import annotations

import random
import re
from collections.abc import Generator
from dataclasses import dataclass

from schemas.questions import PathHop, Question
from schemas.trajectory import Turn
from synth.environment import SearchEnvironment, tokenize
from synth.frameworks.base import ANSWER_TOOL
from synth.phrasing import fuzz_year
from wikitext.plain_text import INFOBOX_ROW, format_date, listed_values, split_sentences

_RESULT_TITLE = re.compile(r"^\d+\. (.+)$", re.MULTILINE)
_PAGE_PREFIX = re.compile(r"^\[page (\d+)\] ")
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)")
QUERY_WORDS = 8
UNIDENTIFIED_ANSWER = "I could not identify it."
_AS_OF = re.compile(r"^As of [^,]*, ")  # the question's date clause: no search term
EVIDENCE_CHARS = 200
MAX_DESCRIPTION_CHECKS = 2
MAX_CLUE_PAGES = 2  # pages the question names that a searcher reads when its description finds nothing
_NAMED = re.compile(r"\b[A-Z][\w'.-]*(?:\s+(?:of |the |de |von |van )?[A-Z][\w'.-]*)+")
_ARTICLE = re.compile(r"^(?:An?|The|This|These) ")  # a capitalised sentence opening, not part of a name
_PERIOD = re.compile(r"\bthe (?:early |mid-|late )?(?:(\d{3}0)s|(\d{1,2})(?:st|nd|rd|th) century)\b")
_YEAR = re.compile(r"\b(\d{4})\b")
MIN_FIND_CHARS = 3  # a one-word find_in_page text this short matches common words


@dataclass
class Step:
    reasoning: str
    name: str
    arguments: dict


@dataclass(frozen=True)
class RolloutStyle:
    """How one rollout searches: drawn from its own stream of the episode seed, so the error model's draws
    do not move when a style knob is added."""

    query_order: tuple[int, ...]  # order of the query wordings tried per hop
    lookup_first: bool  # find_in_page for the relation before reading the page
    explore: float  # chance of a look at each of up to `explore_pages` other listed pages
    decoys: int  # other values of a listed row checked before the one the path follows
    verify: bool  # confirm the answer on its page before giving it
    corroborate: float  # chance of checking that the value's own page names the entity it was read on
    explore_pages: int  # other listed pages considered per hop
    check_description: bool  # check that the start's page names what the question describes it by
    candidates: int  # results of the question's search ranked above the start, checked before it
    check_periods: bool  # check each period the question gives ("the mid-1960s") on the page it dates

    @classmethod
    def draw(cls, seed: int) -> RolloutStyle:
        rng = random.Random(f"style:{seed}")
        order = [0, 1, 2, 3]
        rng.shuffle(order)
        return cls(tuple(order), rng.random() < 0.4, rng.choice((0.5, 1.0)), rng.choice((1, 2, 3)),
                   rng.random() < 0.8, rng.choice((0.5, 1.0)), rng.choice((1, 2, 3)), rng.random() < 0.8,
                   rng.choice((1, 2, 3)), rng.random() < 0.8)


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def spoken_answer(question: Question) -> str:
    """The answer as a person states it, when that form is one of the question's accepted aliases: a page
    title without its disambiguator ("The Shining (novel)" -> "The Shining"), a date in words ("1969-09-03"
    -> "3 September 1969", as pages write it). A model trained on the final turns then never learns to box
    Wikipedia's title suffixes or ISO dates; the gold form stays the graded answer."""
    if question.path.answer_type == "date":
        spoken = format_date(question.answer)
    else:
        spoken = question.answer.split(" (")[0]
    return spoken if spoken != question.answer and spoken in question.aliases else question.answer


def question_periods(text: str) -> list[tuple[str, tuple[int, int]]]:
    """The vague periods a question gives and the years each stands for (read back through `fuzz_year`)."""
    periods = []
    for match in _PERIOD.finditer(text):
        if match.group(2):  # "the late 19th century"
            first, styles = (int(match.group(2)) - 1) * 100 + 1, (2,)
            years = range(first, first + 100)
        else:  # "the mid-1960s", "the 1960s"
            years, styles = range(int(match.group(1)), int(match.group(1)) + 10), (0, 1)
        spans = [span for year in years for style in styles
                 for phrase, span in [fuzz_year(year, style)] if phrase == match.group(0)]
        if spans:
            periods.append((match.group(0), spans[0]))
    return periods


def distinctive(text: str) -> bool:
    """Is a find_in_page text specific enough to find the entity it names (not "It", "Up", "Her")?"""
    return bool(tokenize([text])[0]) and (len(text.strip()) > MIN_FIND_CHARS or len(text.split()) > 1)


def result_titles(observation: str) -> list[str]:
    return [t.strip() for t in _RESULT_TITLE.findall(observation)]


def _sentence_with(text: str, surface: str) -> str:
    """The sentence of a line that states the surface, cut around it when very long."""
    sentence = next((s for s in split_sentences(text) if norm(surface) in norm(s)), text)
    if len(sentence) <= EVIDENCE_CHARS:
        return sentence
    position = sentence.casefold().find(surface.casefold())
    start = max(0, position - EVIDENCE_CHARS // 2)
    return sentence[start : start + EVIDENCE_CHARS].strip()


def evidence_line(observation: str, surfaces: list[str], relation: str = "") -> tuple[str, int | None] | None:
    """The observed sentence stating a surface (preferring one naming the relation), and its page number."""
    candidates = []
    for line in observation.split("\n")[1:]:  # the first line is the tool's header, never evidence
        page = _PAGE_PREFIX.match(line)
        text = line[page.end():] if page else line
        surface = next((s for s in surfaces if s and norm(s) in norm(text)), None)
        if surface is None:
            continue
        found = (_sentence_with(text, surface), int(page.group(1)) if page else None)
        if relation and norm(relation) in norm(text):
            return found
        candidates.append(found)
    return candidates[0] if candidates else None


class GoldPath:
    """The one door through which the searcher learns what only the question's gold path knows.

    A searcher without the gold path could not make these reads; this one still does (a later issue
    removes them), and makes them here and nowhere else:
    - `hops` (and `start`, the path's first entity): each hop's entity, its relation (`relation(hop)`) and
      whether it leads on to an entity page. The searcher walks them in order, so after a read that did
      not find the fact it still moves on to the next hop's entity by name;
    - `surfaces(hop)`: the spellings of a hop's value, by which it recognises the fact in what it reads;
    - `titles`: the path's entities (normalised), which its side looks leave out;
    - `answer` and `submitted`: the gold answer, which it checks for and submits, whether or not an
      observation stated it.
    """

    def __init__(self, question: Question, env: SearchEnvironment):
        self.start = question.path.start
        self.hops = question.path.hops
        self.titles = {norm(n) for n in question.path.nodes}
        self.answer = question.path.answer  # the raw value (a page title), as pages and results name it
        self.submitted = spoken_answer(question)
        self._env = env

    @staticmethod
    def relation(hop: PathHop) -> str:
        """The hop's relation as its page labels it: the infobox parameter ("Birth place: ..."), not the
        ontology property's name."""
        return (hop.provenance.parameter or hop.relation).replace("_", " ")

    def surfaces(self, hop: PathHop) -> list[str]:
        """The spellings a page may give the hop's value: the entity's title and aliases, a date or number as
        pages write it."""
        if hop.tail is not None:
            page = self._env.resolve(hop.tail)
            names = [hop.tail, *(page.aliases if page else [])]
            names += [_PARENTHETICAL.sub("", hop.tail), hop.tail.split(",")[0]]
            return list(dict.fromkeys(n.strip() for n in names if n and n.strip()))
        value = hop.value or ""
        if hop.value_type == "date":
            return list(dict.fromkeys([format_date(value), value, value[:4]]))
        if hop.value_type in ("number", "quantity"):
            try:
                return list(dict.fromkeys([value, f"{float(value):,.0f}", f"{float(value):,}"]))
            except ValueError:
                return [value]
        return [value]


class Searcher:
    """The honest agent: plans one call at a time from the question's text, the observations of the turns
    so far, the index behind its tools (`env`: it also runs calls it does not record, to see whether a
    search would list anything new or a find_in_page text would show the fact, and reads pages through
    `resolve`) and its rollout's style, plus the gold-path reads of `GoldPath`. It never sees the error
    model; the turns it reads include the injected ones, as a searcher's would."""

    def __init__(self, env: SearchEnvironment, text: str, question_id: str, gold: GoldPath, style: RolloutStyle,
                 top_k: int):
        self.style = style
        self.explore_rng = random.Random(f"explore:{style}:{question_id}")
        self.env = env
        self.text = text
        self.gold = gold
        self.top_k = top_k
        self.note = ""
        # Where the search stands (the error model reads these to fit its mistakes to the current hop).
        self.entity = gold.start
        self.relation = ""
        self.hop: PathHop | None = None
        self.siblings: list[str] = []
        self.pick_reason = ""
        self.target = ""  # the spelling of the last value read, as the page wrote it
        self.periods_checked: set = set()  # periods and (page, row label) pairs already checked
        self._plan = self._steps()
        self._pending: Step | None = None
        self._honest_turn: int | None = None
        self._started = False
        self._turns: list[Turn] = []

    def next_step(self, turns: list[Turn]) -> Step:
        """The honest next call: planned when none is waiting, so it sees every earlier turn (an injected
        search's results included); the same call until `sent` says it went out."""
        self._turns = turns
        if self._pending is None:
            self._pending = self._next_honest(turns)
        return self._pending

    def sent(self, turn: int) -> None:
        """The waiting call went out as turn number `turn`: its observation is what the plan reads next."""
        self._pending, self._honest_turn = None, turn

    def _next_honest(self, turns: list[Turn]) -> Step:
        observation = None
        if self._honest_turn is not None:
            observation = turns[self._honest_turn].observation or ""
        try:
            if not self._started:
                self._started = True
                return next(self._plan)
            return self._plan.send(observation)
        except StopIteration:
            return Step("I have checked the path; here is my answer.", ANSWER_TOOL, {"text": self.gold.submitted})

    # --- the honest plan ---------------------------------------------------------------------------------

    def _steps(self) -> Generator[Step, str, None]:
        hops = self.gold.hops
        found = False
        title = ""
        for number, hop in enumerate(hops):
            self.entity, self.relation = hop.head, self.gold.relation(hop)
            self.hop = hop
            title = yield from self._locate(hop.head, opening=number == 0)
            if title is None:  # the start stays unidentified: an honest searcher cannot follow the chain
                yield Step(f"{self.note} Without it I cannot follow the chain, so I have no supported answer.",
                           ANSWER_TOOL, {"text": UNIDENTIFIED_ANSWER})
                return
            if number == 0 and self.style.check_description:
                yield from self._check_description(title)
            if self.style.check_periods:
                yield from self._check_periods(title)
            found = yield from self._read(title, hop)
            if found and hop.tail is not None:
                yield from self._corroborate(hop)
            if found and number + 1 < len(hops):
                yield from self._check_siblings(hops[number + 1])
        if found and self.style.verify:
            yield from self._verify(title)
        # The answer is stated only as the last observation showed it (the note); the call submits the gold
        # spelling, which the observed one matches, as a person would say it (see spoken_answer).
        closing = "That answers the question." if found else "I will give my best answer."
        yield Step(f"{self.note} {closing}".strip(), ANSWER_TOOL, {"text": self.gold.submitted})

    def _check_candidates(self, ranked_above: list[str]) -> Generator[Step, str, None]:
        """Results of the question's search ranked above the start: a searcher reads them in order, checking
        each against what the question describes, before the one that fits (this policy knows which does;
        the checks are the reading a searcher without the gold path does first)."""
        links = self._question_links()
        checked = []
        for title in [t for t in ranked_above if norm(t) not in self.gold.titles][: self.style.candidates]:
            page = self.env.resolve(title)
            if page is None:
                continue
            reasoning = f"{title} is listed above it; I will check whether it is the one the question describes."
            if checked:
                reasoning = f"{checked[-1]} does not fit the question's description. {reasoning}"
            observation = yield Step(reasoning, "open_page", {"title": title, "page": 1})
            missing = next((name for name in links if norm(name) not in norm(observation or "")), None)
            checked.append(f"Page 1 of {title} does not mention {missing}, so it" if missing else title)
        if checked:
            self.note = f"{checked[-1]} does not fit the question's description. {self.note}"

    def _question_links(self) -> list[str]:
        """Pages the question names (not path entities): what it describes its start by."""
        return [name for name in dict.fromkeys(_NAMED.findall(self.text))
                if norm(name) not in self.gold.titles and self.env.resolve(name) is not None]

    def _check_periods(self, title: str) -> Generator[Step, str, None]:
        """The question places entities in vague periods ("published in the mid-1960s"): on reaching an
        entity whose page has a row dated in one of them, a searcher checks it fits before going on."""
        page = self.env.resolve(title)
        if page is None or norm(title) == norm(self.gold.answer):
            return
        for phrase, (first, last) in question_periods(self.text):
            if phrase in self.periods_checked:
                continue
            row = next((m for line in page.chunks[0].split("\n") if (m := INFOBOX_ROW.match(line))
                        and (title, m.group(1)) not in self.periods_checked
                        and any(first <= int(y) <= last for y in _YEAR.findall(m.group(2)))), None)
            if row is None:
                continue
            label = row.group(1)
            self.periods_checked |= {phrase, (title, label)}  # each period and each row checked once
            reasoning = f"{self.note} The question places it in {phrase}; I will look for {label!r} in {title}."
            observation = yield Step(reasoning.strip(), "find_in_page", {"title": title, "text": label})
            year = next((y for y in _YEAR.findall(observation or "") if first <= int(y) <= last), None)
            self.note = f"{title} gives {year} as its {label.lower()}, which is in {phrase}." if year else ""

    def _check_description(self, title: str) -> Generator[Step, str, None]:
        """The question describes its start entity by what it is linked to ("whose spouse is Stephen King"):
        before relying on the page it picked, a searcher checks that the page names those links. (This
        policy knows the start from the gold path; the check gives the reason for the pick that a searcher
        without it needs.)"""
        page = self.env.resolve(title)
        if page is None or norm(title) in norm(self.text):
            return  # the question names its start: nothing to match
        text = norm(" ".join(page.chunks))
        links = [name for name in self._question_links() if norm(name) in text]
        checked = []
        for name in links[:MAX_DESCRIPTION_CHECKS]:
            reasoning = (f"{self.note} The question describes the entity by its link to {name}; "
                         f"I will check that {title} names {name}.")
            observation = yield Step(reasoning.strip(), "find_in_page", {"title": title, "text": name})
            self.note = ""
            if norm(name) in norm(observation or ""):
                checked.append(name)
        if checked:
            self.note = f"{title} names {' and '.join(checked)}, as the question describes it."

    def _verify(self, title: str) -> Generator[Step, str, None]:
        """A last look for the answer on the page that gave it, as a careful searcher does before answering."""
        surface = self.target or self.gold.answer
        if not distinctive(surface):
            return
        reasoning = f"{self.note} Before answering, I will confirm that {title} names {surface}."
        observation = yield Step(reasoning, "find_in_page", {"title": title, "text": surface})
        confirmed = norm(surface) in norm(observation or "")
        self.note = f"{title} confirms {surface}." if confirmed else self.note

    def _corroborate(self, hop: PathHop) -> Generator[Step, str, None]:
        """Sometimes a second source: does the value's own page name the entity the value was read on?"""
        page = self.env.resolve(hop.tail)
        if page is None or self.explore_rng.random() >= self.style.corroborate:
            return
        head = _PARENTHETICAL.sub("", hop.head)
        if not distinctive(head) or not any(norm(head) in norm(chunk) for chunk in page.chunks):
            return  # a bare title such as "It" (novel) would match every "it" of the page
        reasoning = f"{self.note} To be sure, I will check that the page of {page.title} mentions {head}."
        observation = yield Step(reasoning, "find_in_page", {"title": page.title, "text": head})
        if norm(head) in norm(observation or ""):
            self.note = f"{page.title} mentions {head} as well."

    def _check_siblings(self, next_hop: PathHop) -> Generator[Step, str, None]:
        """The fact's row listed several values: check some of the others against the rest of the question
        before following the one the path goes on with."""
        others = [t for t in self.siblings if self.env.resolve(t) is not None and norm(t) not in self.gold.titles]
        self.explore_rng.shuffle(others)
        following = self.gold.relation(next_hop)
        previous = None
        for other in others[: self.style.decoys]:
            if previous is None:
                reasoning = f"{self.note} The question goes on to ask for the {following} of one of them; I will check {other} first."
            else:
                reasoning = f"{previous} does not lead on to the rest of the question. I will check {other}."
            yield Step(reasoning, "open_page", {"title": other, "page": 1})
            previous = other
        if previous is not None:
            self.note = f"{previous} does not lead on to the rest of the question either."
        self.siblings = []

    def _explore(self, entity: str) -> Generator[Step, str, None]:
        """Looks at up to `explore_pages` other listed pages (each by chance), preferring those whose snippet
        mentions the entity, before the entity's own page: a searcher does not know in advance which source
        states the fact."""
        latest = next((t for t in reversed(self._turns) if t.tool_call is not None and t.tool_call.name == "search"
                       and not t.tool_error), None)
        if latest is None:
            return
        opened = {norm(str(t.tool_call.arguments.get("title", ""))) for t in self._turns if t.tool_call is not None}
        mentioning, others = [], []
        for block in re.split(r"\n(?=\d+\. )", latest.observation or ""):
            listed = result_titles(block)
            if not listed or self._is_entity(listed[0], entity) or norm(listed[0]) in self.gold.titles | opened:
                continue
            (mentioning if norm(entity) in norm(block.split("\n", 1)[-1]) else others).append(listed[0])
        for title in (mentioning + others)[: self.style.explore_pages]:
            if self.explore_rng.random() >= self.style.explore:
                continue
            why = f"its snippet mentions {entity}" if title in mentioning else f"it might say something about {entity}"
            reasoning = (f"{self.note} {title} is listed too; {why}. "
                         f"I will read it in case it states the {self.relation} of {entity}.")
            yield Step(reasoning.strip(), "open_page", {"title": title, "page": 1})
            self.note = ""

    def _is_entity(self, title: str, entity: str) -> bool:
        if norm(title) == norm(entity):
            return True
        page, target = self.env.resolve(title), self.env.resolve(entity)
        return page is not None and page is target

    def _listed_titles(self) -> list[str]:
        """Titles every earlier search of this episode listed (its own turns and injected ones alike)."""
        return [title for turn in self._turns if turn.tool_call is not None and turn.tool_call.name == "search"
                and not turn.tool_error for title in result_titles(turn.observation or "")]

    def _lists_something_new(self, query: str, entity: str) -> bool:
        """Would this search list the entity or a page not listed before? (A re-listing adds nothing.)"""
        observation, _ = self.env.execute("search", {"query": query, "top_k": self.top_k})
        seen = {norm(t) for t in self._listed_titles()}
        titles = result_titles(observation)
        return any(self._is_entity(t, entity) for t in titles) or any(norm(t) not in seen for t in titles)

    def _question_names(self, entity: str) -> bool:
        return norm(_PARENTHETICAL.sub("", entity).strip()) in norm(self.text)

    def _opening_query(self) -> str:
        """The first search for the question's start: the question's opening words."""
        return " ".join(tokenize([self.text])[0][:QUERY_WORDS])

    def _description_queries(self) -> list[str]:
        """What a searcher who is not told the start tries: the question's opening words, the same without
        its as-of date, then the opening sentence's first words with the pages it names."""
        undated = _AS_OF.sub("", self.text)
        opening = (split_sentences(undated) or [undated])[0]
        names = [name for name in (_ARTICLE.sub("", found) for found in _NAMED.findall(opening)) if " " in name]
        clued = tokenize([opening])[0][: QUERY_WORDS // 2] + [w for name in names for w in tokenize([name])[0]]
        clued = list(dict.fromkeys(clued))
        return [self._opening_query(), " ".join(tokenize([undated])[0][:QUERY_WORDS]), " ".join(clued)]

    def _locate(self, entity: str, opening: bool) -> Generator[Step, str, str | None]:
        """Searches until a result lists the entity. For the question's start (`opening`) the first search is
        the question's own words; when the question does not name the start, every search is (naming it
        before a result showed it would be knowledge only the gold path has), and None says none found it."""
        listed = next((t for t in self._listed_titles() if self._is_entity(t, entity)), None)
        if listed is not None:
            self.note = f"{self.note} An earlier search listed {listed}.".strip()
            return listed
        described = opening and not self._question_names(entity)
        if described:
            queries = self._description_queries()
        else:
            wordings = [entity, _PARENTHETICAL.sub("", entity), f"{entity} {self.relation}", f"{self.relation} of {entity}"]
            queries = [self._opening_query()] if opening else []
            queries += [wordings[i] for i in self.style.query_order]
        queries = list(dict.fromkeys(q for q in queries if q and q.strip()))
        previous = None
        for query in queries:
            if not self._lists_something_new(query, entity):
                continue
            if previous is None and described:
                reasoning = (f"The question describes where the chain starts without naming it. I will search for "
                             f"its description, {query!r}, to identify it.")
            elif previous is None:
                reasoning = f"{self.note} I need the {self.relation} of {entity}. I will search for {query!r}."
            elif described:
                reasoning = (f"The results for {previous!r} show nothing that fits the question's description. "
                             f"I will reformulate the query as {query!r}.")
            else:
                reasoning = f"The results for {previous!r} do not list {entity}. I will reformulate the query as {query!r}."
            observation = yield Step(reasoning.strip(), "search", {"query": query, "top_k": self.top_k})
            titles = result_titles(observation)
            match = next((t for t in titles if self._is_entity(t, entity)), None)
            if match is not None:
                self.note = f"The search results list {match}."
                if opening:
                    yield from self._check_candidates(titles[: titles.index(match)])
                yield from self._explore(entity)
                return match
            previous = query
        if described:
            return (yield from self._read_clues(entity))
        self.note = f"No search listed {entity}; I will try to open it by its title."
        return entity

    def _read_clues(self, entity: str) -> Generator[Step, str, str | None]:
        """The description's searches did not list the start: a searcher reads the pages the question names
        for something that fits. The start once a clue's page mentions it, else None."""
        bare = _PARENTHETICAL.sub("", entity).strip()
        reasoning = "No search listed a page that fits what the question describes."
        for clue in self._question_links()[:MAX_CLUE_PAGES] if distinctive(bare) else []:
            observation = yield Step(f"{reasoning} The question names {clue}; I will read its page for what the "
                                     "question describes.", "open_page", {"title": clue, "page": 1})
            if norm(bare) in norm(observation or ""):
                self.note = f"The page of {clue} mentions {bare}, which fits the question's description."
                return entity
            reasoning = f"Page 1 of {clue} mentions nothing that fits the question's description."
        self.note = reasoning
        return None

    def _lookup(self, title: str, surfaces: list[str]) -> str | None:
        """The first find_in_page text worth a call (the relation, its words, a value spelling an earlier
        observation already showed) whose matches in the page show the fact; None when no text does."""
        words = [w for w in tokenize([self.relation])[0] if len(w) > 2]
        seen = norm(" ".join([self.text, *(t.observation or "" for t in self._turns)]))
        candidates = [self.relation, *words, *(s for s in surfaces if norm(s) in seen)]
        for text in dict.fromkeys(c for c in candidates if c.strip()):
            observation, error = self.env.execute("find_in_page", {"title": title, "text": text})
            if not error and evidence_line(observation, surfaces, self.relation) is not None:
                return text
        return None

    def _read(self, title: str, hop: PathHop) -> Generator[Step, str, bool]:
        """Read the hop's page until an observation states the fact; True when one did."""
        surfaces = self.gold.surfaces(hop)
        found = None
        lookup = self._lookup(title, surfaces) if self.style.lookup_first else None
        if lookup is not None:  # this rollout looks the relation up before reading the page
            reasoning = f"{self.note} I will look for {lookup!r} in {title} to find its {self.relation}."
            observation = yield Step(reasoning.strip(), "find_in_page", {"title": title, "text": lookup})
            found = evidence_line(observation, surfaces, self.relation)
        if found is None:
            observation = yield Step(f"{self.note} I will open {title} to find its {self.relation}.".strip(),
                                     "open_page", {"title": title, "page": 1})
            found = evidence_line(observation, surfaces, self.relation)
        if found is None and lookup is None:
            lookup = self._lookup(title, surfaces)
            if lookup is not None:
                reasoning = f"The first page of {title} does not state its {self.relation}. I will look for {lookup!r} in it."
                observation = yield Step(reasoning, "find_in_page", {"title": title, "text": lookup})
                found = evidence_line(observation, surfaces, self.relation)
        if found is None:
            found = yield from self._read_on(title, surfaces)
        if found is None:
            self.note = f"I could not find the {self.relation} of {title} in its page; I will follow the next lead."
            return False
        line, page_number = found
        if page_number is not None and page_number > 1:
            observation = yield Step(f"The match is on page {page_number} of {title}; I will read it.", "open_page",
                                     {"title": title, "page": page_number})
            found = evidence_line(observation, surfaces, self.relation) or found
            line = found[0]
        target = self.target = next(s for s in surfaces if norm(s) in norm(line))
        self.note = self._reason(title, line, target, hop)
        return True

    def _reason(self, title: str, line: str, target: str, hop: PathHop) -> str:
        """Why the value is the hop's: where it was read; a row listing several values picks none yet (the
        next hop's page decides, and that reason is given with it)."""
        pick = self.pick_reason
        self.pick_reason = ""
        row = INFOBOX_ROW.match(line)
        if row is None:
            return f'{title} says "{line}", which gives {target} as the {self.relation} of {hop.head}.{pick}'
        label, items = row.group(1).lower(), listed_values(row.group(2))
        if items and hop.tail and hop is not self.gold.hops[-1]:
            self.siblings = [item.split(" (")[0] for item in items if norm(target) not in norm(item)]
            self.pick_reason = (f" So of the {label} values listed on {title}, {target} is the one the question "
                                "means: its page answers the next part of the question.")
            return f'The infobox of {title} lists several values as its {label} ("{line}").{pick}'
        return f'The infobox of {title} lists {target} as its {label} ("{line}").{pick}'

    def _read_on(self, title: str, surfaces: list[str]) -> Generator[Step, str, tuple[str, int | None] | None]:
        """No lookup shows the fact: read the following pages in order while a later page states it."""
        page = self.env.resolve(title)
        chunks = page.chunks if page is not None else []
        if not any(norm(s) in norm(chunk) for chunk in chunks[1:] for s in surfaces):
            return None
        for number in range(2, len(chunks) + 1):
            reasoning = f"Page {number - 1} of {title} does not state its {self.relation}; I will read page {number}."
            observation = yield Step(reasoning, "open_page", {"title": title, "page": number})
            found = evidence_line(observation, surfaces, self.relation)
            if found is not None:
                return found[0], None
        return None
