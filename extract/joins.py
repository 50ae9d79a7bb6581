"""Phase 2 of the Beam pipeline: the keyed joins.

Only small keyed records cross the shuffle: titles, the link and value targets a unit asks about (once per
unit), redirect pairs. What comes back to a unit is its own fix-ups (final targets of its links, names of
its values, aliases of its entities, outcomes of its redirects and duplicates); `extract.shards` then
rewrites the unit's rows from its parts and writes the output shards. So no step holds more than one unit's
rows, and the shuffle carries keys, not pages. The decisions are plain functions (`title_fixups`,
`duplicate_decisions`, ...) and steps (`UnitKeys`) that the Beam steps of `ExtractGraph` call, as does
`extract.in_process`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from extract.article import named_value_key
from extract.classify import duplicate_rank, pick_duplicate
from extract.tables import STAGE
from extract.units import UnitParts, page_at
from runtime.heap import release_freed_memory
from schemas.wiki import SkippedRecord

REDIRECT_ROUNDS = 6  # pointer doubling: chains of up to 2**(6-1) = 32 redirects resolve; longer ones count as cycles


def step_pointers(joined):
    """One pointer-doubling round at title `p`: each redirect pointing at p moves on to p's own pointer,
    or ends at p when p is not a redirect (a state is (pointer, done))."""
    pointer, grouped = joined
    own = list(grouped["state"])
    for title in grouped["askers"]:
        yield title, own[0] if own else (pointer, True)


def resolve_pointers(pairs: Iterable[tuple[str, str]], rounds: int = REDIRECT_ROUNDS) -> tuple[list, list]:
    """`extract.transforms.ResolveRedirects` in memory, round for round (the same chain limit): the (title, final target)
    pairs of resolved chains, and the titles caught in a cycle."""
    targets: dict[str, str] = {}
    for title, target in pairs:  # OneTargetPerTitle
        targets[title] = max(targets[title], target) if title in targets else target
    state = {title: (target, False) for title, target in targets.items()}
    for _ in range(rounds):
        state = {title: own if own[1] else state.get(own[0], (own[0], True)) for title, own in state.items()}
    return ([(title, pointer) for title, (pointer, done) in state.items() if done],
            [title for title, (_, done) in state.items() if not done])


def unit_redirects(unit, out_dir: str) -> Iterator[tuple[str, str]]:
    """(title, target) for each redirect page of a unit: what redirect resolution starts from."""
    for row in UnitParts(out_dir, unit[0]).rows("redirects"):
        yield row.title, row.target


def unit_titles(unit, out_dir: str) -> Iterator[tuple[str, int]]:
    """(title, 1) for each article of a unit: a title counted twice is contested."""
    for title in UnitParts(out_dir, unit[0]).columns("articles", "title")[0]:
        yield title, 1


def contested_title(grouped):
    title, counts = grouped
    if sum(counts) > 1:
        yield title, True


def contested_articles(unit, out_dir: str, contested: dict):
    """The unit's articles whose title another article shares, with their pages: (title, (key, page))."""
    if not contested:
        return
    parts, pages = UnitParts(out_dir, unit[0]), None
    for key, row in parts.articles():
        if row.title in contested:
            pages = parts.pages() if pages is None else pages
            yield row.title, (key, page_at(pages, key[1]))


def duplicate_decisions(keyed) -> Iterator[tuple[str, tuple]]:
    """`pick_duplicate` over the articles sharing a title: each loser's key ("losers", (key, True)) and its
    `duplicate` skip addressed to its unit ("skips", (unit id, ("skip", skip))). Ties go to the smaller
    key, whatever the runner."""
    _, articles = keyed
    articles = sorted(articles, key=lambda article: article[0])
    _, skips = pick_duplicate([page for _, page in articles])
    order = sorted(range(len(articles)), key=lambda i: duplicate_rank(articles[i][1]), reverse=True)
    for i, skip in zip(order[1:], skips, strict=True):
        key = articles[i][0]
        yield "losers", (key, True)
        yield "skips", (key[0], ("skip", skip))


class UnitKeys:
    """What one unit asks the title join about, each title once per unit, as (title, (kind, value)): its
    kept entities' titles ("entity", (unit id, class)), its link targets ("tail", unit id), its plain-text values
    that could name a page ("name", unit id) and its redirects ("redirect", (unit id, page id, target)).

    One output, not one per kind: the join's shuffle then takes a unit's keys in one piece, and the unit's
    result is let go once that piece is sent (a result read by four steps is held until the last of them
    runs). And it runs once redirect resolution is done (`_resolved`, read for that alone): emitted before,
    every unit's keys wait for the resolved side of the join, and a worker holds them all at once (at
    100,000 articles, 148 MiB in Dask's store)."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def process(self, unit, losers, _resolved):
        unit_id = unit[0]
        parts = UnitParts(self.out_dir, unit_id)
        entities = zip(*parts.columns("entities", "title", "type"), strict=True)
        relations = iter(parts.relations()[0])
        articles = zip(*parts.columns("articles", "skip_reason", "relations"), strict=True)
        tails, names = set(), set()
        for seq, (skip_reason, count) in enumerate(articles):
            if skip_reason is not None:
                continue
            (title, entity_class), page_relations = next(entities), [next(relations) for _ in range(count)]
            if (unit_id, seq) in losers:
                continue
            yield title, ("entity", (unit_id, entity_class))
            for relation in page_relations:
                if relation.tail is not None:
                    tails.add(relation.tail)
                if (name := named_value_key(relation)) is not None:
                    names.add(name)
        yield from ((title, ("tail", unit_id)) for title in sorted(tails))
        yield from ((title, ("name", unit_id)) for title in sorted(names))
        for redirect in parts.rows("redirects"):
            yield redirect.title, ("redirect", (unit_id, redirect.page_id, redirect.target))
        release_freed_memory()


def final_classes(joined):
    """At one article's title, its class sent to each redirect that ends there, as (redirect title,
    ("final_class", class)): what a link through the redirect names, for the range check."""
    _, records = joined
    classes = [value[1] for kind, value in records if kind == "entity"]
    if classes:
        yield from ((title, ("final_class", classes[0])) for kind, title in records if kind == "redirected")


def title_fixups(joined):
    """At one title, the fix-ups of the units that asked about it, as (unit id, fix-up): the outcome of each
    redirect page with this title, the final target of links to it and the class of the page they name (for
    the range check), the page a value spelling it names and its class, and the aliases of the entity it is
    the title of. The title's records are (kind, value): the kinds of `UnitKeys`, its final target if it is a
    resolved redirect ("final") and that target's class ("final_class", `final_classes`), and the resolved
    redirects to it ("alias")."""
    title, records = joined
    grouped: dict[str, list] = {kind: [] for kind in ("entity", "tail", "name", "redirect", "final", "final_class",
                                                      "alias")}
    for kind, value in records:
        grouped[kind].append(value)
    final = grouped["final"][0] if grouped["final"] else None
    for unit_id, page_id, target in grouped["redirect"]:
        if final is not None:
            yield unit_id, ("skip", SkippedRecord(title=title, stage=STAGE, reason="redirect",
                                                  detail=f"-> {final}", page_id=page_id))
        else:
            yield unit_id, ("skip", SkippedRecord(title=title, stage=STAGE, reason="redirect_cycle",
                                                  detail=f"-> {target}", page_id=page_id))
    owners = [unit_id for unit_id, _ in grouped["entity"]]
    named_class = grouped["entity"][0][1] if owners else (grouped["final_class"] or [None])[0]
    if final is not None:
        yield from ((unit_id, ("tail", title, final)) for unit_id in grouped["tail"])
    if named_class is not None:
        yield from ((unit_id, ("tail_class", title, named_class)) for unit_id in grouped["tail"])
    named = sorted(({title} if owners else set()) | ({final} if final is not None else set()))
    if named:
        yield from ((unit_id, ("name", title, (named[0], named_class))) for unit_id in grouped["name"])
    aliases = sorted(set(grouped["alias"]))
    if aliases:
        yield from ((unit_id, ("aliases", title, aliases)) for unit_id in owners)
