"""`hopsmith export-benchmark`: a split of the questions as a BrowseComp-Plus-layout benchmark
(`pipeline.benchmark`)."""

from __future__ import annotations

from ground.errors import UserError
from ground.io import read_manifest, read_records
from ground.storage import as_path
from pipeline.benchmark import export_benchmark
from schemas.config import DatasetConfig
from schemas.questions import Question
from synth.environment import SearchEnvironment


def register(subparsers) -> None:
    fraction = DatasetConfig.model_fields["test_fraction"].default
    parser = subparsers.add_parser(
        "export-benchmark",
        help="write a split as a fixed-corpus benchmark in BrowseComp-Plus's layout (encrypted answers, qrels)",
        description="Write corpus.jsonl (the index's pages), queries.jsonl (encrypted as BrowseComp-Plus encrypts "
        "its release, with a canary), TREC qrels of the path pages (qrel_evidence) and answer pages (qrel_golds), "
        "and a README with the recipe. Score runs with `hopsmith eval` or BrowseComp-Plus's own evaluator.",
    )
    parser.add_argument("--questions", default="out/questions", help="stage 2 output folder (default: %(default)s)")
    parser.add_argument("--index", default="out/index", help="search index folder (default: %(default)s)")
    parser.add_argument("--out", default="out/benchmark", help="output folder (default: %(default)s)")
    parser.add_argument("--split", choices=["test", "train", "all"], default="test",
                        help="which questions, by the dataset's hash split (default: %(default)s)")
    parser.add_argument("--test-fraction", type=float, default=fraction,
                        help="the dataset's test share, to pick the same split (default: %(default)s)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    for name, folder in (("questions", args.questions), ("index", args.index)):
        if read_manifest(folder) is None:
            raise UserError(f"no finished {name} output in {folder}")
    questions = list(read_records(Question, as_path(args.questions) / "questions"))
    counts = export_benchmark(questions, SearchEnvironment.load(args.index), args.out, split=args.split,
                              test_fraction=args.test_fraction)
    print(f"export-benchmark: {counts['queries']} queries over {counts['documents']} documents -> {args.out}")
    for key, value in sorted(counts.items()):
        print(f"  {key:<32} {value}")
    return 0
