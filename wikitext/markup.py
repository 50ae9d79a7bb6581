"""Cheap, regex-level wikitext functions of stage 1: no full parse of a page happens here.

Parsing a whole page with mwparserfromhell costs about 2 MB/s; most of a page is body text the graph does
not need. These functions find what extraction needs on the raw text instead: the title normalisation of
MediaWiki, redirects and disambiguation markers, the spans of infobox templates (brace matching, skipping
comments and `<nowiki>`-like tags), and the lead section as plain sentences with the links they contain.
Only the infobox spans are handed to mwparserfromhell (`wikitext.infobox`).
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import html
import re
from dataclasses import dataclass, field

from knowledge.templates import separator_templates, template_vocabulary

# ---------------------------------------------------------------------------------------------- titles

NAMESPACE_PREFIXES = frozenset(
    "media special talk user wikipedia wp project file image mediawiki template help category portal draft "
    "module timedtext book education program gadget topic wikt wiktionary w commons meta species wikisource "
    "wikiquote wikinews wikiversity wikivoyage wikibooks wikidata d s q n v b mw".split()
)
# Two- or three-letter language prefixes ("fr:Paris") are interlanguage links, never graph entities.
_LANGUAGE_PREFIX = re.compile(r"^[a-z]{2,3}(?:-[a-z]{2,8})?$")
_SPACES = re.compile(r"[\s_\u00a0]+")
# Bidirectional controls (marks, embeddings, overrides, isolates): MediaWiki strips them from titles, and
# a right-to-left override in a title would reverse how every later mention of it displays.
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@functools.lru_cache(maxsize=1 << 16)  # the same targets recur across a run's pages and in both phases
def normalize_title(raw: str) -> str:
    """A link target or page title as MediaWiki stores it: entities decoded, spaces for underscores,
    section anchor dropped, leading colon dropped, bidi control characters removed, first letter
    upper-cased."""
    title = _BIDI_CONTROLS.sub("", html.unescape(raw)).split("#", 1)[0]
    title = _SPACES.sub(" ", title).strip().lstrip(":").strip()
    return title[:1].upper() + title[1:]


def title_namespace(title: str) -> str | None:
    """The namespace or interwiki prefix of a link target (lower case), None for a main-namespace title."""
    stripped = title.strip().lstrip(":")
    if ":" not in stripped:
        return None
    prefix = _SPACES.sub(" ", stripped.split(":", 1)[0]).strip().lower()
    if prefix in NAMESPACE_PREFIXES or prefix.endswith(" talk") or _LANGUAGE_PREFIX.match(prefix):
        return prefix
    return None


def is_entity_link(target: str) -> bool:
    """True when a link target names a main-namespace article (not a file, category, section or interwiki)."""
    stripped = target.strip()
    return bool(stripped) and not stripped.startswith("#") and title_namespace(stripped) is None


# --------------------------------------------------------------------------------- page classification

_REDIRECT = re.compile(r"^\s*#\s*redirect\s*:?\s*\[\[([^\]\|\n]+)", re.IGNORECASE)
DISAMBIGUATION_TEMPLATES = frozenset(
    {
        "disambiguation", "disambig", "disamb", "dab", "dabpage", "disambiguation page", "hndis", "hndisambig",
        "geodis", "geo-dis", "numberdis", "mil-unit-dis", "shipindex", "letter-numbercombdisambig",
        "letter-number combination disambiguation", "disambiguation cleanup", "dmbox",
    }
)
_DAB_TEMPLATE = re.compile(
    r"\{\{\s*(?:template\s*:\s*)?(?:"
    + "|".join(re.escape(name).replace(r"\ ", r"[\s_]+") for name in sorted(DISAMBIGUATION_TEMPLATES, key=len, reverse=True))
    + r"|[^{}|\n]{0,40}?[\s_]disambiguation)\s*(?:\||\}\})",
    re.IGNORECASE,
)
_DAB_MAGIC = "__DISAMBIG__"


def redirect_target(text: str) -> str | None:
    """The target of a `#REDIRECT [[...]]` page text, normalised; None when the text is not a redirect."""
    match = _REDIRECT.match(text)
    return normalize_title(match.group(1)) if match else None


def is_disambiguation(title: str, text: str) -> bool:
    """A disambiguation page: "(disambiguation)" title, a dab template ({{disambiguation}}, {{hndis}}, ...,
    or any "... disambiguation" template) or the __DISAMBIG__ magic word."""
    if title.rstrip().lower().endswith("(disambiguation)") or _DAB_MAGIC in text:
        return True
    return _DAB_TEMPLATE.search(text) is not None


_LIST_SUFFIXES = (" filmography", " discography", " bibliography", " videography", " awards and nominations")


def is_list_page(title: str) -> bool:
    """"List of ...", the lists named by their subject ("Christopher Nolan filmography") and those named by a
    plural head ("Spouses of the Prime Ministers of the United Kingdom"; `list_title_heads` in the vocabulary)."""
    if title.startswith(("List of ", "Lists of ")) or title.endswith(_LIST_SUFFIXES):
        return True
    head, of, _ = title.partition(" of ")
    return bool(of) and head.lower() in template_vocabulary().list_title_heads


# ------------------------------------------------------------------------------------- span scanning

# Comments and tags whose content is not markup are skipped as a whole while matching braces.
_OPAQUE = r"<!--.*?(?:-->|\Z)|<(nowiki|pre|math|syntaxhighlight|source|code)\b[^>]*?(?:/>|>.*?(?:</\1\s*>|\Z))"
_BRACES = re.compile(_OPAQUE + r"|\{\{|\}\}", re.IGNORECASE | re.DOTALL)
_BRACKETS = re.compile(_OPAQUE + r"|\[\[|\]\]", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)

BOX_NAMES = ("infobox", "taxobox", "automatic taxobox", "speciesbox", "subspeciesbox", "chembox", "drugbox")
_BOX_START = re.compile(
    r"\{\{\s*(?:template\s*:\s*)?(?P<name>(?:infobox|taxobox|automatic[ _]taxobox|speciesbox|subspeciesbox|"
    r"chembox|drugbox)(?=[\s_|}<])[^|{}<\n]*)",
    re.IGNORECASE,
)


class BrokenMarkup(ValueError):
    """An infobox template that never closes, or a span whose link brackets do not balance."""


class TooDeep(ValueError):
    """Template nesting deeper than mwparserfromhell handles (past its limit it silently yields text)."""


# mwparserfromhell stops recursing at 100 tokenizer contexts; a template level costs two (template, parameter).
MAX_TEMPLATE_DEPTH = 40


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    name: str


def matching_braces(text: str, start: int) -> tuple[int, int]:
    """The end offset (exclusive) of the `{{...}}` template opening at `start` (-1 when it never closes) and
    the deepest template nesting inside it."""
    depth = deepest = 0
    for match in _BRACES.finditer(text, start):
        token = match.group(0)
        if token == "{{":
            depth += 1
            deepest = max(deepest, depth)
        elif token == "}}":
            depth -= 1
            if depth == 0:
                return match.end(), deepest
    return -1, deepest


def brackets_balanced(span: str) -> bool:
    depth = 0
    for match in _BRACKETS.finditer(span):
        token = match.group(0)
        if token == "[[":
            depth += 1
        elif token == "]]":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def normalize_template_name(raw: str) -> str:
    """`Template:Infobox_person` -> "infobox person" (lower case, spaces, no namespace, no comments)."""
    name = _COMMENT.sub("", raw)
    name = _SPACES.sub(" ", name).strip().lower()
    if name.startswith("template:"):
        name = name[len("template:") :].strip()
    return name


def infobox_spans(text: str) -> list[Span]:
    """Top-level infobox templates of a page, found by brace matching on the raw text.

    Infoboxes nested inside an earlier span are left to the parser of that span. Raises BrokenMarkup when
    an infobox never closes or its link brackets do not balance (its facts cannot be read reliably), and
    TooDeep when its templates nest deeper than the parser can follow.
    """
    spans: list[Span] = []
    comments = _comment_ranges(text)
    position = 0
    while match := _BOX_START.search(text, position):
        start = match.start()
        if (comment_end := _comment_end_around(comments, start)) is not None:
            position = comment_end  # nothing inside a comment counts: skip all of it at once
            continue
        end, deepest = matching_braces(text, start)
        name = normalize_template_name(match.group("name"))
        if end < 0:
            raise BrokenMarkup(f"template {{{{{name}}}}} at offset {start} never closes")
        if deepest > MAX_TEMPLATE_DEPTH:
            raise TooDeep(f"templates nested {deepest} deep inside {{{{{name}}}}} (limit {MAX_TEMPLATE_DEPTH})")
        if not brackets_balanced(text[start:end]):
            raise BrokenMarkup(f"unbalanced [[ ]] inside {{{{{name}}}}} at offset {start}")
        spans.append(Span(start, end, name))
        position = end
    return spans


_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)  # an unclosed comment runs to the end of the page


def _comment_ranges(text: str) -> tuple[list[int], list[int]]:
    """Starts and ends of the page's HTML comments, found in one pass (a per-box search back and forth
    for `<!--` and `-->` made pages with many boxes, or boxes inside a long comment, quadratic)."""
    if "<!--" not in text:
        return [], []
    found = [(match.start(), match.end()) for match in _COMMENT.finditer(text)]
    return [start for start, _ in found], [end for _, end in found]


def _comment_end_around(comments: tuple[list[int], list[int]], offset: int) -> int | None:
    """The end of the comment `offset` lies in, or None when it lies in none."""
    starts, ends = comments
    index = bisect.bisect_right(starts, offset) - 1
    return ends[index] if index >= 0 and offset < ends[index] else None


# ----------------------------------------------------------------------------------- dates and numbers

MONTHS = {
    name: index
    for index, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_TEXT_DATES = [
    re.compile(r"^(?P<year>\d{4})-(?P<m>\d{1,2})(?:-(?P<day>\d{1,2}))?$"),
    re.compile(r"^(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH + r",?\s+(?P<year>\d{3,4})$", re.IGNORECASE),
    re.compile(r"^" + _MONTH + r"\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<year>\d{3,4})$", re.IGNORECASE),
    re.compile(r"^" + _MONTH + r",?\s+(?P<year>\d{3,4})$", re.IGNORECASE),
    re.compile(r"^(?P<year>\d{4})$"),
]


def iso_date(year: int | str | None, month: int | str | None = None, day: int | str | None = None) -> str | None:
    """YYYY-MM-DD, YYYY-MM or YYYY from parts; None when the parts are not a valid (partial) date."""
    try:
        y = int(str(year).strip())
    except (TypeError, ValueError):
        return None
    if not 1 <= y <= 9999:
        return None
    try:
        m = int(str(month).strip()) if month not in (None, "") else None
    except ValueError:
        m = MONTHS.get(str(month).strip().lower().rstrip("."))
    if m is None:
        return f"{y:04d}"
    if not 1 <= m <= 12:
        return None
    try:
        d = int(str(day).strip()) if day not in (None, "") else None
    except ValueError:
        d = None
    if d is None:
        return f"{y:04d}-{m:02d}"
    try:
        return dt.date(y, m, d).isoformat()
    except ValueError:
        return None


def parse_text_date(text: str) -> str | None:
    """A written date ("4 August 1961", "August 4, 1961", "1961-08-04", "August 1961", "1961") as ISO."""
    text = _SPACES.sub(" ", text).strip().strip(",.;")
    for pattern in _TEXT_DATES:
        match = pattern.match(text)
        if match:
            parts = match.groupdict()
            return iso_date(parts["year"], parts.get("m") or parts.get("month"), parts.get("day"))
    return None


def complete_date(iso: str | None) -> dt.date | None:
    if iso and len(iso) == 10:
        return dt.date.fromisoformat(iso)
    return None


_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*(?P<scale>thousand|million|billion|trillion)?"
    r"\s*(?P<unit>[A-Za-z%°$€£¥][\w/%°²³.\- ]{0,24})?$"
)


def plain_decimal(number: str) -> str:
    """ "1,234.50" -> "1234.50": the plain decimal string literals are stored as."""
    return number.replace(",", "").lstrip("+")


def parse_quantity(text: str) -> tuple[str, str | None] | None:
    """A number with an optional scale word and unit: "346 km" -> ("346", "km"), "1.2 million" ->
    ("1200000", None); None when the text is not a number."""
    match = _QUANTITY.match(text.strip())
    if not match:
        return None
    number = plain_decimal(match.group("number"))
    if scale := match.group("scale"):
        scaled = float(number) * _SCALES[scale]
        number = str(int(scaled)) if scaled.is_integer() else repr(scaled)
    unit = (match.group("unit") or "").strip().rstrip(".") or None
    return number, unit


# ------------------------------------------------------------------------------------- the lead section

_HEADING = re.compile(r"^=[^\n]*=[ \t]*$", re.MULTILINE)
_REF = re.compile(r"<ref\b[^>/]*/>|<ref\b[^>]*>.*?(?:</ref\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_OPAQUE_BLOCK = re.compile(_OPAQUE, re.IGNORECASE | re.DOTALL)
_TABLE = re.compile(r"^\{\|.*?^\|\}", re.MULTILINE | re.DOTALL)
_FILE_LINK = re.compile(r"\[\[\s*:?\s*(?:file|image|media|category)\s*:", re.IGNORECASE)
_LINK = re.compile(r"\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]([a-z]*)")
_EXTERNAL = re.compile(r"\[(?:https?:)?//[^\s\]]+(?:\s+([^\]]*))?\]")
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_QUOTES = re.compile(r"'{2,}")
_MAGIC = re.compile(r"__[A-Z]+__")
_EMPTY_PARENS = re.compile(r"\(\s*(?:[,;:]\s*)*\)")
_PARENS_LEADING_PUNCT = re.compile(r"\(\s*(?:[,;]\s*)*")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)])")
_SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATION_END = re.compile(
    r"(?:\b[A-Z]|\b(?:St|Mr|Mrs|Ms|Dr|Jr|Sr|Prof|Gen|Col|Lt|Sgt|Capt|Rev|Hon|Mt|Ft|No|Nos|Inc|Ltd|Co|Corp|vs|"
    r"c|ca|approx|est|U\.S|U\.K|e\.g|i\.e|etc|al|cf|fl|b|d|r|op|vol|pp|p))\.[\"')\]]*$"
)


def lead_section(text: str) -> str:
    """The wikitext before the first section heading."""
    match = _HEADING.search(text)
    return text[: match.start()] if match else text


@dataclass
class LeadLink:
    target: str
    label: str
    start: int
    end: int


@dataclass
class Sentence:
    text: str
    links: list[LeadLink] = field(default_factory=list)


def _remove_spans(text: str, spans: list[tuple[int, int]], render) -> str:
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(text[position:start])
        pieces.append(render(text[start:end]))
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _top_level_templates(text: str) -> list[tuple[int, int]]:
    spans, depth, start = [], 0, 0
    for match in _BRACES.finditer(text):
        token = match.group(0)
        if token == "{{":
            if depth == 0:
                start = match.start()
            depth += 1
        elif token == "}}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, match.end()))
    if depth > 0:
        spans.append((start, len(text)))
    return spans


def _file_links(text: str) -> list[tuple[int, int]]:
    spans, position = [], 0
    while match := _FILE_LINK.search(text, position):
        depth, end = 0, len(text)
        for token in _BRACKETS.finditer(text, match.start()):
            depth += 1 if token.group(0) == "[[" else -1 if token.group(0) == "]]" else 0
            if depth == 0:
                end = token.end()
                break
        spans.append((match.start(), end))
        position = end
    return spans


_SPLIT_TOKENS = re.compile(r"\{\{|\}\}|\[\[|\]\]|\|")


def split_top_level(inner: str) -> list[str]:
    """Split a template body on `|` outside nested templates and links."""
    parts, depth, start = [], 0, 0
    for match in _SPLIT_TOKENS.finditer(inner):
        token = match.group(0)
        if token in ("{{", "[["):
            depth += 1
        elif token in ("}}", "]]"):
            depth = max(depth - 1, 0)
        elif depth == 0:
            parts.append(inner[start : match.start()])
            start = match.end()
    parts.append(inner[start:])
    return parts


_TEMPLATE_NAME = re.compile(r"\{\{\s*([^|{}]*)")
_INLINE_DATE_TEMPLATES = re.compile(r"^(birth|death|start|end|film|release)[ _-]?date|^(dob|bda|dda|dts)$")
_SYMBOL_TEMPLATES = separator_templates("lead")  # {{ndash}} -> "–" (data/separator_templates.tsv, `lead`)
_FIRST_ARGUMENT_TEMPLATES = template_vocabulary().lead_first_argument
_KEEP_ARGUMENT_TEMPLATES = _FIRST_ARGUMENT_TEMPLATES | template_vocabulary().lead_last_argument


_RENDERED_TEMPLATES = frozenset({"convert", "cvt"}) | _KEEP_ARGUMENT_TEMPLATES | frozenset(_SYMBOL_TEMPLATES)


def render_inline_template(source: str) -> str:
    """A lead-section template as the text a reader sees: dates, convert and language templates keep their
    value; hatnotes, infoboxes, citations and everything else disappear."""
    match = _TEMPLATE_NAME.match(source)
    name = normalize_template_name(match.group(1)) if match else ""
    if not (_INLINE_DATE_TEMPLATES.match(name) or name in _RENDERED_TEMPLATES or name.startswith("lang-")):
        return ""
    parts = split_top_level(source[2:-2])
    positional = [p.strip() for p in parts[1:] if "=" not in p.split("[[", 1)[0].split("{{", 1)[0]]
    if _INLINE_DATE_TEMPLATES.match(name) and positional:
        iso = iso_date(*positional[:3]) if positional[0].isdigit() else parse_text_date(positional[0])
        return format_iso_date(iso) if iso else ""
    if name in ("convert", "cvt") and len(positional) >= 2:
        return f"{positional[0]} {positional[1]}"
    if name in _KEEP_ARGUMENT_TEMPLATES and positional:
        return render_templates(positional[0] if name in _FIRST_ARGUMENT_TEMPLATES else positional[-1])
    if name.startswith("lang-") and positional:
        return render_templates(positional[-1])
    return _SYMBOL_TEMPLATES.get(name, "")


def render_templates(text: str) -> str:
    """Every top-level template of `text` rendered (or dropped) by `render_inline_template`; an argument a
    template keeps goes through the same function, so nested templates never leak into plain text."""
    if "{{" not in text:
        return text
    return _remove_spans(text, _top_level_templates(text), render_inline_template)


def format_iso_date(iso: str) -> str:
    parts = [int(p) for p in iso.split("-")]
    names = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
             "October", "November", "December"]
    if len(parts) == 3:
        return f"{parts[2]} {names[parts[1]]} {parts[0]}"
    if len(parts) == 2:
        return f"{names[parts[1]]} {parts[0]}"
    return str(parts[0])


def lead_sentences(text: str, max_chars: int = 20_000) -> list[Sentence]:
    """The lead section as plain sentences, each with the main-namespace links it contains.

    Regex-only: references, comments, tables, files and templates are removed (a few inline templates are
    rendered: dates, convert, nowrap, lang), links become their labels, bold/italic quotes disappear.
    """
    lead = lead_section(text)
    if len(lead) > max_chars:  # a lead without headings: keep whole lines only
        lead = lead[: lead.rfind("\n", 0, max_chars) + 1 or max_chars]
    lead = _REF.sub("", _OPAQUE_BLOCK.sub("", lead))
    lead = render_templates(lead)
    lead = _TABLE.sub("", lead)
    lead = _remove_spans(lead, _file_links(lead), lambda _: "")
    lead = _EXTERNAL.sub(lambda m: m.group(1) or "", lead)
    lead = html.unescape(_MAGIC.sub("", _HTML_TAG.sub("", _QUOTES.sub("", lead))))
    # A single newline inside a paragraph is a soft break ("(February 26,\n[[1770]] - ...)" in older
    # pages): lines run together until a blank line or a list, table or indent line.
    paragraphs, current = [], []
    for line in lead.split("\n"):
        stripped = line.strip()
        if stripped and not stripped.startswith(("|", "!", "{|", "|}", "*", "#", ":", ";", "}}", "{{")):
            current.append(stripped)
            continue
        if current:
            paragraphs.append(" ".join(current))
        current = []
    if current:
        paragraphs.append(" ".join(current))
    sentences: list[Sentence] = []
    for paragraph in paragraphs:
        plain, links = _plain_with_links(paragraph)
        if not plain.strip():
            continue
        sentences.extend(_split_sentences(plain, links))
    return sentences


def _plain_with_links(paragraph: str) -> tuple[str, list[LeadLink]]:
    pieces: list[str] = []
    links: list[LeadLink] = []
    length, position = 0, 0
    for match in _LINK.finditer(paragraph):
        before = paragraph[position : match.start()]
        pieces.append(before)
        length += len(before)
        target, label, trail = match.group(1), match.group(2), match.group(3)
        shown = (label if label is not None and label.strip() else target.split("#")[0].lstrip(":")) + trail
        shown = _SPACES.sub(" ", shown).strip()
        if is_entity_link(target):
            links.append(LeadLink(normalize_title(target), shown, length, length + len(shown)))
        pieces.append(shown)
        length += len(shown)
        position = match.end()
    pieces.append(paragraph[position:])
    return "".join(pieces), links


def _split_sentences(plain: str, links: list[LeadLink]) -> list[Sentence]:
    boundaries = [0]
    for match in _SENTENCE_BOUNDARY.finditer(plain):
        if _ABBREVIATION_END.search(plain[max(0, match.start() - 12) : match.start() + 1].rstrip()):
            continue
        boundaries.append(match.end())
    boundaries.append(len(plain))
    starts = [link.start for link in links]  # in order: the paragraph's links as they come
    sentences = []
    for start, end in zip(boundaries, boundaries[1:], strict=False):
        raw = plain[start:end]
        text = clean_sentence(raw)
        if not text:
            continue
        inside = links[bisect.bisect_left(starts, start):bisect.bisect_left(starts, end)]
        sentences.append(Sentence(text, inside))
    return sentences


def clean_sentence(raw: str) -> str:
    """Whitespace and the debris removed templates leave ("born ( )", " ,") tidied away. The spaces are
    collapsed by `str.split`, which splits at what `_SPACES`' `\\s` matches, and the brackets' rules run only
    on a sentence with a bracket: a regex pass per rule over each of a page's sentences was a tenth of
    reading its lead."""
    text = " ".join(raw.replace("_", " ").split())
    if "(" in text:
        text = _SPACES.sub(" ", _PARENS_LEADING_PUNCT.sub("(", _EMPTY_PARENS.sub("", text)))
    return _SPACE_BEFORE_PUNCT.sub(r"\1", text).strip()
