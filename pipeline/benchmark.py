"""`hopsmith export-benchmark`: a split of the questions as a fixed-corpus benchmark in BrowseComp-Plus's
layout, so any agent harness written for it scores on hopsmith's data unchanged.

The folder holds `corpus.jsonl` (the index's pages as `{docid, text, url}`, docid = page id), `queries.jsonl`
(one row a question: `query_id` in plain text; `query`, `answer`, `evidence_docs`, `gold_docs` and
`negative_docs` encrypted as BrowseComp-Plus encrypts its release: every string XORed with the SHA-256 of a
canary string repeated, then base64), `topics-qrels/qrel_evidence.txt` (the path pages) and
`topics-qrels/qrel_golds.txt` (the page that states the answer) as TREC qrels, and a README with the canary
and the recipe. A question none of whose path pages is indexed cannot be scored for recall (BrowseComp-Plus
divides by its evidence count) and is skipped, counted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections import Counter
from pathlib import Path

from ground.io import atomic_write_text, stable_hash
from pipeline.layout import split_of
from schemas.environment import IndexedPage
from schemas.questions import Question
from synth.environment import SearchEnvironment
from synth.evaluation import evidence_docids, gold_docids

CANARY_PREFIX = "BENCHMARK DATA SHOULD NEVER APPEAR AS PLAIN TEXT ONLINE. canary GUID hopsmith:"
PLAIN_KEYS = frozenset({"query_id"})


def canary_for(question_ids: list[str]) -> str:
    """A canary string (and decryption password) fixed by the exported questions."""
    return CANARY_PREFIX + str(uuid.UUID(stable_hash(*sorted(question_ids), length=32)))


def _keystream(password: str, length: int) -> bytes:
    digest = hashlib.sha256(password.encode("utf-8")).digest()
    return (digest * (length // len(digest) + 1))[:length]


def encrypt_text(text: str, password: str) -> str:
    data = text.encode("utf-8")
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, _keystream(password, len(data)), strict=True))).decode("ascii")


def encrypt_row(value, password: str):
    """Every string in a row encrypted, except the values of PLAIN_KEYS (BrowseComp-Plus leaves query_id plain)."""
    if isinstance(value, str):
        return encrypt_text(value, password)
    if isinstance(value, list):
        return [encrypt_row(v, password) for v in value]
    if isinstance(value, dict):
        return {k: v if k in PLAIN_KEYS else encrypt_row(v, password) for k, v in value.items()}
    return value


def page_url(page: IndexedPage) -> str:
    return f"https://en.wikipedia.org/?curid={page.page_id}"


def document(page: IndexedPage) -> dict:
    return {"docid": str(page.page_id), "text": page.title + "\n\n" + "\n\n".join(page.chunks), "url": page_url(page)}


def _qrels(rows: list[tuple[str, list[str]]]) -> str:
    return "".join(f"{qid} Q0 {docid} 1\n" for qid, docids in rows for docid in docids)


def export_benchmark(questions: list[Question], env: SearchEnvironment, out_dir: str | Path, *, split: str = "test",
                     test_fraction: float = 0.1) -> Counter:
    """Write the benchmark folder for the questions of `split` (`train`, `test` or `all`); returns counts."""
    out = Path(out_dir)
    chosen = sorted((q for q in questions if split == "all" or split_of(q.question_id, test_fraction) == split),
                    key=lambda q: q.question_id)
    counts = Counter(questions_in=len(questions), in_split=len(chosen))
    documents = {str(p.page_id): document(p) for p in env.pages}
    kept: list[tuple[Question, list[str], list[str]]] = []
    for question in chosen:
        evidence, gold = evidence_docids(question, env), gold_docids(question, env)
        if not evidence:
            counts["skipped:no_indexed_path_page"] += 1
            continue
        kept.append((question, evidence, gold))
    canary = canary_for([q.question_id for q, _, _ in kept])
    rows = [
        encrypt_row({"query_id": q.question_id, "query": q.text, "answer": q.answer,
                     "evidence_docs": [documents[d] for d in evidence], "gold_docs": [documents[d] for d in gold],
                     "negative_docs": []}, canary)
        for q, evidence, gold in kept
    ]
    atomic_write_text(out / "queries.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    atomic_write_text(out / "corpus.jsonl", "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents.values()))
    atomic_write_text(out / "topics-qrels" / "qrel_evidence.txt", _qrels([(q.question_id, e) for q, e, _ in kept]))
    atomic_write_text(out / "topics-qrels" / "qrel_golds.txt", _qrels([(q.question_id, g) for q, _, g in kept]))
    atomic_write_text(out / "README.md", readme(canary, split, len(kept), len(documents)))
    counts.update(queries=len(kept), documents=len(documents))
    return counts


def readme(canary: str, split: str, queries: int, documents: int) -> str:
    return f"""# hopsmith benchmark export ({split} split)

{canary}

{queries} multi-hop questions over a fixed corpus of {documents} Wikipedia pages, in the layout of
BrowseComp-Plus (github.com/texttron/BrowseComp-Plus).

| file | what |
|---|---|
| `corpus.jsonl` | the search corpus: `{{"docid", "text", "url"}}` a line, docid = Wikipedia page id |
| `queries.jsonl` | `query_id` in plain text; `query`, `answer`, `evidence_docs`, `gold_docs`, `negative_docs` encrypted |
| `topics-qrels/qrel_evidence.txt` | TREC qrels: the pages on each question's reasoning path |
| `topics-qrels/qrel_golds.txt` | TREC qrels: the page that states each answer |

## Decrypting

Every string of a `queries.jsonl` row except `query_id` (at any depth) is base64 of the UTF-8 text XORed
with the SHA-256 digest of the canary line above (the whole line is the password), the digest repeated to
the text's length. This is BrowseComp-Plus's scheme: the `transform_decrypt` function of its
`scripts_build_index/decrypt_dataset.py`, given these rows, the password above and `{{"query_id"}}` as the
keys to skip, decrypts them (the script itself reads BrowseComp-Plus's own Hub dataset). Do not publish the
decrypted rows.

## Recipe

1. Decrypt `queries.jsonl` to `browsecomp_plus_decrypted.jsonl`, and write `queries.tsv` (query_id, query).
2. Index `corpus.jsonl` with any retriever (BrowseComp-Plus's BM25 searcher reads a Lucene index of it).
3. Run an agent; write one run JSON a query: `query_id`, `tool_call_counts`, `status` ("completed" when
   it answered), `retrieved_docids`, `result` (last item `{{"type": "output_text", "output": ...}}`).
   `hopsmith eval` writes these in its `runs/` folder.
4. Score with BrowseComp-Plus's `scripts_evaluation/evaluate_run.py --input_dir <runs>
   --ground_truth browsecomp_plus_decrypted.jsonl --qrel_evidence topics-qrels/qrel_evidence.txt`
   (accuracy by its LLM judge, evidence recall from the qrels), or offline with `hopsmith eval`'s
   summary (answer matching instead of a judge).
"""
