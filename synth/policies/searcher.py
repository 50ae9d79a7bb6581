"""The honest side of the offline scripted searcher: it acts only on what the question and its observations showed.

The searcher is handed a `QuestionReading` (the question's words, the relations they chain and the kind of
answer asked) and never the gold path: no entity of the path, no value, no answer. Everything it names it
has read first: the start is picked from search results (a result the question names is read first, then
those whose snippets share most of the question's keywords; a page is kept when its infobox has a row for
the first relation and, for a start the question only describes, it names what the question describes it
by); each hop's value is read off a row the ontology's mappings label with the relation (or a sentence a
`find_in_page` for the relation's noun shows), and the next hop's page is opened by that value's name,
searched for when no page has the name. A row listing several values is tried value by value, and a value
whose page does not state the next relation is given up for the next one (backtracking). When nothing
fits it says what it could not find and gives no answer (`UNIDENTIFIED_ANSWER`). The final answer is the
value as the page wrote it.

Rollouts of one question differ where a searcher's would (a per-rollout style drawn from the episode seed):
the wording of the first query, whether a relation is looked up with find_in_page before the page is read,
and a last check of the answer before giving it.

The mistakes of a run are not made here: synth.policies.error_injection wraps this searcher and perturbs
some of its turns; the injector alone may read the gold path (its mistakes are made near it).
"""

from __future__ import annotations

import functools
import random
import re
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass

from knowledge.lexicon import stop_words
from knowledge.ontology import load_ontology, parameter_key
from knowledge.phrasebook import entry as phrasebook_entry
from schemas.questions import Question
from schemas.trajectory import Turn
from synth.environment import tokenize
from synth.frameworks.base import ANSWER_TOOL
from synth.phrasing import period_years
from wikitext.plain_text import INFOBOX_ROW, listed_values, split_sentences

_RESULT_TITLE = re.compile(r"^\d+\. (.+)$", re.MULTILINE)
_RESULT_START = re.compile(r"\n(?=\d+\. )")
_PAGE_HEADER = re.compile(r"^(.+?)(?: \(redirected from '.*'\))? - page (\d+) of (\d+)\.")
_PAGE_PREFIX = re.compile(r"^\[page (\d+)\] ")
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)")
_TRAILING_DIGITS = re.compile(r"_?\d+$")
_AS_OF = re.compile(r"^As of [^,]*, ")  # the question's date clause: no clue
_REFERENCE = re.compile(r"^(?:This|These|The latter|The former|That)\b[^,]*?(?= (?:is|was|were|are|has|had)\b)")
UNIDENTIFIED_ANSWER = "I could not identify it."
QUERY_WORDS = 6
MAX_CANDIDATES = 4  # values of one row (or results of one search) tried before giving up on them
MAX_START_SEARCHES = 3
STRONG_MATCH = 2  # question keywords a result's title and snippet share for it to be read before lower ranks
MAX_PAGES_READ = 3  # pages of one article read on when page 1 does not state the relation
SPOKEN_PARTS = 2
STEP_BUDGET = 45  # own steps before the searcher gives up (the episode's turn limit is 60)
_PERIOD = re.compile(r"\bthe (?:early |mid-|late |first decade of the )?(?:\d{3,4}s|\d{1,2}(?:st|nd|rd|th) century)\b")
_NAME = re.compile(r"\"([^\"]+)\"|\b([A-Z0-9][\w'.&-]*(?:(?:\s+|:\s+)(?:of |the |de |von |van |and |a |in )*[A-Z0-9][\w'.&-]*)*)")
_DATE = re.compile(r"\b(?:\d{1,2} )?(?:January|February|March|April|May|June|July|August|September|October|"
                   r"November|December)(?: \d{1,2},)? \d{4}\b|\b\d{4}\b")
_MONTH = re.compile(r"January|February|March|April|May|June|July|August|September|October|November|December")
_YEAR = re.compile(r"\b(\d{4})\b")
_NUMBER = re.compile(r"\b\d[\d,]*(?:\.\d+)?\b")
_QUESTION_WORDS = frozenset({"as", "of", "what", "which", "who", "whom", "whose", "when", "where", "how", "many",
                             "much", "in", "on", "at", "did", "does", "do", "was", "is", "were", "are", "the", "a",
                             "an", "date", "year", "place", "figure", "recorded", "number"})
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

    query_order: tuple[int, ...]  # order of the wordings of the first search
    lookup_first: bool  # find_in_page for the relation before reading on past page 1
    verify: bool  # confirm the answer on its page before giving it

    @classmethod
    def draw(cls, seed: int) -> RolloutStyle:
        rng = random.Random(f"style:{seed}")
        order = [0, 1, 2]
        rng.shuffle(order)
        return cls(tuple(order), rng.random() < 0.4, rng.random() < 0.8)


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def bare(title: str) -> str:
    """A title without its disambiguator: "The Shining (novel)" -> "The Shining"."""
    return _PARENTHETICAL.sub("", title).strip()


def question_periods(text: str) -> list[tuple[str, tuple[int, int]]]:
    """The periods a question places things in and the years each means to a reader (`period_years`)."""
    return [(match.group(0), span) for match in _PERIOD.finditer(text)
            if (span := period_years(match.group(0))) is not None]


@functools.lru_cache(maxsize=16384)  # each rollout checks the same results against the same question
def _phrase_in(phrase: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(phrase)}\b", text) is not None


@functools.lru_cache(maxsize=4096)  # rollouts of a question read the same pages
def _clue_text(observation: str) -> tuple[str, tuple[int, ...]]:
    """An observation as the question's clues are looked up in it: folded, and the years it writes."""
    return norm(observation), tuple(int(y) for y in _YEAR.findall(observation))


@functools.lru_cache(maxsize=4096)
def _infobox_rows(observation: str) -> tuple[tuple[str, str], ...]:
    """(label, value) of every infobox row of an observation, in order."""
    return tuple((row.group(1), row.group(2)) for line in observation.split("\n")
                 if (row := INFOBOX_ROW.match(_PAGE_PREFIX.sub("", line))))


def distinctive(text: str) -> bool:
    """Is a find_in_page text specific enough to find the entity it names (not "It", "Up", "Her")?"""
    return bool(tokenize([text])[0]) and (len(text.strip()) > MIN_FIND_CHARS or len(text.split()) > 1)


def result_titles(observation: str) -> list[str]:
    return [t.strip() for t in _RESULT_TITLE.findall(observation)]


@functools.lru_cache(maxsize=4096)  # the searcher rereads an episode's results at every value it opens
def result_snippets(observation: str) -> tuple[tuple[str, str], ...]:
    """(title, snippet) per listed result of a search observation."""
    blocks = _RESULT_START.split(observation)
    return tuple((m.group(1).strip(), block.split("\n", 1)[1] if "\n" in block else "")
                 for block in blocks if (m := _RESULT_TITLE.match(block)))


@functools.cache
def _relation_keys() -> dict[str, frozenset[str]]:
    """Ontology property -> the infobox parameter keys any template maps to it (DBpedia's mappings)."""
    keys: dict[str, set[str]] = defaultdict(set)
    for (_, parameter), prop in load_ontology().parameters.items():
        keys[prop].add(parameter_key(parameter))
    return {prop: frozenset(found) for prop, found in keys.items()}


@dataclass(frozen=True)
class Relation:
    """One relation the question chains, as a reader of the question knows it."""

    name: str  # the ontology property
    noun: str  # how a searcher calls it in its notes and looks it up ("birthplace", "director")
    keys: frozenset[str]  # infobox parameter keys that state it

    @classmethod
    @functools.cache  # a relation reads the same in every rollout and question
    def of(cls, name: str) -> Relation:
        entry = phrasebook_entry(name)
        noun = (entry.noun if entry else _running_text(load_ontology().label(name))).replace("_", " ")
        own = {parameter_key(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.split(":")[-1])), parameter_key(noun)}
        return cls(name, noun, frozenset(own | _relation_keys().get(name, frozenset())))

    def labels_row(self, label: str) -> bool:
        """Does an infobox row with this label state the relation ("Spouse(s)", "Constituency4")?"""
        return not self.keys.isdisjoint(_label_keys(label))

    @functools.cached_property
    def lookup_texts(self) -> tuple[str, ...]:
        """find_in_page texts for the relation: its noun, then its longest word (never a numbered key)."""
        words = sorted((w for w in self.noun.split() if len(w) > MIN_FIND_CHARS), key=len, reverse=True)
        return tuple(t for t in dict.fromkeys([self.noun, *words[:1]]) if distinctive(t))


@functools.lru_cache(maxsize=4096)
def _label_keys(label: str) -> tuple[str, str]:
    """The parameter keys an infobox row's label may be: as written, and without a trailing number."""
    key = parameter_key(label.replace("(s)", ""))
    return key, _TRAILING_DIGITS.sub("", key)


def _running_text(label: str) -> str:
    """A label as a note writes it mid-sentence ("Established" -> "established"; "ISO code" stays): a
    capitalised word would read as a name the observations never showed."""
    return label[0].lower() + label[1:] if label[:2].istitle() else label


@dataclass(frozen=True)
class QuestionReading:
    """What a reader takes from the question and nothing more: its words, the relations they chain from the
    start to the answer, and the kind of answer asked for. The relations are read off the question record
    (the writer's phrasing is not parsed back into relations), never its entities, values or answer."""

    text: str
    question_id: str
    relations: tuple[Relation, ...]
    answer_type: str

    @classmethod
    def of(cls, question: Question) -> QuestionReading:
        return cls._read(question.text, question.question_id, tuple(h.relation for h in question.path.hops),
                         question.path.answer_type)

    @classmethod
    @functools.lru_cache(maxsize=1024)  # the rollouts of a question share one reading, and what it worked out
    def _read(cls, text: str, question_id: str, relations: tuple[str, ...], answer_type: str) -> QuestionReading:
        return cls(text, question_id, tuple(Relation.of(name) for name in relations), answer_type)

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """Names the question gives (quoted titles, capitalised runs past its first word)."""
        found = []
        for sentence in split_sentences(_AS_OF.sub("", self.text)):
            sentence = _REFERENCE.sub("", sentence)
            for match in _NAME.finditer(sentence):
                name = (match.group(1) or match.group(2) or "").strip(" .,:'")
                opening = match.start() == 0 and " " not in name  # "Name the capital", "This city"
                if opening or not name or name.casefold() in _QUESTION_WORDS or name.isdigit():
                    continue
                found.append(re.sub(r"^(?:The|A|An) (?=[A-Z]?[a-z])", "", name) if match.group(2) else name)
        return tuple(n for n in dict.fromkeys(found) if not _MONTH.fullmatch(n))

    @functools.cached_property
    def keywords(self) -> tuple[str, ...]:
        """The question's content words: no question words, stop words, as-of clause or relation nouns."""
        text = _AS_OF.sub("", self.text)
        relation_words = {w for r in self.relations for w in tokenize([r.noun])[0]}
        skip = stop_words() | _QUESTION_WORDS | relation_words
        return tuple(dict.fromkeys(w for w in tokenize([text])[0] if w not in skip))

    @functools.cached_property
    def folded(self) -> str:
        """The question's text as `norm` folds it."""
        return norm(self.text)

    def names_title(self, title: str) -> bool:
        """Does the question name a page's title (without its disambiguator) as a whole phrase?"""
        return _phrase_in(norm(bare(title)), self.folded)

    @functools.cached_property
    def periods(self) -> tuple[tuple[str, tuple[int, int]], ...]:
        """The periods the question places things in (`question_periods`)."""
        return tuple(question_periods(self.text))


@dataclass(frozen=True)
class Value:
    """A value read in an observation: its text as the page wrote it and the line that stated it."""

    text: str
    line: str


def spoken_answer(value: str, answer_type: str) -> str:
    """The answer as a person says it: a place a row writes with its region and country ("Chicago, Illinois,
    U.S.") by its first part and region ("Chicago, Illinois"); anything else as the page wrote it."""
    if answer_type != "entity" or ", " not in value:
        return value
    return ", ".join(value.split(", ")[:SPOKEN_PARTS])


class Searcher:
    """The honest agent: plans one call at a time from the question's reading, the observations of the turns
    so far and its rollout's style. It holds no index and no gold path, so it cannot peek at a call's result
    before making it or know where a fact is. It never sees the error model; the turns it reads include the
    injected ones, as a searcher's would."""

    def __init__(self, reading: QuestionReading, style: RolloutStyle, top_k: int):
        self.reading = reading
        self.style = style
        self.top_k = top_k
        self.note = ""
        # Where the search stands (the error model reads these to fit its mistakes to the current hop).
        self.position = 0  # the relation being followed
        self.entity = ""  # the page the search is on, once one was read
        self.relation = reading.relations[0].noun if reading.relations else ""
        self._plan = self._steps()
        self._pending: Step | None = None
        self._honest_turn: int | None = None
        self._started = False
        self._turns: list[Turn] = []
        self._own_steps = 0
        self._choice = ""  # why the page the search goes on from was picked among several
        self._reached: dict[str, str | None] = {}  # value name -> the page it led to (None: no page, no result)

    def next_step(self, turns: list[Turn]) -> Step:
        """The honest next call: planned when none is waiting, so it sees every earlier turn (an injected
        search's results included); the same call until `sent` says it went out."""
        self._turns = turns
        if self._pending is None:
            self._pending = self._next_honest(turns)
            self._own_steps += 1
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
            return self._give_up("I have run out of leads.")

    def _give_up(self, why: str) -> Step:
        return Step(f"{why} I have no supported answer.", ANSWER_TOOL, {"text": UNIDENTIFIED_ANSWER})

    def _over_budget(self) -> bool:
        return self._own_steps >= STEP_BUDGET

    # --- what the turns showed ---------------------------------------------------------------------------

    def _seen(self) -> str:
        return norm(" ".join([self.reading.text, *(t.observation or "" for t in self._turns)]))

    def _listed(self) -> list[tuple[str, str]]:
        """(title, snippet) of every result an earlier search of this episode listed, injected ones included."""
        return [hit for t in self._turns if t.tool_call is not None and t.tool_call.name == "search"
                and not t.tool_error for hit in result_snippets(t.observation or "")]

    def _read_page(self, title: str, number: int) -> str | None:
        """An earlier observation of page `number` of `title`, if the episode read it already."""
        wanted = norm(title)
        for turn in self._turns:
            call = turn.tool_call
            if call is None or call.name != "open_page" or turn.tool_error:
                continue
            header = _PAGE_HEADER.match(turn.observation or "")
            if header and int(header.group(2)) == number and norm(header.group(1)) == wanted:
                return turn.observation
        return None

    def _open_first_page(self, title: str, intent: str) -> Generator[Step, str, str | None]:
        """Page 1 of `title`: the earlier observation when the episode read it, else an `open_page` call whose
        note leads with the pending one (then spent)."""
        page = self._read_page(title, 1)
        if page is None:
            page = yield Step(f"{self.note} {intent}".strip(), "open_page", {"title": title, "page": 1})
            self.note = ""
        return page

    # --- the plan ----------------------------------------------------------------------------------------

    def _steps(self) -> Generator[Step, str, None]:
        relations = self.reading.relations
        start = yield from self._find_start(relations[0])
        if start is None:
            yield self._give_up(f"{self.note} Without the start I cannot follow the chain.".strip())
            return
        answer = yield from self._follow(start, 0)
        if answer is None:
            yield self._give_up(f"{self.note} No candidate led to the {relations[-1].noun} the question asks for.".strip())
            return
        value, title = answer
        if self.style.verify and distinctive(value.text) and not self._over_budget():
            observation = yield Step(f"{self.note} Before answering, I will check that {title} states {value.text}.",
                                     "find_in_page", {"title": title, "text": value.text})
            if norm(value.text) in norm(observation or ""):
                self.note = f"{title} states {value.text}."
        spoken = spoken_answer(value.text, self.reading.answer_type)
        yield Step(f"{self.note} So the answer is {spoken}.".strip(), ANSWER_TOOL, {"text": spoken})

    def _start_queries(self, relation: Relation) -> list[str]:
        """Searches for the start, built from what the question says: the names it gives with the first
        relation's noun, its keywords, and its keywords with its names."""
        names, keywords = self.reading.names, self.reading.keywords
        named = " ".join([*names[:2], relation.noun]) if names else ""
        wordings = [named, " ".join(keywords[:QUERY_WORDS]), " ".join(dict.fromkeys(
            [*tokenize([" ".join(names[:2])])[0], *keywords[: QUERY_WORDS // 2]]))]
        ordered = [wordings[i] for i in self.style.query_order]
        return [q for q in dict.fromkeys(ordered) if q.strip()][:MAX_START_SEARCHES]

    def _start_candidates(self, hits: list[tuple[str, str]], tried: set[str]) -> list[str]:
        """Results in the order the evidence suggests: a title the question names, then snippets sharing most
        of the question's keywords."""
        keywords = set(self.reading.keywords)
        scored = []
        for rank, (title, snippet) in enumerate(hits):
            if norm(title) in tried:
                continue
            named = len(bare(title)) > 2 and self.reading.names_title(title)
            overlap = len(keywords & set(tokenize([f"{title} {snippet}"])[0]))
            scored.append((not named, -min(overlap, STRONG_MATCH), rank, title))
        return [title for *_, title in sorted(scored)]

    def _clues(self, observation: str) -> tuple[list[str], list[str]]:
        """The question's clues an observation matches and those it misses: the names the question gives and
        the periods it places things in (a year of the page inside each)."""
        text, years = _clue_text(observation)
        clues = [(n, norm(n) in text) for n in self.reading.names if len(n) > 2 and not n[0].isdigit()]
        clues += [(phrase, any(first <= y <= last for y in years))
                  for phrase, (first, last) in self.reading.periods]
        return [c for c, present in clues if present], [c for c, present in clues if not present]

    def _fits_description(self, observation: str) -> tuple[bool, str, int]:
        """Does a page fit what the question describes its start by (at least half of its clues)? Also the
        first clue it misses and how many it misses."""
        matched, missing = self._clues(observation)
        return len(missing) <= len(matched), (missing[0] if missing else ""), len(missing)

    def _find_start(self, relation: Relation) -> Generator[Step, str, str | None]:
        """Search for the page the chain starts from and read candidates until one fits."""
        tried: set[str] = set()
        previous = None
        fallback: tuple[int, str] | None = None
        for query in self._start_queries(relation):
            if previous is None:
                reasoning = (f"I need to identify what the question starts from and then its {relation.noun}. "
                             f"I will search for {query!r}.")
            else:
                reasoning = f"The results for {previous!r} show nothing that fits. I will reformulate the query as {query!r}."
            observation = yield Step(reasoning, "search", {"query": query, "top_k": self.top_k})
            previous = query
            hits = result_snippets(observation or "")
            for title in self._start_candidates(hits, tried)[:MAX_CANDIDATES]:
                if self._over_budget():
                    return None
                tried.add(norm(title))
                named = self.reading.names_title(title)
                why = ("the question names it" if named else "its snippet matches the question's description")
                page = yield from self._open_first_page(title, f"{title} is listed and {why}; I will read it.")
                self.note = ""
                if not page or page.startswith("Error"):
                    continue
                title = _PAGE_HEADER.match(page).group(1) if _PAGE_HEADER.match(page) else title
                has_row = bool(self._rows(page, relation))
                fits, missing, misses = (True, "", 0) if named else self._fits_description(page)
                if has_row and fits:
                    self.entity = title
                    return title
                if has_row and (fallback is None or misses < fallback[0]):
                    fallback = (misses, title)
                self.note = (f"{title} does not fit the question's description ({missing}), so it is not the one."
                             if not fits else f"{title} lists no {relation.noun}, so it is not what the question starts from.")
        if fallback is not None:
            title = fallback[1]
            self.note = (f"{self.note} Of the pages I read that give a {relation.noun}, {title} fits the question's "
                         "description best; I will go on from it.").strip()
            self.entity = title
            return title
        self.note = f"{self.note} No search found a page that fits what the question describes.".strip()
        return None

    def _rows(self, observation: str, relation: Relation) -> list[tuple[str, str]]:
        """(label, value) of the infobox rows of an observation that state the relation."""
        return [(label, value) for label, value in _infobox_rows(observation) if relation.labels_row(label)]

    def _values(self, observation: str, relation: Relation, last: bool, title: str) -> list[Value]:
        """The values an observation states for the relation: a row's items, or in a sentence naming the
        relation, the names (dates, numbers) it gives."""
        values = []
        for label, row in self._rows(observation, relation):
            cell = _PARENTHETICAL.sub("", row).strip()  # "Stephen King (m. January 2, 1971)"
            items = listed_values(cell) or [cell]
            if len(items) == 1 and ", " in cell:  # "Carrie, The Shining, It": several titles or one
                parts = [part for part in cell.split(", ") if len(part) > MIN_FIND_CHARS + 1]  # not "U.S."
                items = [*parts, cell] if not last else [cell, *parts]
            values += [Value(bare(item) or item.strip(), f"{label}: {row}") for item in items]
        if values:
            return values
        kind = self.reading.answer_type if last else "entity"
        mentions = [re.compile(rf"\b{re.escape(w)}") for w in relation.lookup_texts]
        for line in observation.split("\n")[1:]:
            text = _PAGE_PREFIX.sub("", line)
            for sentence in split_sentences(text):
                folded = sentence.casefold()
                if not any(mention.search(folded) for mention in mentions):
                    continue
                values += [Value(v, sentence) for v in self._sentence_values(sentence, kind, title)]
        return values

    @staticmethod
    def _sentence_values(sentence: str, kind: str, title: str) -> list[str]:
        if kind == "date":
            return _DATE.findall(sentence)[:1]
        if kind in ("number", "quantity"):
            return _NUMBER.findall(sentence)[:1]
        names = [m.group(2) for m in _NAME.finditer(sentence) if m.group(2) and m.start() > 0]
        return [n for n in names if norm(n) != norm(bare(title)) and len(n) > 2 and " " in n][:2]

    def _find_fact(self, title: str, relation: Relation, last: bool) -> Generator[Step, str, list[Value]]:
        """Read the page until an observation states the relation: page 1, a lookup of the relation's noun,
        then the following pages."""
        self.entity, self.relation = title, relation.noun
        page = yield from self._open_first_page(title, f"I will open {title} to find its {relation.noun}.")
        if not page or page.startswith("Error"):
            return []
        values = self._values(page, relation, last, title)
        if values:
            return values
        header = _PAGE_HEADER.match(page)
        pages = int(header.group(3)) if header else 1
        lookups = relation.lookup_texts if (self.style.lookup_first or pages == 1) else []
        for text in lookups:
            observation = yield Step(f"Page 1 of {title} does not give its {relation.noun}. I will look for "
                                     f"{text!r} in it.", "find_in_page", {"title": title, "text": text})
            values = self._values(observation or "", relation, last, title)
            if values:
                return values
        for number in range(2, min(pages, MAX_PAGES_READ) + 1):
            if self._over_budget():
                break
            observation = yield Step(f"Page {number - 1} of {title} does not give its {relation.noun}; I will "
                                     f"read page {number}.", "open_page", {"title": title, "page": number})
            values = self._values(observation or "", relation, last, title)
            if values:
                return values
        return []

    def _reach(self, value: Value, relation: Relation, source: str, purpose: str = "") -> Generator[Step, str, str | None]:
        """Open the page of a value read on `source` (to find the relation, or for `purpose`): by its name,
        else through a search for it."""
        purpose = purpose or f"to find its {relation.noun}"
        if norm(value.text) in self._reached:  # this name was opened or searched for already
            return self._reached[norm(value.text)]
        reached = yield from self._open_value(value, purpose)
        self._reached[norm(value.text)] = reached
        return reached

    def _open_value(self, value: Value, purpose: str) -> Generator[Step, str, str | None]:
        """The page a value's name opens (or a search for the name lists); None when neither finds one."""
        wanted = norm(value.text)
        listed = next((t for t, _ in self._listed() if norm(bare(t)) == wanted), None)
        name = listed or value.text
        page = yield from self._open_first_page(name, f"I will open {name} {purpose}.")
        if page and not page.startswith("Error"):
            header = _PAGE_HEADER.match(page)
            return header.group(1) if header else name
        observation = yield Step(f"There is no page titled {name}. I will search for it.", "search",
                                 {"query": value.text, "top_k": self.top_k})
        match = next((t for t in result_titles(observation or "") if norm(bare(t)) == norm(value.text)
                      or norm(t).startswith(norm(value.text))), None)
        if match is None:
            self.note = f"No result is {value.text}."
            return None
        page = yield Step(f"The results list {match}; I will open it {purpose}.", "open_page",
                          {"title": match, "page": 1})
        return match if page and not page.startswith("Error") else None

    def _rank(self, candidates: list[Value], relation: Relation, source: str) -> Generator[Step, str, list[Value]]:
        """Several values: read each one's page and order them by how much of the question's description
        the page matches (its clues first, then its keywords; the row's order breaks ties). A value with no
        page goes last."""
        scores = []
        for value in candidates:
            if self._over_budget():
                break
            reached = yield from self._reach(value, relation, source, "to check it against the question's description")
            page = self._read_page(reached, 1) if reached else None
            words = set(tokenize([page])[0]) if page else set()
            scores.append(2 * len(self._clues(page)[0]) + len(words & set(self.reading.keywords)) if page else -1)
        ranked = [v for _, _, v in sorted(zip([-x for x in scores], range(len(scores)), candidates, strict=False))]
        ranked += candidates[len(scores):]
        if scores and max(scores) > 0:
            self._choice = f"Of these, {ranked[0].text} fits the question's description best."
        return ranked

    def _follow(self, title: str, position: int) -> Generator[Step, str, tuple[Value, str] | None]:
        """From `title`, follow the relations from `position` on; the answer and the page that gave it, or
        None when this branch leads nowhere (the caller then tries its next candidate)."""
        relations = self.reading.relations
        relation, last = relations[position], position == len(relations) - 1
        self.position = position
        self.note, self._choice = f"{self._choice} {self.note}".strip(), ""  # why this page was picked
        values = yield from self._find_fact(title, relation, last)
        if not values:
            self.note = f"I could not find the {relation.noun} of {title}."
            return None
        candidates = [v for v in dict.fromkeys(values) if norm(v.text) != norm(title)][:MAX_CANDIDATES]
        if last:
            items = [v for v in candidates if v.text != v.line.split(": ", 1)[-1]]
            if self.reading.answer_type == "entity" and len(items) > 1 and self.reading.periods:
                ranked = yield from self._rank(items, relation, title)  # "which of his works ... in the 1980s"
                return ranked[0], title
            value = values[0]
            self.note = f'{self.note} {title} gives "{value.line}".'.strip()
            return value, title
        following = relations[position + 1]
        if len(candidates) > 1:
            self.note = (f'{self.note} {title} gives "{candidates[0].line}" for its {relation.noun}; the question '
                         f"goes on to the {following.noun} of one of them, so I will check which fits its "
                         "description.").strip()
            candidates = yield from self._rank(candidates, following, title)
        else:
            self.note = f'{self.note} {title} gives "{candidates[0].line}" as its {relation.noun}.'.strip()
        for number, value in enumerate(candidates):
            if self._over_budget():
                return None
            if number:
                self.note = f"{self.note} I will try {value.text} instead.".strip()
            reached = yield from self._reach(value, following, title)
            if reached is None:
                continue
            answer = yield from self._follow(reached, position + 1)
            if answer is not None:
                return answer
            self.position = position
            self.note = f"{self.note} So {value.text} is not the one the question means.".strip()
        return None

