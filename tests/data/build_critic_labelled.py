"""Authoring source of `critic_labelled.jsonl`: hand-written trajectories over the shipped sample, labelled.

Each scenario is a question with its gold path (facts of the sample pages in `data/sample/source/`) and one
or more rollouts: turns as an agent on the sample's search environment would produce them, with the
observations written as that environment returns them (search: one numbered `Title: snippet` line per
hit; open_page: `Title (part i of n)` then the cleaned text; find_in_page: the matching sentences).
A turn carries the failure kinds a careful human reader assigns it (empty = a good turn); turns labelled
`None` are context only. Each labelled turn becomes one JSONL row: the question, the trajectory up to and
including that turn, and the expected verdict per criterion and failure kinds.

Regenerate with `.venv/bin/python tests/data/build_critic_labelled.py`.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from pathlib import Path

from schemas.questions import Path as GoldPath
from schemas.questions import PathHop, Question
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from schemas.wiki import Provenance
from synth.matching import match_answer

OUT = Path(__file__).with_name("critic_labelled.jsonl")
AS_OF = dt.date(2025, 6, 1)
STAMP = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
ECHO_NO_GAIN = {"malformed_call", "tool_error", "empty_result", "repeated_call"}
CRITERION = {
    "malformed_call": "tool_accuracy", "tool_error": "tool_accuracy", "repeated_call": "tool_accuracy",
    "empty_result": "tool_accuracy", "off_path_detour": "information_gain", "redundant_turn": "information_gain",
    "unsupported_claim": "logical_soundness", "unmotivated_action": "logical_soundness",
    "wrong_answer": "logical_soundness",
}


def hop(head: str, relation: str, tail: str | None = None, value: str | None = None, value_type: str = "entity"):
    provenance = Provenance(page_id=zlib.crc32(head.encode()) % 10_000, page_title=head, revision_id=1, timestamp=STAMP,
                            infobox="person", parameter=relation)
    return PathHop(head=head, relation=relation, tail=tail, value=value, value_type=value_type, provenance=provenance)


def question(qid: str, text: str, hops: list[PathHop], answer: str, aliases=(), answer_type="entity") -> Question:
    nodes = [hops[0].head] + [h.tail or h.value for h in hops]
    path = GoldPath(path_id=f"path-{qid}", start=hops[0].head, nodes=nodes, hops=hops, answer=answer,
                    answer_type=answer_type, seed=0)
    return Question(question_id=qid, text=text, answer=answer, aliases=list(aliases), as_of=AS_OF, hops=len(hops),
                    path=path, engine="hand-written")


def search(*hits: tuple[str, str]) -> list[tuple[str, str]]:
    """Search hits; rendered as the environment does once the query is known (see `_observation`)."""
    return list(hits)


def page(title: str, text: str) -> str:
    return f"{title} - page 1 of 1.\n\n{text}"


def matches(title: str, text: str, *sentences: str) -> str:
    if not sentences:
        return f"No occurrence of {text!r} in {title!r}."
    lines = "\n".join(f"[page 1] {s}" for s in sentences)
    return f"{len(sentences)} match(es) of {text!r} in {title!r}:\n{lines}"


def turn(reasoning: str, name: str | None, arguments: dict | None, observation: str | None, label,
         tool_error=False, parse_error=None, raw=None):
    return {"reasoning": reasoning, "name": name, "arguments": arguments, "observation": observation,
            "tool_error": tool_error, "parse_error": parse_error, "label": label, "raw": raw}


def answer(reasoning: str, text: str, label):
    return turn(reasoning, "answer", {"text": text}, f"Final answer submitted: {text}", label)


PAGES = {
    "Christopher Nolan": page("Christopher Nolan", "Born: 30 July 1970, Westminster, London, England\n"
        "Alma mater: University College London (BA)\nSpouse: Emma Thomas (m. 1997)\nRelatives: Jonathan Nolan (brother)\n"
        "Christopher Edward Nolan (born 30 July 1970) is a British and American filmmaker. Born in London, he studied "
        "English literature at University College London, where he met his future wife and producing partner Emma "
        "Thomas. His films include Memento (2000), The Dark Knight (2008), Inception (2010), Interstellar (2014) and "
        "Oppenheimer (2023), several of them written with his brother Jonathan Nolan. With Thomas he founded the "
        "production company Syncopy."),
    "Jonathan Nolan": page("Jonathan Nolan", "Born: 6 June 1976, London, England\nEducation: Georgetown University (BA)\n"
        "Spouse: Lisa Joy (m. 2009)\nRelatives: Christopher Nolan (brother)\nJonathan Nolan (born 6 June 1976) is a "
        "British and American screenwriter and producer. He wrote the short story \"Memento Mori\", on which his "
        "brother Christopher Nolan based the film Memento, and co-wrote The Prestige, The Dark Knight and "
        "Interstellar. He studied English at Georgetown University in Washington, D.C."),
    "Stanley Kubrick": page("Stanley Kubrick", "Born: July 26, 1928, Manhattan, New York City, U.S.\n"
        "Died: March 7, 1999, Childwickbury Manor, Hertfordshire, England\nEducation: City College of New York\n"
        "Spouse: Toba Metz (m. 1948; div. 1951), Ruth Sobotka (m. 1955; div. 1957), Christiane Kubrick (m. 1958)\n"
        "Stanley Kubrick (July 26, 1928 - March 7, 1999) was an American filmmaker. Born in Manhattan, he directed "
        "Dr. Strangelove (1964), 2001: A Space Odyssey (1968), A Clockwork Orange (1971) and The Shining (1980). He "
        "adapted novels by Anthony Burgess and Stephen King, and lived in England from the 1960s with his wife "
        "Christiane Kubrick."),
    "Fran Walsh": page("Fran Walsh", "Born: 10 January 1959, Wellington, New Zealand\nOccupation: Screenwriter, "
        "producer, lyricist\nPartner: Peter Jackson\nDame Frances Rosemary Walsh (born 10 January 1959) is a New "
        "Zealand screenwriter and film producer. With her partner Peter Jackson she co-wrote The Lord of the Rings: "
        "The Fellowship of the Ring and its two sequels. She was born in Wellington."),
    "Stephen King": page("Stephen King", "Born: September 21, 1947, Portland, Maine, U.S.\nAlma mater: University of "
        "Maine (BA)\nSpouse: Tabitha King (m. 1971)\nStephen Edwin King (born September 21, 1947) is an American author "
        "of horror and suspense novels. Born in Portland, Maine, he graduated from the University of Maine, where he "
        "met his wife, the novelist Tabitha King. His first novel, Carrie, was published by Doubleday in 1974."),
    "Tabitha King": page("Tabitha King", "Born: March 24, 1949, Old Town, Maine, U.S.\nAlma mater: University of Maine\n"
        "Spouse: Stephen King (m. 1971)\nTabitha Jane King (nee Spruce; born March 24, 1949) is an American novelist. "
        "She met Stephen King while both were students at the University of Maine and married him in 1971."),
    "Tom Hanks": page("Tom Hanks", "Born: July 9, 1956, Concord, California, U.S.\nEducation: California State "
        "University, Sacramento\nSpouse: Samantha Lewes (m. 1978; div. 1987), Rita Wilson (m. 1988)\nThomas Jeffrey "
        "Hanks (born July 9, 1956) is an American actor. He played Captain John Miller in Steven Spielberg's Saving "
        "Private Ryan (1998). He is married to Rita Wilson."),
    "Rita Wilson": page("Rita Wilson", "Born: October 26, 1956, Los Angeles, California, U.S.\nSpouse: Tom Hanks "
        "(m. 1988)\nRita Wilson (born October 26, 1956) is an American actress, singer and producer from Los Angeles. "
        "She has been married to Tom Hanks since 1988."),
    "Steven Spielberg": page("Steven Spielberg", "Born: December 18, 1946, Cincinnati, Ohio, U.S.\nEducation: "
        "California State University, Long Beach (BA)\nSpouse: Amy Irving (m. 1985; div. 1989), Kate Capshaw (m. 1991)\n"
        "Steven Allan Spielberg (born December 18, 1946) is an American filmmaker. Born in Cincinnati, he directed Jaws "
        "(1975), Raiders of the Lost Ark (1981), E.T. the Extra-Terrestrial (1982), Jurassic Park (1993), Schindler's "
        "List (1993) and Saving Private Ryan (1998)."),
    "Kate Capshaw": page("Kate Capshaw", "Born: November 3, 1953, Fort Worth, Texas, U.S.\nSpouse: Robert Capshaw "
        "(m. 1976; div. 1980), Steven Spielberg (m. 1991)\nKate Capshaw (born Kathleen Sue Nail; November 3, 1953) is "
        "an American former actress. She appeared in Indiana Jones and the Temple of Doom (1984) and married its "
        "director, Steven Spielberg, in 1991."),
    "Greta Gerwig": page("Greta Gerwig", "Born: August 4, 1983, Sacramento, California, U.S.\nEducation: Barnard "
        "College (BA)\nSpouse: Noah Baumbach (m. 2023)\nGreta Celeste Gerwig (born August 4, 1983) is an American "
        "actress and filmmaker. Raised in Sacramento, she studied at Barnard College. She wrote and directed Lady Bird "
        "(2017), Little Women (2019) and Barbie (2023). She is married to Noah Baumbach."),
    "Noah Baumbach": page("Noah Baumbach", "Born: September 3, 1969, Brooklyn, New York City, U.S.\nEducation: Vassar "
        "College (BA)\nSpouse: Jennifer Jason Leigh (m. 2005; div. 2013), Greta Gerwig (m. 2023)\nNoah Baumbach (born "
        "September 3, 1969) is an American filmmaker from Brooklyn. He graduated from Vassar College and directed "
        "Marriage Story (2019) for Netflix. He co-wrote Barbie with Greta Gerwig."),
    "Christiane Kubrick": page("Christiane Kubrick", "Born: 10 May 1932, Braunschweig, Germany\nOccupation: Painter, "
        "actress\nSpouse: Stanley Kubrick (m. 1958; died 1999)\nChristiane Kubrick (nee Harlan; born 10 May 1932) is a "
        "German painter and former actress. She was married to the director Stanley Kubrick from 1958 until his death "
        "in 1999, and appeared in his film Paths of Glory."),
    "J. K. Rowling": page("J. K. Rowling", "Born: 31 July 1965, Yate, Gloucestershire, England\nAlma mater: University "
        "of Exeter (BA)\nJoanne Rowling (born 31 July 1965), known as J. K. Rowling, is a British author. She studied "
        "French and Classics at the University of Exeter. Her first novel, Harry Potter and the Philosopher's Stone, "
        "was published by Bloomsbury in 1997; the series was adapted into films by Warner Bros."),
    "Daniel Radcliffe": page("Daniel Radcliffe", "Born: 23 July 1989, Fulham, London, England\nPartner: Erin Darke\n"
        "Daniel Jacob Radcliffe (born 23 July 1989) is an English actor born in London. He played Harry Potter in the "
        "film series that began with Harry Potter and the Philosopher's Stone (2001), alongside Emma Watson."),
    "Concord, California": page("Concord, California", "Concord is a city in Contra Costa County, California, United "
        "States. It was founded in 1869 as Todos Santos and renamed Concord that year. It lies east of the Berkeley "
        "Hills and is a regional business center with a BART rail station."),
    "The Lord of the Rings: The Fellowship of the Ring": page("The Lord of the Rings: The Fellowship of the Ring",
        "Directed by: Peter Jackson\nScreenplay by: Fran Walsh, Philippa Boyens, Peter Jackson\nThe Lord of the Rings: "
        "The Fellowship of the Ring is a 2001 epic fantasy adventure film directed by Peter Jackson from a screenplay by "
        "Fran Walsh, Philippa Boyens and Jackson, based on the novel by J. R. R. Tolkien. It was shot in New Zealand."),
}

PAGES |= {
    "Bloomsbury Publishing": page("Bloomsbury Publishing", "Name: Bloomsbury Publishing plc\nType: Public limited "
        "company\nIndustry: Publishing\nFounded: 1986\nFounder: Nigel Newton\nHq location city: London\nHq location "
        "country: United Kingdom\n\nBloomsbury Publishing plc is a British publishing house based in London, founded in "
        "1986. It published J. K. Rowling's Harry Potter novels, beginning with Harry Potter and the Philosopher's Stone "
        "in 1997."),
    "London": page("London", "Name: London\nSettlement type: Capital city\nSubdivision type: Country\nSubdivision "
        "name: United Kingdom\nSubdivision type1: Constituent country\nSubdivision name1: England\nPopulation total: "
        "8,799,800\nPopulation as of: 2021 census\nTimezone: GMT\n\nLondon is the capital and largest city of both "
        "England and the United Kingdom. It stands on the River Thames in south-east England. It is home to University "
        "College London and to many film studios and publishers, including Bloomsbury Publishing."),
    "University of Exeter": page("University of Exeter", "Name: University of Exeter\nEstablished: 1955\nType: Public "
        "research university\nCity: Exeter\nCountry: United Kingdom\n\nThe University of Exeter is a public research "
        "university in Exeter, Devon, England. J. K. Rowling graduated from it."),
}

NO_PAGE = "Error: no page titled {title!r}. Use search to find the exact title."


def _scenarios():
    q1 = question("q-nolan-spouse-born",
                  "As of June 2025, on what date was the spouse of the filmmaker born in Westminster in 1970 who "
                  "co-founded Syncopy born?",
                  [hop("Christopher Nolan", "spouse", tail="Emma Thomas"),
                   hop("Emma Thomas", "birth_date", value="1971-12-09", value_type="date")],
                  "1971-12-09", ["9 December 1971", "December 9, 1971"], answer_type="date")
    s1_search = turn("The question describes a filmmaker born in Westminster in 1970 who co-founded Syncopy. I will "
                     "search for the founders of Syncopy.", "search", {"query": "Syncopy founder filmmaker born 1970"},
                     search(("Christopher Nolan", "Christopher Edward Nolan (born 30 July 1970) is a British and "
                             "American filmmaker. With Thomas he founded the production company Syncopy."),
                            ("Syncopy", "Syncopy is a British film production company founded in 2001 by Christopher "
                             "Nolan and Emma Thomas."),
                            ("Emma Thomas", "Emma Thomas is a British film producer. She co-founded the production "
                             "company Syncopy with her husband Christopher Nolan.")), [])
    yield q1, [
        s1_search,
        turn("Christopher Nolan was born in 1970 and co-founded Syncopy, so he is the filmmaker. I will open his page "
             "to find his spouse.", "open_page", {"title": "Christopher Nolan"}, PAGES["Christopher Nolan"], []),
        turn("I will open the Christopher Nolan page again to check the spouse.", "open_page",
             {"title": "christopher  nolan", "page": 1}, PAGES["Christopher Nolan"], ["repeated_call"]),
        turn("Nolan's wife Emma Thomas was born in Manchester in 1968. I will search for Emma Thomas to confirm.",
             "search", {"query": "Emma Thomas producer born"},
             search(("Emma Thomas", "Emma Thomas (born 9 December 1971) is a British film producer."),
                    ("Syncopy", "Syncopy is a British film production company founded in 2001 by Christopher Nolan "
                     "and Emma Thomas.")), ["unsupported_claim"]),
        answer("The search result says Emma Thomas, Nolan's wife, was born on 9 December 1971.", "9 December 1971", []),
    ]
    yield q1, [
        {**s1_search, "label": None},
        turn("Let me look at Stanley Kubrick as well.", "open_page", {"title": "Stanley Kubrick"},
             PAGES["Stanley Kubrick"], ["off_path_detour"]),
        answer("Emma Thomas was born in 1970 as well.", "30 July 1970", ["unsupported_claim", "wrong_answer"]),
    ]

    q2 = question("q-memento-brother-university",
                  "Which university did the brother of the writer of the short story \"Memento Mori\" attend?",
                  [hop("Jonathan Nolan", "relatives", tail="Christopher Nolan"),
                   hop("Christopher Nolan", "alma_mater", tail="University College London")],
                  "University College London", ["UCL"])
    yield q2, [
        turn("I need to find who wrote the short story Memento Mori.", "search", {"q": "Memento Mori short story"},
             "Error: invalid arguments for search: query: Field required; q: Extra inputs are not permitted",
             ["malformed_call"], tool_error=True),
        turn("I need to find who wrote the short story Memento Mori.", "search",
             {"query": "Memento Mori short story writer"},
             search(("Jonathan Nolan", "Jonathan Nolan (born 6 June 1976) is a British and American screenwriter and "
                     "producer. He wrote the short story \"Memento Mori\", on which his brother Christopher Nolan "
                     "based the film Memento."),
                    ("Memento (film)", "Memento is a 2000 American neo-noir psychological thriller film written and "
                     "directed by Christopher Nolan, based on the short story \"Memento Mori\".")), []),
        turn("Jonathan Nolan wrote \"Memento Mori\" and his brother is Christopher Nolan. I will open Jonathan Nolan's "
             "page to confirm.", "open_page", {"title": "Jonathan Nolan"}, PAGES["Jonathan Nolan"], []),
        turn("Jonathan Nolan studied at Georgetown University, and his brother Christopher Nolan studied at Oxford "
             "University. Let me confirm by opening Christopher Nolan's page.", "open_page",
             {"title": "Christopher Nolan"}, PAGES["Christopher Nolan"], ["unsupported_claim"]),
        turn("I will find the word university in Christopher Nolan's page.", "find_in_page",
             {"title": "Christopher Nolann", "text": "university"}, NO_PAGE.format(title="Christopher Nolann"),
             ["tool_error"], tool_error=True),
        turn("I will check whether Christopher Nolan's page mentions Cambridge.", "find_in_page",
             {"title": "Christopher Nolan", "text": "Cambridge"},
             matches("Christopher Nolan", "Cambridge"), ["empty_result"]),
        answer("Christopher Nolan's page says he studied at University College London.", "University College London", []),
    ]

    q3 = question("q-fellowship-partner-birthplace",
                  "In which city was the partner of the director of The Lord of the Rings: The Fellowship of the Ring "
                  "born?",
                  [hop("Peter Jackson", "partner", tail="Fran Walsh"),
                   hop("Fran Walsh", "birth_place", tail="Wellington")], "Wellington", ["Wellington, New Zealand"])
    s3_search = turn("I need the director of The Fellowship of the Ring.", "search",
                     {"query": "director of The Lord of the Rings: The Fellowship of the Ring"},
                     search(("Peter Jackson", "Sir Peter Robert Jackson (born 31 October 1961) is a New Zealand "
                             "filmmaker. He directed The Lord of the Rings: The Fellowship of the Ring (2001)."),
                            ("Fran Walsh", "With her partner Peter Jackson she co-wrote The Lord of the Rings: The "
                             "Fellowship of the Ring and its two sequels."),
                            ("J. R. R. Tolkien", "John Ronald Reuel Tolkien was an English writer and philologist, "
                             "author of The Lord of the Rings.")), [])
    yield q3, [
        s3_search,
        turn("Peter Jackson directed The Fellowship of the Ring and his partner is Fran Walsh. I will open Fran "
             "Walsh's page.", "open_page", {"title": "Fran Walsh"}, PAGES["Fran Walsh"], []),
        turn("I will search for Fran Walsh's birthplace.", "search", {"query": "Fran Walsh birthplace"},
             search(("Fran Walsh", "Dame Frances Rosemary Walsh (born 10 January 1959) is a New Zealand screenwriter "
                     "and film producer. She was born in Wellington."),
                    ("Peter Jackson", "Sir Peter Robert Jackson (born 31 October 1961) is a New Zealand filmmaker.")),
             ["redundant_turn"]),
        turn("Fran Walsh was born in Wellington. I will now give the answer.", "search",
             {"query": "Peter Jackson filmography"},
             search(("King Kong (2005 film)", "King Kong is a 2005 epic monster adventure film co-written, produced "
                     "and directed by Peter Jackson."),
                    ("WingNut Films", "WingNut Films is a New Zealand production company founded by Peter Jackson, "
                     "based in Wellington.")), ["unmotivated_action"]),
        answer("Fran Walsh, Jackson's partner, was born in Wellington.", "Wellington", []),
    ]
    yield q3, [
        {**s3_search, "label": None},
        turn("The film page may list the screenplay writers; I will open it.", "open_page",
             {"title": "The Lord of the Rings: The Fellowship of the Ring"},
             PAGES["The Lord of the Rings: The Fellowship of the Ring"], []),
        turn("Perhaps Fran Walsh was born in Wellington; I will check her page.", "open_page", {"title": "Fran Walsh"},
             PAGES["Fran Walsh"], []),
    ]

    q4 = question("q-carrie-wife-birthplace", "Where was the wife of the author of the novel Carrie born?",
                  [hop("Stephen King", "spouse", tail="Tabitha King"),
                   hop("Tabitha King", "birth_place", tail="Old Town, Maine")], "Old Town, Maine", ["Old Town"])
    s4_search = turn("I need the author of Carrie.", "search", {"query": "Carrie novel author"},
                     search(("Carrie (novel)", "Carrie is a 1974 horror novel by American author Stephen King."),
                            ("Stephen King", "Stephen Edwin King (born September 21, 1947) is an American author of "
                             "horror and suspense novels."),
                            ("Tabitha King", "Tabitha Jane King (nee Spruce; born March 24, 1949) is an American "
                             "novelist.")), [])
    s4_open = turn("Stephen King wrote Carrie. I will open his page to find his wife.", "open_page",
                   {"title": "Stephen King"}, PAGES["Stephen King"], [])
    yield q4, [
        turn("I should look up the author of Carrie.", None, None, None, ["malformed_call"],
             parse_error="no Action line found", raw="Thought: I should look up the author of Carrie\nAcion: search"),
        s4_search,
        turn("I need the author of Carrie.", "search", {"query": "carrie NOVEL author", "top_k": 5},
             s4_search["observation"], ["repeated_call"]),
        s4_open,
        answer("Stephen King was born in Portland, Maine, so his wife was born there too.", "Portland, Maine",
               ["wrong_answer"]),
    ]
    yield q4, [
        {**s4_search, "label": None},
        {**s4_open, "label": None},
        turn("His wife is Tabitha King. I will open her page.", "open_page", {"title": "Tabitha King"},
             PAGES["Tabitha King"], []),
        answer("Tabitha King was born in Old Town, Maine.", "Old Town, Maine", []),
    ]

    q5 = question("q-ryan-actor-wife-birthplace",
                  "Where was the wife of the actor who played Captain John Miller in Saving Private Ryan born?",
                  [hop("Tom Hanks", "spouse", tail="Rita Wilson"), hop("Rita Wilson", "birth_place", tail="Los Angeles")],
                  "Los Angeles", ["Los Angeles, California"])
    s5_search = turn("I need the actor who played Captain John Miller.", "search",
                     {"query": "Captain John Miller Saving Private Ryan actor"},
                     search(("Tom Hanks", "He played Captain John Miller in Steven Spielberg's Saving Private Ryan "
                             "(1998)."),
                            ("Saving Private Ryan", "Saving Private Ryan is a 1998 American war film directed by Steven "
                             "Spielberg, starring Tom Hanks.")), [])
    s5_open = turn("Tom Hanks played Captain John Miller. I will open his page to find his wife.", "open_page",
                   {"title": "Tom Hanks"}, PAGES["Tom Hanks"], [])
    yield q5, [
        s5_search,
        s5_open,
        turn("Let me also read about Concord, California.", "open_page", {"title": "Concord, California"},
             PAGES["Concord, California"], ["off_path_detour"]),
        turn("His wife is Rita Wilson. I will open her page.", "open_page", {"title": "Rita Wilson"},
             PAGES["Rita Wilson"], []),
        answer("Rita Wilson was born in Los Angeles.", "Los Angeles", []),
    ]
    yield q5, [
        {**s5_search, "label": None},
        {**s5_open, "label": None},
        answer("Tom Hanks was born in Concord, California, and his wife Rita Wilson was too.", "Concord, California",
               ["wrong_answer"]),
    ]
    yield q5, [
        {**s5_search, "label": None},
        {**s5_open, "label": None},
        answer("Rita Wilson was born in Los Angeles.", "Los Angeles", ["unsupported_claim"]),
    ]

    q6 = question("q-jaws-second-wife-birthplace", "In which city was the second wife of the director of Jaws born?",
                  [hop("Steven Spielberg", "spouse", tail="Kate Capshaw"),
                   hop("Kate Capshaw", "birth_place", tail="Fort Worth, Texas")], "Fort Worth, Texas", ["Fort Worth"])
    yield q6, [
        turn("I need the director of Jaws.", "search", {"query": "Jaws film director"},
             search(("Jaws (film)", "Jaws is a 1975 American thriller film directed by Steven Spielberg."),
                    ("Steven Spielberg", "Steven Allan Spielberg (born December 18, 1946) is an American filmmaker.")),
             []),
        turn("Steven Spielberg directed Jaws. I will open his page for his marriages.", "open_page",
             {"title": "Steven Spielberg"}, PAGES["Steven Spielberg"], []),
        turn("Spielberg's second wife is Kate Capshaw, who was born in Dallas. I will open her page.", "open_page",
             {"title": "Kate Capshaw"}, PAGES["Kate Capshaw"], ["unsupported_claim"]),
        turn("I want to read the first chunk of her page.", "open_page", {"title": "Kate Capshaw", "page": 0},
             "Error: invalid arguments for open_page: page: Input should be greater than or equal to 1",
             ["malformed_call"], tool_error=True),
        turn("I will find where Kate Capshaw was born.", "find_in_page", {"title": "Kate Capshaw", "text": "born"},
             matches("Kate Capshaw", "born", "Kate Capshaw (born Kathleen Sue Nail; November 3, 1953) is an American "
                     "former actress."),
             ["redundant_turn"]),
        answer("Kate Capshaw was born in Fort Worth, Texas.", "Fort Worth, Texas", []),
    ]

    q7 = question("q-ladybird-husband-college", "Which college did the husband of the director of Lady Bird graduate "
                  "from?", [hop("Greta Gerwig", "spouse", tail="Noah Baumbach"),
                            hop("Noah Baumbach", "education", tail="Vassar College")], "Vassar College", ["Vassar"])
    yield q7, [
        turn("I need the director of Lady Bird.", "search", {"query": "Lady Bird director"},
             search(("Lady Bird (film)", "Lady Bird is a 2017 American coming-of-age film written and directed by Greta "
                     "Gerwig."),
                    ("Greta Gerwig", "Greta Celeste Gerwig (born August 4, 1983) is an American actress and "
                     "filmmaker.")), []),
        turn("Greta Gerwig directed Lady Bird. I will open her page to find her husband.", "open_page",
             {"title": "Greta Gerwig"}, PAGES["Greta Gerwig"], []),
        turn("Gerwig is married to Noah Baumbach. I will open his page.", "open_page", {"title": "Noah Baumbeck"},
             NO_PAGE.format(title="Noah Baumbeck"), ["tool_error"], tool_error=True),
        turn("The title is spelled Noah Baumbach. I will open it.", "open_page", {"title": "Noah Baumbach"},
             PAGES["Noah Baumbach"], []),
        turn("Noah Baumbach graduated from Vassar College. I will answer with Vassar College.", "search",
             {"query": "Brooklyn"},
             search(("Brooklyn", "Brooklyn is a borough of New York City, on the western end of Long Island."),
                    ("Brooklyn Bridge", "The Brooklyn Bridge is a suspension bridge in New York City spanning the East "
                     "River.")), ["unmotivated_action", "off_path_detour"]),
        answer("Noah Baumbach graduated from Vassar College.", "Vassar College", []),
    ]

    q8 = question("q-odyssey-wife-birthplace", "In which city was the last wife of the director of 2001: A Space "
                  "Odyssey born?", [hop("Stanley Kubrick", "spouse", tail="Christiane Kubrick"),
                                    hop("Christiane Kubrick", "birth_place", tail="Braunschweig")],
                  "Braunschweig", ["Brunswick"])
    yield q8, [
        turn("I need the director of 2001: A Space Odyssey.", "search", {"query": "2001: A Space Odyssey director"},
             search(("2001: A Space Odyssey", "2001: A Space Odyssey is a 1968 epic science fiction film produced and "
                     "directed by Stanley Kubrick."),
                    ("Stanley Kubrick", "Stanley Kubrick (July 26, 1928 - March 7, 1999) was an American "
                     "filmmaker.")), []),
        turn("Stanley Kubrick directed it. I will look for his third wife in his page.", "find_in_page",
             {"title": "Stanley Kubrick", "text": "third wife"}, matches("Stanley Kubrick", "third wife"),
             ["empty_result"]),
        turn("I will open the Stanley Kubrick page to read his marriages.", "open_page", {"title": "Stanley Kubrick"},
             PAGES["Stanley Kubrick"], []),
        turn("I will look for his third wife in his page.", "find_in_page",
             {"title": "Stanley Kubrick", "text": "Third Wife"}, matches("Stanley Kubrick", "Third Wife"),
             ["repeated_call"]),
        turn("His last wife was Christiane Kubrick. I will search for her.", "search", {"query": "Christiane Kubrick"},
             search(("Christiane Kubrick", "Christiane Kubrick (nee Harlan; born 10 May 1932) is a German painter and "
                     "former actress."),
                    ("Paths of Glory", "Paths of Glory is a 1957 anti-war film by Stanley Kubrick, featuring Christiane "
                     "Harlan.")), []),
        turn("Christiane Kubrick is German. I will open her page for the birthplace.", "open_page",
             {"title": "Christiane Kubrick"}, PAGES["Christiane Kubrick"], []),
        answer("Christiane Kubrick was born in Braunschweig, Germany.", "Braunschweig", []),
    ]

    q9 = question("q-stone-author-university", "At which university did the author of Harry Potter and the "
                  "Philosopher's Stone study?",
                  [hop("Harry Potter and the Philosopher's Stone", "author", tail="J. K. Rowling"),
                   hop("J. K. Rowling", "alma_mater", tail="University of Exeter")],
                  "University of Exeter", ["Exeter University"])
    yield q9, [
        turn("I will open the novel's page to find its author.", "open_page",
             {"title": "Harry Potter and the Philosophers Stone"},
             NO_PAGE.format(title="Harry Potter and the Philosophers Stone"), ["tool_error"], tool_error=True),
        turn("I will search for the novel's author instead.", "search",
             {"query": "Harry Potter and the Philosopher's Stone author"},
             search(("Harry Potter and the Philosopher's Stone", "Harry Potter and the Philosopher's Stone is a fantasy "
                     "novel written by British author J. K. Rowling."),
                    ("J. K. Rowling", "Joanne Rowling (born 31 July 1965), known as J. K. Rowling, is a British "
                     "author.")), []),
        turn("The novel was written by J. K. Rowling. I will open her page.", "open_page",
             {"title": "Daniel Radcliffe"}, PAGES["Daniel Radcliffe"], ["unmotivated_action", "off_path_detour"]),
        turn("That was the wrong page; I will open J. K. Rowling's page.", "open_page", {"title": "J. K. Rowling"},
             PAGES["J. K. Rowling"], []),
        turn("Let me check whether she also studied at Oxford.", "find_in_page",
             {"title": "J. K. Rowling", "text": "Oxford"}, matches("J. K. Rowling", "Oxford"),
             ["empty_result"]),
        turn("I will search for her university.", "search", {"query": "J. K. Rowling university"},
             search(("J. K. Rowling", "Joanne Rowling (born 31 July 1965), known as J. K. Rowling, is a British "
                     "author. She studied French and Classics at the University of Exeter.")), ["redundant_turn"]),
        answer("Rowling studied French and Classics at the University of Exeter.", "University of Exeter", []),
    ]


    # Written in the offline scripted policy's own words (synth.policies.searcher), observations verbatim from
    # the sample's search index.
    q10 = question("q-bloomsbury-city-population", "As of October 2026, what figure is recorded as the population "
                   "of the headquarters city of Bloomsbury Publishing?",
                   [hop("Bloomsbury Publishing", "hq_location_city", tail="London"),
                    hop("London", "population_total", value="8799800", value_type="number")],
                   "8799800", answer_type="number")
    s10_search = turn("I need the hq location city of Bloomsbury Publishing. I will search for 'Bloomsbury Publishing "
                      "headquarters city population'.", "search",
                      {"query": "Bloomsbury Publishing headquarters city population", "top_k": 3},
                      search(("Bloomsbury Publishing", "Name: Bloomsbury Publishing plc"),
                             ("London", "It is home to University College London and to many film studios and "
                              "publishers, including Bloomsbury Publishing."),
                             ("Mexico City", "Name: Mexico City")), [])
    s10_open = turn("The search results list Bloomsbury Publishing. I will open Bloomsbury Publishing to find its hq "
                    "location city.", "open_page", {"title": "Bloomsbury Publishing", "page": 1},
                    PAGES["Bloomsbury Publishing"], [])
    from_page = ('Bloomsbury Publishing states: "Hq location city: London". So the hq location city of Bloomsbury '
                 'Publishing is London.')
    yield q10, [
        s10_search,
        s10_open,
        turn(f"{from_page} I will open London to find its population total. I also recall that the population total "
             "of London is Mexico City, which fits the question.", "open_page", {"title": "London", "page": 1},
             PAGES["London"], ["unsupported_claim"]),
        answer('London states: "Population total: 8,799,800". So the population total of London is 8,799,800. The '
               "answer to the question is 8799800.", "8799800", []),
    ]
    yield q10, [
        {**s10_search, "label": None},
        {**s10_open, "label": None},
        turn("I will check whether Bloomsbury Publishing mentions Penguin.", "find_in_page",
             {"title": "Bloomsbury Publishing", "text": "Penguin"}, matches("Bloomsbury Publishing", "Penguin"),
             ["empty_result"]),
        turn("Bloomsbury Publishing is owned by Penguin Random House. I will open London.", "open_page",
             {"title": "London"}, PAGES["London"], ["unsupported_claim"]),
        turn("I will find the population in the London page.", "find_in_page", {"title": "London", "text": "population"},
             matches("London", "population", "Population total: 8,799,800", "Population as of: 2021 census"),
             ["redundant_turn"]),
        answer('London states: "Population as of: 2021 census". So the population of London is 2021.', "2021",
               ["wrong_answer"]),
    ]
    yield q10, [
        {**s10_search, "label": None},
        turn("Perhaps University of Exeter is connected to Bloomsbury Publishing; let me open it.", "open_page",
             {"title": "University of Exeter"}, PAGES["University of Exeter"], ["off_path_detour"]),
        {**s10_open, "label": None},
        turn(f"{from_page} I will open London to find its population total.", "open_page",
             {"title": "London", "page": 1}, PAGES["London"], []),
        answer('London states: "Population total: 8,799,800". The answer to the question is 8,799,800.', "8,799,800",
               []),
    ]


def _expected(kinds: list[str], is_answer: bool) -> dict:
    failed = {CRITERION[k] for k in kinds}
    if not is_answer and ECHO_NO_GAIN & set(kinds):
        failed.add("information_gain")
    return {c: c not in failed for c in ("tool_accuracy", "information_gain", "logical_soundness")} | {
        "failure_kinds": kinds}


def _observation(spec: dict) -> str | None:
    observation = spec["observation"]
    if isinstance(observation, list):
        hits = "\n".join(f"{i}. {title}\n   {snippet}" for i, (title, snippet) in enumerate(observation, 1))
        return f"Results for {spec['arguments']['query']!r}:\n{hits}"
    return observation


def _turn_record(index: int, spec: dict) -> Turn:
    call = None
    if spec["name"] is not None:
        call = ToolCall(call_id=f"call_{index}", name=spec["name"], arguments=spec["arguments"])
    final = spec["arguments"]["text"] if spec["name"] == "answer" else None
    raw = spec["raw"] or f"<think>{spec['reasoning']}</think>" + (
        f"<tool_call>{json.dumps({'name': spec['name'], 'arguments': spec['arguments']})}</tool_call>" if call else "")
    return Turn(index=index, reasoning=spec["reasoning"], raw_output=raw, tool_call=call, observation=_observation(spec),
                tool_error=spec["tool_error"], parse_error=spec["parse_error"], final_answer=final)


def rows():
    for number, (q, specs) in enumerate(_scenarios()):
        turns = [_turn_record(i, s) for i, s in enumerate(specs)]
        for position, spec in enumerate(specs):
            if spec["label"] is None:
                continue
            prefix = turns[: position + 1]
            final = prefix[-1].final_answer
            outcome = match_answer(final, q.answer, q.aliases)
            trajectory = Trajectory(
                trajectory_id=f"labelled-{number:02d}", question_id=q.question_id, question=q.text, answer=q.answer,
                aliases=q.aliases, as_of=q.as_of, framework="tagged", policy="hand-labelled", engine="hand-written",
                seed=0, turns=prefix, final_answer=final, stop_reason="answered" if final else "max_turns",
                outcome=outcome if final else Outcome(exact_match=False, f1=0.0, correct=False),
            )
            yield {
                "row_id": f"labelled-{number:02d}-t{position}",
                "question": q.model_dump(mode="json"),
                "trajectory": trajectory.model_dump(mode="json"),
                "turn_index": position,
                "expected": _expected(spec["label"], spec["name"] == "answer"),
            }


if __name__ == "__main__":
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows()]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} rows to {OUT}")
