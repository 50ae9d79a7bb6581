"""`hopsmith index`: its flags and the handler that builds the search index
(`synth.environment.build_index`)."""

from __future__ import annotations

from ground.errors import UserError
from ground.io import read_manifest
from schemas.config import IndexConfig
from synth.environment import build_index


def register(subparsers) -> None:
    defaults = IndexConfig()
    parser = subparsers.add_parser(
        "index",
        help="stage 3 environment: build the bm25s search index over a snapshot's kept pages",
        description="Clean every kept article of stage 1 (templates rendered, refs dropped), split it into "
        "numbered chunks and build the BM25 index the search tools use. Runs once per snapshot.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/index", help="index folder (default: %(default)s)")
    parser.add_argument("--chunk-chars", type=int, default=defaults.chunk_chars,
                        help="most characters of one open_page chunk (default: %(default)s)")
    parser.add_argument("--title-weight", type=float, default=defaults.title_weight,
                        help="weight of the title/alias field in ranking (default: %(default)s)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    if read_manifest(args.graph) is None:
        raise UserError(f"no finished stage 1 output in {args.graph} (run `hopsmith extract` first)")
    config = IndexConfig(chunk_chars=args.chunk_chars, title_weight=args.title_weight)
    manifest = build_index(args.graph, args.out, config, beam_args=beam_args)
    counts = manifest.counts
    print(f"index: {counts['pages_in']} pages in, {counts['kept']} indexed in {counts['chunks']} chunks -> {args.out}")
    for key, value in counts.items():
        if key.startswith("skipped:"):
            print(f"  {key:<28} {value}")
    return 0
