"""`hopsmith export-benchmark`: the folder read the way BrowseComp-Plus's data and evaluation code read it
(its decryption scheme, its qrel loader, its run-file fields and recall), written independently here; and,
where a checkout of BrowseComp-Plus is given (`make browsecomp-check`), scored by their own evaluator."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import datasets
import pytest

from cli.main import main
from ground.io import read_records
from schemas.questions import Question
from synth.evaluation import read_results
from synth.matching import match_answer
from tests.servers import OpenAIServer, Reply
from tests.trajectory_fixtures import make_snapshot


def decrypt(value, password: str):
    """BrowseComp-Plus's documented scheme, inverted: base64, then XOR with sha256(password) repeated."""
    if isinstance(value, list):
        return [decrypt(v, password) for v in value]
    if isinstance(value, dict):
        return {k: v if k == "query_id" else decrypt(v, password) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    data = base64.b64decode(value)
    key = hashlib.sha256(password.encode()).digest()
    key = key * (len(data) // len(key)) + key[: len(data) % len(key)]
    return bytes(a ^ b for a, b in zip(data, key, strict=True)).decode()


def load_qrels(path) -> dict[str, list[str]]:
    """As their evaluator loads qrels: four whitespace-separated fields, query id first, doc id third."""
    qrels: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            parts = line.split()
            assert len(parts) == 4 and parts[1] == "Q0"
            qrels[parts[0]].append(parts[2])
    return dict(qrels)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = make_snapshot(tmp_path_factory.mktemp("bench"))
    out = root / "benchmark"
    assert main(["export-benchmark", "--questions", str(root / "questions"), "--index", str(root / "index"),
                 "--out", str(out), "--split", "all"]) == 0
    return root, out


def test_the_export_decrypts_to_the_questions_and_its_qrels_name_corpus_documents(exported):
    root, out = exported
    questions = {q.question_id: q for q in read_records(Question, root / "questions" / "questions")}
    canary = next(line for line in (out / "README.md").read_text().splitlines() if "canary GUID" in line)
    raw = (out / "queries.jsonl").read_text()
    assert all(q.answer not in raw and q.text not in raw for q in questions.values())  # nothing in plain text
    rows = [decrypt(json.loads(line), canary) for line in raw.splitlines()]
    loaded = datasets.load_dataset("json", data_files=str(out / "queries.jsonl"), split="train",
                                   cache_dir=str(root / "hf-cache"))
    assert [decrypt(dict(row), canary) for row in loaded] == rows  # as their decryption iterates a `datasets` split
    assert {r["query_id"] for r in rows} == set(questions)
    corpus = {d["docid"]: d for d in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}
    assert all(set(d) == {"docid", "text", "url"} for d in corpus.values())
    evidence, golds = load_qrels(out / "topics-qrels" / "qrel_evidence.txt"), load_qrels(out / "topics-qrels" / "qrel_golds.txt")
    for row in rows:
        question = questions[row["query_id"]]
        assert row["query"] == question.text and row["answer"] == question.answer
        assert [d["docid"] for d in row["evidence_docs"]] == evidence[row["query_id"]]
        assert [d["docid"] for d in row["gold_docs"]] == golds[row["query_id"]]
        assert all(corpus[d["docid"]] == d for d in row["evidence_docs"] + row["gold_docs"])
        titles = {corpus[d]["text"].split("\n", 1)[0] for d in evidence[row["query_id"]]}
        assert {hop.head for hop in question.path.hops} <= titles  # the path's pages are the evidence
        assert set(golds[row["query_id"]]) <= set(evidence[row["query_id"]])


def test_eval_run_files_score_the_same_recall_with_the_export_qrels_as_in_the_summary(exported, tmp_path):
    root, out = exported
    runs = tmp_path / "eval"
    assert main(["eval", "--questions", str(root / "questions"), "--index", str(root / "index"), "--out", str(runs),
                 "--policy", "naive", "-k", "1"]) == 0
    qrels = load_qrels(out / "topics-qrels" / "qrel_evidence.txt")
    recalls, completed = [], 0
    for path in sorted((runs / "runs").glob("*.json")):  # their evaluator's reading of a run file
        run = json.loads(path.read_text())
        positives = qrels.get(str(run["query_id"]), [])
        completed += run["status"] == "completed"
        if positives:
            recalls.append(len(set(run["retrieved_docids"]) & set(positives)) / float(len(positives)))
    summary = json.loads((runs / "summary.json").read_text())
    assert len(recalls) == summary["questions"] == len(read_results(runs))
    assert sum(recalls) / len(recalls) == pytest.approx(summary["evidence_recall"])
    assert 1 - completed / len(recalls) == pytest.approx(summary["unfinished"])


BROWSECOMP_PLUS = os.environ.get("BROWSECOMP_PLUS_DIR")  # a checkout of github.com/texttron/BrowseComp-Plus
GRADED = re.compile(r"\[question\]: (?P<question>.*?)\n\n\[response\]: (?P<response>.*?)\n\nYour judgement.*"
                    r"\[correct_answer\]: (?P<answer>.*?)\n\nreasoning:", re.DOTALL)


def matcher_grader(aliases: dict[str, list[str]]):
    """A grader on 127.0.0.1 that replies in the format BrowseComp-Plus's judge prompt asks for; its verdict is
    the project's offline answer matcher with the question's aliases (what an LLM judge knows: "Springfield"
    is "Springfield, Illinois")."""
    def grade(body: dict) -> Reply:
        fields = GRADED.search(body["input"])
        response = fields["response"].strip()
        correct = match_answer(response, fields["answer"].strip(), aliases[fields["question"].strip()]).correct
        return Reply(content=f"extracted_final_answer: {response}\n\nreasoning: matcher\n\n"
                             f"correct: {'yes' if correct else 'no'}\n\nconfidence: 100")
    return grade


@pytest.mark.skipif(not BROWSECOMP_PLUS, reason="BROWSECOMP_PLUS_DIR (a BrowseComp-Plus checkout) is not set")
def test_browsecomp_plus_own_evaluator_scores_hopsmith_run_files_as_the_summary_does(exported, tmp_path):
    """Their `scripts_evaluation/evaluate_with_openai.py`, run as their docs say, on the export's decrypted
    queries and evidence qrels and on the run files of `hopsmith eval`, its judge served on 127.0.0.1."""
    root, out = exported
    runs = tmp_path / "eval"
    assert main(["eval", "--questions", str(root / "questions"), "--index", str(root / "index"), "--out", str(runs),
                 "--policy", "offline", "-k", "1"]) == 0
    canary = next(line for line in (out / "README.md").read_text().splitlines() if "canary GUID" in line)
    rows = [decrypt(json.loads(line), canary) for line in (out / "queries.jsonl").read_text().splitlines()]
    truth = tmp_path / "browsecomp_plus_decrypted.jsonl"
    truth.write_text("".join(json.dumps({k: row[k] for k in ("query_id", "query", "answer")}) + "\n" for row in rows))
    aliases = {q.text: q.aliases for q in read_records(Question, root / "questions" / "questions")}
    with OpenAIServer(matcher_grader(aliases)) as grader:
        env = {**os.environ, "OPENAI_BASE_URL": grader.base_url, "OPENAI_API_KEY": "loopback"}
        subprocess.run([sys.executable, "scripts_evaluation/evaluate_with_openai.py", "--input_dir",
                        str(runs / "runs"), "--ground_truth", str(truth), "--eval_dir", str(tmp_path / "evals"),
                        "--qrel_evidence", str(out / "topics-qrels" / "qrel_evidence.txt")],
                       cwd=BROWSECOMP_PLUS, env=env, check=True, capture_output=True, text=True)
        assert len(grader.requests) == sum(r["status"] == "completed" for r in map(json.loads, map(
            Path.read_text, (runs / "runs").glob("*.json"))))  # every finished run went to their judge
    theirs = json.loads(next((tmp_path / "evals").rglob("evaluation_summary.json")).read_text())
    ours = json.loads((runs / "summary.json").read_text())
    assert len(theirs["per_query_metrics"]) == ours["questions"] == len(read_results(runs)) > 0
    assert theirs["Accuracy (%)"] == pytest.approx(round(100 * ours["pass@1"], 2))
    assert theirs["Recall (%)"] == pytest.approx(round(100 * ours["evidence_recall"], 2))
    assert theirs["avg_tool_stats"] == pytest.approx(ours["tool_calls_per_rollout"])
