"""Grounding: a turn may name only what the question or an earlier observation showed.

A searcher that names an entity or a value before anything showed it knows what it could not know: the
gold path, or a guess. `ungrounded_names` lists what a turn names that way, from two reads:
- the gold path's entities and values (each spelling `critic.evidence.gold_units` knows: titles, their
  bare forms and redirects, a date's or number's spellings) named anywhere in the turn: its reasoning, plans
  and hedges included ("I will open Stephen King"), or its call's arguments;
- every name, date and number the turn writes, gold or not: in its reasoning (hedges included: "I believe
  it is Robert Fox"), the page it opens or searches in, its query, the text it looks for and its answer
  ("Perhaps Atlantis is connected; let me open it").
Spellings of two letters or fewer ("It", a child count "3") are too common to tell a name from a word.
"""

from __future__ import annotations

from critic.evidence import Knowledge
from critic.text import clauses, mentions_any, named_spans, normalize
from schemas.trajectory import Turn

MIN_FORM_CHARS = 3


def _distinctive(forms: tuple[str, ...]) -> list[str]:
    return [f for f in forms if len(normalize(f)) >= MIN_FORM_CHARS]


def ungrounded_names(turn: Turn, knowledge: Knowledge) -> list[str]:
    """What the turn names that neither the question nor an observation before it showed (call before
    `knowledge.add(turn)`)."""
    call = turn.tool_call
    arguments = [str(v) for v in (call.arguments.values() if call is not None else ()) if isinstance(v, str)]
    said = normalize(" ".join([turn.reasoning, *arguments]))
    found = []
    for unit in knowledge.units:
        if unit.kind not in ("entity", "fact"):
            continue
        forms = _distinctive(unit.forms)
        if mentions_any(said, forms) and not mentions_any(knowledge.normalized, forms):
            found.append(unit.label.rsplit("--> ", 1)[-1])
    title = str(call.arguments.get("title", "")) if call is not None else ""
    if call is not None and call.name in ("open_page", "find_in_page") and title and not knowledge.supports(title):
        found.append(title)
    spans = [n for text in [turn.reasoning, *(a for a in arguments if a != title)] for c in clauses(text)
             for n in named_spans(c)]
    found += [n for n in spans if len(normalize(n)) >= MIN_FORM_CHARS and not knowledge.supports(n)]
    return list(dict.fromkeys(found))
