"""Question planning: what a question may say about every entity it does not name, before any text.

For each path a *plan* fixes what the question may say about every intermediate entity (a type noun and
a fuzzed date attribute, never its name), the start entity when it is described, a tree question's
branches on the answer, the tense of every hop and whether an as-of date must be stated. Every statement
is also a `gates.Clue`, so the structural gates (`synth.question_gates.plan_gate`) check exactly what
the text will say. `QuestionContext` is what planning, writing and gating read.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import random
from dataclasses import dataclass, field

from graph.csr import LITERAL_PREFIX, CSRGraph, split_literal_key
from ground.io import stable_hash
from knowledge.ontology import lead_noun_phrase, load_ontology
from schemas.config import QuestionConfig
from schemas.questions import Path
from synth import describe, gates
from synth.describe import Attribute
from synth.phrasing import PERSON_NOUNS, has_ended, is_mutable, month_year, type_noun


@dataclass
class EntityInfo:
    type: str
    description: str
    aliases: list[str]


@dataclass
class QuestionContext:
    """Everything a unit needs; in the Beam pipeline each worker builds it once and shares it across units."""

    graph: CSRGraph
    entities: dict[str, EntityInfo]
    as_of: dt.date
    config: QuestionConfig
    paths: dict[str, Path] = field(default_factory=dict)  # path_id -> Path, filled for the pipeline
    tree_share: float = 0.0  # the walk's `tree_share`: paths drawn to be trees prefer intersecting branches
    attribute_cache: dict = field(default_factory=dict)  # `describe.attributes` per node, read once
    offer_cache: dict = field(default_factory=dict)  # what each edge of a node offers `describe.attributes`
    anchorless_cache: dict = field(default_factory=dict)  # `anchorless_from` per path: the path gate and the planner ask
    narrow_cache: dict = field(default_factory=dict)  # `narrow_anchor` per (relation, object): every attempt asks
    name_cache: dict = field(default_factory=dict)  # an entity's own names and a clue's words, compared as answers are
    census: object | None = None  # `synth.census.Census` of a full dump (`config.census`), for world uniqueness
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # place -> the places it is written within
    facts: gates.FactIndex = field(init=False)

    def __post_init__(self) -> None:
        self.facts = gates.FactIndex(self.graph, self.containers)


@dataclass
class Plan:
    """What a question may say about each entity it does not name, the constraints that implies, the tense
    of every hop and the as-of date. Positions index `path.nodes` (0 = the start entity)."""

    style: str  # "clues" (a sentence per hop) or "nested" (one noun phrase; named start only)
    shape: str  # "tree" when some entity is pinned down only by intersecting branches (`tree_positions`)
    start_described: bool
    nouns: dict[int, str]
    attributes: dict[int, list[Attribute]]
    branches: list[Attribute]
    clues: list[gates.Clue]
    ended: set[int]  # hops whose fact has ended (a marriage with an end date): phrased in the past
    obfuscations: list[str]
    as_of_text: str | None
    unresolved: int | None = None  # the first position no attributes single out (the plan gate rejects it)
    tree_positions: list[int] = field(default_factory=list)  # entities pinned down only by intersecting branches
    branching: bool = False  # the final hop reaches several objects: branches on the answer must decide
    as_of: dt.date | None = None  # the question's as-of: its oldest fact's page revision (`question_as_of`)
    # A start-only plan's seeded draws so far: the whole plan of its attempt goes on from them (`plan_question`).
    draws: random.Random | None = field(default=None, compare=False, repr=False)
    unanchored: bool = False  # a start-only plan left undescribed: no fact its attempt may state anchors it


def seeded_rng(config: QuestionConfig, path: Path, purpose: str) -> random.Random:
    return random.Random(_seed(config.seed, path.path_id, purpose))


def seeded_draw(config: QuestionConfig, path: Path, purpose: str) -> float:
    """The first draw of `seeded_rng`: a path's yes or no for one purpose (a tree, a famous end's keep)."""
    return _first_draw(config.seed, path.path_id, purpose)


@functools.lru_cache(maxsize=1 << 16)
def _seed(seed: int, path_id: str, purpose: str) -> int:
    """What a path's draws for one purpose are seeded by; kept, as each of a path's plans draws anew. It is
    the integer `random.seed` makes of the text `stable_hash(seed, path_id, purpose)` (the text's bytes and
    their SHA-512, `Random.seed` version 2): the same draws, without hashing the text again at every plan."""
    text = stable_hash(seed, path_id, purpose).encode()
    return int.from_bytes(text + hashlib.sha512(text).digest())


@functools.lru_cache(maxsize=1 << 16)
def _first_draw(seed: int, path_id: str, purpose: str) -> float:
    return random.Random(_seed(seed, path_id, purpose)).random()


def _noun_for(ctx: QuestionContext, title: str, class_noun: bool = False) -> tuple[str | None, str | None]:
    """The noun an entity is described by and its checkable type: the lead sentence's noun phrase when its
    head is a known noun that agrees with the entity's class ("Ukrainian ska band" for a Band), else (or
    with `class_noun`: the lead's phrase is what a search finds the entity by) the class noun ("television
    series", never "American adult" from "an American adult animated series")."""
    info = ctx.entities.get(title)
    return _described_by(info.type, info.description, class_noun) if info else (None, None)


@functools.lru_cache(maxsize=1 << 16)
def _described_by(entity_type: str, description: str, class_noun: bool) -> tuple[str | None, str | None]:
    """`_noun_for` of an entity's type and lead sentence, kept: every attempt of every path asks again."""
    coarse = type_noun(entity_type)
    checkable = None if coarse == "entity" else coarse
    lead = None
    if not (class_noun and checkable):
        lead = load_ontology().lead_noun(lead_noun_phrase(description), entity_type)
    return lead or checkable, checkable


def question_as_of(path: Path, snapshot: dt.date) -> dt.date:
    """A question's as-of: the oldest revision date of the pages of its facts that can change (of all its
    facts when none can), never after the snapshot. A fact is as of its own page's revision, so a 2010
    estimate read from a 2012 revision is not asked "as of 2017"; a birth date read from an old page does not
    date a spouse read from a new one."""
    dated = [(min(hop.provenance.timestamp.date(), snapshot), hop) for hop in path.hops]
    changeable = [day for day, hop in dated if _changeable(hop, day)]
    return min(changeable or [day for day, _ in dated], default=snapshot)


def _ended(hop, as_of: dt.date) -> bool:
    return has_ended({q.key: q.value for q in hop.qualifiers}, as_of)


def _outlived(ctx, hop, as_of: dt.date) -> bool:
    """A fact that can change, of a subject dead by the snapshot (the club a footballer played for, a party),
    is over though no end qualifier says so: phrased in the past, with no as-of date to make it current. Only
    a link to another entity ends so: a dead man's count of children is still asked "How many"."""
    node = ctx.facts.node(hop.head)
    return (hop.value_type == "entity" and node is not None
            and is_mutable(hop.relation, hop.value_type, {q.key: q.value for q in hop.qualifiers})
            and ctx.facts.died_before(node, as_of))


def _changeable(hop, as_of: dt.date) -> bool:
    """A fact that can still change after the snapshot: not an ended one, but a running term that is to end."""
    qualifiers = {q.key: q.value for q in hop.qualifiers}
    return not _ended(hop, as_of) and (is_mutable(hop.relation, hop.value_type, qualifiers) or "end" in qualifiers)


def _adjacent_relations(path: Path, position: int) -> set[str]:
    """The relations of the hops into and out of a position: an attribute over one of them would state
    another object of the hop (or the hop itself, read backwards)."""
    return {path.hops[i].relation for i in (position - 1, position) if 0 <= i < len(path.hops)}


def _describe(ctx: QuestionContext, path: Path, ids: tuple[int, ...], position: int, rng: random.Random,
              reached: set[int] | None, attempt: int = 0,
              start_only: bool = False) -> tuple[str | None, list[gates.Clue], list[Attribute] | None, bool]:
    """The noun, type clue and attributes that describe the node at `position` among its competitors (the
    objects its hop `reached`, or (None) for the start every entity that fits the description), and
    whether they single it out. From the second `attempt` on the noun is the class noun; from the third
    the attributes leave out what the entity's own lead sentence says and a seeded share of the rest, so
    each attempt describes it afresh. For a `start_only` plan, no attributes (None) when none of the
    attempt's facts is the named anchor the start needs (`_unanchored`): `start_gate` turns it down unread."""
    config = ctx.config
    noun, checkable = _noun_for(ctx, path.nodes[position], attempt >= CLASS_NOUN_ATTEMPT)
    base = [gates.Clue(position=position, type_noun=checkable)] if checkable else []
    hop_in = path.hops[position - 1].relation if position > 0 else None
    lead = None
    if attempt >= FRESH_ATTEMPT:
        info = ctx.entities.get(path.nodes[position])
        lead = info.description if info else ""
    options = describe.attributes(ctx, ids[position], position, rng, checkable in PERSON_NOUNS,
                                  _adjacent_relations(path, position), set(path.nodes), noun or "", hop_in, lead)
    if attempt >= FRESH_ATTEMPT:
        options = [o for o in options if rng.random() >= WITHHELD_SHARE]
    if reached is None and start_only and _unanchored(ctx, options):
        return noun, base, None, False
    if reached is None:
        minimum = max(config.start_attributes - len(base), 1)

        def fits(clues):
            return gates.described_candidates(ctx.facts, clues)

        def pick(candidates):
            chosen = _choose_intersection(ctx, candidates, ids[position], base) if _tree_drawn(ctx, path) else None
            chosen = chosen or describe.choose(list(candidates), fits, ids[position], base, minimum,
                                               config.max_attributes, _described_each(ctx))
            if config.require_named_anchor and not world_unique(ctx, [*base, *(a.clue for a in chosen or [])]):
                return _anchored(ctx, candidates, fits, ids[position], base, minimum) or chosen
            return chosen
    else:
        def pick(candidates):
            minimum = min(0 if bare_intermediates(attempt) else config.attributes_per_entity, len(candidates))
            return _choose_needing_hop(ctx, candidates, ids[position], base, minimum, reached)
    chosen = _avoiding_identifying(ctx, options, pick)
    # Nothing singles it out: keep a plain description and let the plan gate count why.
    minimum = max(config.start_attributes - len(base), 1) if reached is None else config.attributes_per_entity
    return noun, base, chosen if chosen is not None else options[:minimum], chosen is not None


def _avoiding_identifying(ctx: QuestionContext, options: list[Attribute], pick) -> list[Attribute] | None:
    """`pick(options)` over the facts that do not identify the entity in the world (`gates.identifies`: "a
    country whose capital is London"); over all of them only when those cannot single it out, so that the
    `identifying_clue` gate counts why the question is rejected."""
    open_options = [o for o in options if not gates.identifies(ctx.facts, o.clue)]
    chosen = pick(open_options)
    if chosen is None and len(open_options) < len(options):
        chosen = pick(options)
    return chosen


def named_anchor(clue: gates.Clue) -> bool:
    """Whether a clue states a fact whose object is a page (a place, a person, a work): a named anchor."""
    return bool(clue.attribute and clue.object and not clue.object.startswith(LITERAL_PREFIX))


def narrow_anchor(ctx: QuestionContext, clue: gates.Clue) -> bool:
    """A named anchor that is no hub of the whole wiki (`gates.broad_anchor`) nor a place alone
    (`place_anchor`): what keeps a start's description unique beyond the slice when no census is given. Kept
    per fact (`ctx.narrow_cache`, read first: every attempt at a path asks of the same facts, a start's
    description of each of them several times)."""
    key = (clue.attribute, clue.object)
    if (found := ctx.narrow_cache.get(key)) is None:
        found = kept(ctx.narrow_cache, key, _narrow, ctx, clue)
    return found


def _narrow(ctx: QuestionContext, clue: gates.Clue) -> bool:
    return named_anchor(clue) and gates.broad_anchor(ctx.facts, clue) is None and not place_anchor(clue)


def place_anchor(clue: gates.Clue) -> bool:
    """Whether a clue names where its subject lies, is based, was born or died (`describe`'s place
    relations) and the broad-anchor table reads such a fact as no anchor of its own (`places.anchor_alone`
    false: any town holds many buildings, companies and natives, so "a building in Oxford" fits hundreds)."""
    return clue.attribute in describe.attribute_table()["places"] and not gates.broad_anchors()["places"]["anchor_alone"]


def world_holders(ctx: QuestionContext, clue: gates.Clue) -> float:
    """How many subjects of the whole wiki state the clue's fact: the census's count of a full dump when given,
    else the reviewed prior (`gates.prior_holders`, data/questions/world_holders.toml)."""
    if ctx.census is None:
        return gates.prior_holders(ctx.facts, clue)
    value = split_literal_key(clue.object)[1] if clue.object.startswith(LITERAL_PREFIX) else clue.object
    return ctx.census.holders(clue.attribute, value)


WORLD_FITS_TAG = "world_fits:"  # a kept question's obfuscation: `world_fits` of its described start


def world_fits(ctx: QuestionContext, clues: list[gates.Clue]) -> tuple[float, str] | None:
    """About how many entities of the whole wiki fit a start's description, and the relation that bounds it:
    the fewest wiki holders of one stated fact (`world_holders`), times the share of the slice's holders of
    that fact that the whole description keeps. Without a census only named anchors are counted (a date or a
    number alone fits thousands); None when no stated fact is counted."""
    counted = [c for c in clues if c.attribute and c.object and (ctx.census is not None or named_anchor(c))]
    if not counted:
        return None
    base = [c for c in clues if not c.attribute]
    fits = len(gates.described_candidates(ctx.facts, clues))

    def world(clue: gates.Clue) -> float:
        slice_holders = len(gates.described_candidates(ctx.facts, [*base, clue])) or 1
        return world_holders(ctx, clue) * fits / slice_holders
    return min((world(c), c.attribute) for c in counted)


def start_described(ctx: QuestionContext, path: Path) -> bool:
    """Whether the path's start is described rather than named: its first seeded draw, the same in every plan
    (`plan_question`)."""
    config = ctx.config
    return _drawn_shape(config.seed, path.path_id, config.describe_start, ctx.facts.path_ids(path) is not None,
                        len(path.hops), None)[0]


def anchorless_from(ctx: QuestionContext, path: Path) -> int | None:
    """The first attempt from which no description of the path's start can meet the named-anchor rule
    (`world_unique_reason` without a census or prior), so that every start-only plan of a described start
    fails `start_gate`: 1 when none of the facts any attempt may state of it (`describe.offered`) is a narrow
    named anchor, `FRESH_ATTEMPT` when each such anchor is named in its lead sentence (which fresh attempts
    leave out: `describe.copies_lead`), else None. Kept per path (`ctx.anchorless_cache`)."""
    return kept(ctx.anchorless_cache, gates.path_key(path), _anchorless_from, ctx, path)


_MISSING = object()


def kept(cache: dict, key, make, *args):
    """`make(*args)`, kept in one of the context's caches under `key`; a cache that reaches
    `describe.MAX_CACHED` entries starts afresh, as the context's other caches do."""
    if (found := cache.get(key, _MISSING)) is _MISSING:
        if len(cache) >= describe.MAX_CACHED:
            cache.clear()
        found = cache[key] = make(*args)
    return found


def _anchorless_from(ctx: QuestionContext, path: Path) -> int | None:
    ids = ctx.facts.path_ids(path)
    if ids is None:
        return None
    checkable = _noun_for(ctx, path.nodes[0])[1]
    offered = describe.offered(ctx, ids[0], 0, checkable in PERSON_NOUNS, _adjacent_relations(path, 0),
                               set(path.nodes))
    if _unanchored(ctx, offered):
        return 1
    info = ctx.entities.get(path.nodes[0])
    lead = info.description if info else ""
    if _unanchored(ctx, [o for o in offered if not describe.copies_lead(lead, o)]):
        return FRESH_ATTEMPT
    return None


def _unanchored(ctx: QuestionContext, options: list[Attribute] | tuple[Attribute, ...]) -> bool:
    """Whether no description chosen among `options` can meet the named-anchor rule (a start's, without a
    census or prior: `world_unique_reason`), as none of them is a narrow named anchor."""
    return (ctx.config.require_named_anchor and not counts_world_fits(ctx)
            and not any(narrow_anchor(ctx, option.clue) for option in options))


def counts_world_fits(ctx: QuestionContext) -> bool:
    """Whether world uniqueness is estimated (`world_fits`: a census, or the prior with `world_prior`) rather
    than granted by a named anchor that is no hub (`narrow_anchor`)."""
    return ctx.census is not None or ctx.config.world_prior


def world_unique_reason(ctx: QuestionContext, clues: list[gates.Clue]) -> str | None:
    """Why a start's description (its `clues`) may fit many entities of the whole wiki, however few of the
    slice, or None: `world_fits` above `census_max_fits` where that is estimated (`counts_world_fits`), else
    no named anchor that is no hub (`narrow_anchor`)."""
    if not counts_world_fits(ctx):
        if any(narrow_anchor(ctx, c) for c in clues):
            return None
        broad = [why for c in clues if named_anchor(c) and (why := gates.broad_anchor(ctx.facts, c))]
        places = [c.object for c in clues if named_anchor(c) and place_anchor(c)]
        if broad or places:
            anchors = [*broad, *(f"{place!r} is a place" for place in places)]
            return f"only broad or place anchors ({'; '.join(anchors)}): no census, a narrow named anchor is required"
        return "no stated fact names a page (no census: a named anchor is required)"
    found = world_fits(ctx, clues)
    if found is None:
        return ("no stated fact the census counts (dates and types only)" if ctx.census is not None
                else "no stated fact names a page (no census: a named anchor is required)")
    estimate, relation = found
    if estimate > ctx.config.census_max_fits:
        source = "the census's wiki" if ctx.census is not None else "the wiki (prior, data/questions/world_holders.toml)"
        return f"about {estimate:.0f} entities of {source} fit the start's description (its {relation} fact the rarest)"
    return None


def world_unique(ctx: QuestionContext, clues: list[gates.Clue]) -> bool:
    """Whether a start's description is unique in the whole wiki by the run's rule (`world_unique_reason`)."""
    return world_unique_reason(ctx, clues) is None


def _anchored(ctx: QuestionContext, options: list[Attribute], fits, target: int, base: list[gates.Clue],
              minimum: int) -> list[Attribute] | None:
    """A start description that states a narrow named anchor first (the rarest, by the fewest wiki holders of
    `world_holders`, where those are counted: `counts_world_fits`), then whatever else singles the start out
    and keeps it unique in the whole wiki (`world_unique`); None if none does. Under the named-anchor rule the
    facts' order stands: rarer anchors are the pages that find their subject in one search."""
    anchors = [o for o in options if narrow_anchor(ctx, o.clue)]
    if counts_world_fits(ctx):
        anchors.sort(key=lambda o: world_holders(ctx, o.clue))
    for anchor in anchors:
        rest = [o for o in options if o is not anchor and o.relation != anchor.relation]
        more = describe.choose(rest, fits, target, [*base, anchor.clue], max(minimum - 1, 0),
                               ctx.config.max_attributes - 1, _described_each(ctx))
        if more is not None and world_unique(ctx, [*base, anchor.clue, *(o.clue for o in more)]):
            return [anchor, *more]
    return None


def _described_each(ctx: QuestionContext):
    """`describe.choose`'s `each` for a start's description (its fits: `gates.described_candidates`)."""
    return functools.partial(gates.described_each, ctx.facts)


def _loose(ctx: QuestionContext, options: list[Attribute], target: int, base: list[gates.Clue]) -> list[Attribute]:
    """The options that, stated with `base` alone, fit some entity of the whole graph besides `target`: the
    branches of a tree, none of which is a shortcut to it."""
    alone = gates.described_each(ctx.facts, base, [o.clue for o in options])
    return [o for o, fitting in zip(options, alone, strict=True) if fitting != {target}]


MAX_FIRST_BRANCHES = 6  # first branches tried when describing a start drawn to be a tree


def _tree_drawn(ctx: QuestionContext, path: Path) -> bool:
    """Whether the path is drawn to be a tree (a seeded draw at the walk's `tree_share`): its start is then
    described by attributes that only together single it out, where it has such attributes."""
    return seeded_draw(ctx.config, path, "tree") < ctx.tree_share


def _choose_intersection(ctx: QuestionContext, options: list[Attribute], target: int,
                         base: list[gates.Clue]) -> list[Attribute] | None:
    """Two or more attributes of which none, with the type, singles `target` out over the whole graph, chosen
    until together they do and each is needed: the start is where the branches intersect. None if none do."""
    loose = _loose(ctx, options, target, base)

    def fits(clues):
        return gates.described_candidates(ctx.facts, clues)
    for first in loose[:MAX_FIRST_BRANCHES]:  # greedy from each first branch: the narrowest may lead nowhere
        rest = [o for o in loose if o is not first and (o.relation != first.relation or (o.several and first.several))]
        more = describe.choose(rest, fits, target, [*base, first.clue], 1, ctx.config.max_attributes - 1,
                               _described_each(ctx))
        if more is not None and not gates.start_intersection(ctx.facts, [*base, first.clue, *(a.clue for a in more)],
                                                             target):
            return [first, *more]
    return None


CLASS_NOUNS = "nouns:class"  # the obfuscation that marks a plan describing entities by their class noun
PLAN_ATTEMPT = "plan:"  # the obfuscation that records which attempt's plan a question was written from
CLASS_NOUN_ATTEMPT = 1  # attempts from this one on describe entities by their class noun
FRESH_ATTEMPT = 2  # attempts from this one draw attributes afresh: none the lead sentence states, a share withheld
WITHHELD_SHARE = 0.3  # share of an entity's attributes a fresh attempt leaves out (a seeded draw per attempt)


def bare_intermediates(attempt: int) -> bool:
    """Whether an attempt describes each intermediate by no more than its hop needs to single it out (often
    its noun alone, "a writer"): every other fresh attempt, since an attribute added only for colour ("a
    writer born in Old Town, Maine") is what a description search finds the entity by, skipping the hops
    before it."""
    return attempt >= FRESH_ATTEMPT and attempt % 2 == 1


def plan_attempt(obfuscations: list[str]) -> int:
    """The attempt whose plan a question was written from (0 when none is recorded)."""
    return next((int(o.removeprefix(PLAN_ATTEMPT)) for o in obfuscations if o.startswith(PLAN_ATTEMPT)), 0)


def plan_question(ctx: QuestionContext, path: Path, style: str | None = None, attempt: int = 0,
                  start_only: bool = False, start: Plan | None = None) -> Plan:
    """Describe the start entity (unless it is named), every intermediate, and for a tree question the
    answer's branches, each chosen until the graph proves the description unique; then the tense of every
    hop and the as-of statement. The clues recorded for the gates are exactly what the text states.

    `attempt` 0 describes entities by their lead sentence's noun phrase; later attempts (the stage tries up
    to `plan_attempts` until one passes its gates) by their class noun, and from `FRESH_ATTEMPT` on by
    attributes drawn afresh with a seeded draw of their own. Whether the start is described and the style
    are drawn once per path, the same in every attempt. With `start_only` only the start is described (as
    the whole plan describes it), with no tense and no obfuscations: what the start's own gates need to turn
    an attempt down cheaply (a start no fact of the attempt can anchor is left undescribed: `unanchored`).
    Given that plan as `start` (one `start_gate` let through), the whole plan of the same attempt takes its
    start as described there and goes on with its draws, as if it had described the start itself."""
    config, graph = ctx.config, ctx.graph
    hops = len(path.hops)
    ids = ctx.facts.path_ids(path)
    if start is not None:
        start_described, style, rng = start.start_described, start.style, _continued(start.draws)
    elif attempt:
        start_described, style = _drawn_shape(config.seed, path.path_id, config.describe_start,
                                              ids is not None, hops, style)
        rng = seeded_rng(config, path, f"{PLAN_ATTEMPT}{attempt}")
    else:
        rng = seeded_rng(config, path, "plan")
        start_described, style = _draw_shape(rng, config.describe_start, ids is not None, hops, style)
    nouns: dict[int, str] = {}
    attributes: dict[int, list[Attribute]] = {}
    clues: list[gates.Clue] = []
    obfuscations: list[str] = []
    tree_positions: list[int] = []
    unresolved = None
    described_positions = ([0] if start_described else []) + ([] if start_only else
        list(range(1, hops)) if style == "clues" else list(range(max(hops - 1, 1), hops)))
    positions = described_positions if ids is not None else []
    if start is not None:
        nouns, attributes, clues = dict(start.nouns), dict(start.attributes), list(start.clues)
        tree_positions, unresolved = list(start.tree_positions), start.unresolved
        obfuscations = _entity_obfuscations(path, 0, nouns[0], attributes[0]) if 0 in attributes else []
        positions = [p for p in positions if p] if unresolved is None else []
    for position in positions:
        reached = None
        if position:
            relation = graph.relation_id(path.hops[position - 1].relation)
            reached = set(ctx.facts.stated(ids[position - 1], relation)[0])
        noun, base, chosen, unique = _describe(ctx, path, ids, position, rng, reached, attempt, start_only)
        if chosen is None:
            return Plan(style, "chain", start_described, {0: noun or "entity"}, {}, [], base, set(), [], None, 0,
                        unanchored=True)
        if style == "nested" and position and not chosen:
            continue  # a bare ", a person," appositive adds nothing: the relation alone describes it
        nouns[position] = noun or "entity"
        attributes[position] = chosen
        clues += base + [a.clue for a in chosen]
        said = base + [a.clue for a in chosen]
        if unique and (needs_intersection(ctx, reached, ids[position], said) if reached is not None
                       else gates.start_intersection(ctx.facts, said, ids[position]) is None):
            tree_positions.append(position)
        if not start_only:
            obfuscations += _entity_obfuscations(path, position, nouns[position], chosen)
        if not unique:
            unresolved = position
            break  # the plan gate rejects the path here: choosing attributes for the rest would be wasted
    for position in described_positions if unresolved is not None else []:
        nouns.setdefault(position, _noun_for(ctx, path.nodes[position], attempt >= CLASS_NOUN_ATTEMPT)[0] or "entity")  # text stays writable
    if start_only:
        return Plan(style, "tree" if tree_positions else "chain", start_described, nouns, attributes, [], clues,
                    set(), [], None, unresolved, tree_positions, draws=rng)
    branches: list[Attribute] = []
    branching = False
    if ids is not None and unresolved is None:
        final = graph.objects(ids[-2], graph.relation_id(path.hops[-1].relation))
        branching = len(final) > 1
        if branching:
            # A branch never names another object of the final hop ("the birthplace that lies in New York
            # City" when New York City is a birthplace too): the objects are alternatives, not landmarks.
            siblings = {graph.label(o) for o in final}
            options = describe.attributes(ctx, ids[-1], hops, rng, answer_type_noun(ctx, path) in PERSON_NOUNS,
                                          _adjacent_relations(path, hops), set(path.nodes) | siblings)
            reached = {int(o) for o in final}
            branches = _avoiding_identifying(
                ctx, options, lambda candidates: _choose_needing_hop(ctx, candidates, ids[-1], [], 1, reached)) or []
            clues += [b.clue for b in branches]
            if branches and needs_intersection(ctx, reached, ids[-1], [b.clue for b in branches]):
                tree_positions.append(hops)
            obfuscations += [f"branch:{b.predicate}" for b in branches]
            obfuscations += [b.obfuscation for b in branches if b.obfuscation]
    as_of, ended, as_of_text = _tense(ctx, path)
    if as_of_text:
        obfuscations.append(f"as_of:{as_of_text}")
    shape = "tree" if tree_positions else "chain"
    obfuscations += [f"style:{style}", f"shape:{shape}", *(f"tree_at:{p}" for p in tree_positions)]
    if attempt >= CLASS_NOUN_ATTEMPT:
        obfuscations.append(CLASS_NOUNS)
    if attempt:
        obfuscations.append(f"{PLAN_ATTEMPT}{attempt}")
    return Plan(style, shape, start_described, nouns, attributes, branches, clues, ended, obfuscations, as_of_text,
                unresolved, tree_positions, branching, as_of)


def _continued(draws: random.Random) -> random.Random:
    """A copy of a start-only plan's draws, for its whole plan to go on from (`copy.copy` of a Random builds
    one seeded from the OS first, then sets its state: twice the time)."""
    rng = random.Random(0)
    rng.setstate(draws.getstate())
    return rng


def _entity_obfuscations(path: Path, position: int, noun: str, chosen: list[Attribute]) -> list[str]:
    return [f"entity:{path.nodes[position]}->{describe.described(noun, chosen)}",
            *(a.obfuscation for a in chosen if a.obfuscation)]


def _draw_shape(rng: random.Random, describe_start: float, describable: bool, hops: int,
                style: str | None) -> tuple[bool, str]:
    """Whether the start is described, and the style unless one is given: a path's first draws."""
    start_described = describable and rng.random() < describe_start
    if style is None:
        named_nested = not start_described and (hops == 1 or rng.random() < {2: 0.5, 3: 0.25}.get(hops, 0.0))
        style = "nested" if named_nested else "clues"
    return start_described, style


@functools.lru_cache(maxsize=1 << 16)
def _drawn_shape(seed: int, path_id: str, describe_start: float, describable: bool, hops: int,
                 style: str | None) -> tuple[bool, str]:
    """`_draw_shape` of a path, kept: every later attempt draws the same (its own draws come from a stream of
    its own)."""
    return _draw_shape(random.Random(_seed(seed, path_id, "plan")), describe_start, describable, hops, style)


def _tense(ctx: QuestionContext, path: Path) -> tuple[dt.date, set[int], str | None]:
    """The question's as-of (`question_as_of`), the hops whose fact has ended (phrased in the past), and the
    as-of date the text states when a fact still running can change (else None)."""
    as_of = question_as_of(path, ctx.as_of)
    ended = {index for index, hop in enumerate(path.hops) if _ended(hop, as_of) or _outlived(ctx, hop, as_of)}
    as_of_text = (month_year(as_of) if any(_changeable(h, as_of) for i, h in enumerate(path.hops) if i not in ended)
                  else None)
    return as_of, ended, as_of_text


def _choose_needing_hop(ctx: QuestionContext, options: list[Attribute], target: int, base: list[gates.Clue],
                        minimum: int, reached: set[int]) -> list[Attribute] | None:
    """Attributes that single `target` out among the objects its hop `reached`; where the hop reaches several,
    preferably ones that alone, over the whole graph, fit others too, so that only the hop and the
    description together find it (a tree) and the description is no shortcut past the hop."""
    def fits(clues):
        return {o for o in reached if all(gates.satisfies(ctx.facts, o, c) for c in clues)}

    def each(said, clues):  # `fits` of `said` plus each clue, what `said` leaves read once per round
        left = fits(said)
        return [{o for o in left if gates.satisfies(ctx.facts, o, clue)} for clue in clues]
    maximum = ctx.config.max_attributes
    chosen = describe.choose(list(options), fits, target, base, minimum, maximum, each)
    if chosen is None or len(reached) < 2 or needs_intersection(ctx, reached, target, base + [a.clue for a in chosen]):
        return chosen
    loose = _loose(ctx, options, target, base)
    alternative = describe.choose(loose, fits, target, base, min(minimum, len(loose)), maximum, each)
    if alternative and needs_intersection(ctx, reached, target, base + [a.clue for a in alternative]):
        return alternative
    return chosen


def needs_intersection(ctx: QuestionContext, reached: set[int], target: int, clues: list[gates.Clue]) -> bool:
    """Whether `target` is pinned down only by intersecting branches: the hop into it reaches several
    objects, and what the text says about it (type, attributes), taken alone over the whole graph, fits
    others too. A description that alone singles it out is a shortcut, not a tree."""
    return len(reached) > 1 and gates.described_candidates(ctx.facts, clues) != {target}


def described_as(plan: Plan, position: int) -> str:
    return describe.described(plan.nouns[position], plan.attributes.get(position, []))


def answer_type_noun(ctx: QuestionContext, path: Path) -> str | None:
    info = ctx.entities.get(path.answer) if path.answer_type == "entity" else None
    noun = type_noun(info.type) if info else "entity"
    return None if noun == "entity" else noun
