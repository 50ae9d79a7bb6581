"""`hopsmith graph-stats DIR`: the statistics of a stage-1 graph (`graph.stats`), as text or JSON."""

from __future__ import annotations

import json

from graph.model import load_graph
from graph.stats import format_stats, graph_stats


def register(subparsers) -> None:
    parser = subparsers.add_parser("graph-stats", help="statistics of a stage-1 graph folder",
                                   description="Nodes, edges, relation histogram, degree distribution and "
                                   "head-entity count of the graph in DIR (the output of `hopsmith extract`).")
    parser.add_argument("dir", help="stage-1 output folder (entities/, relations/)")
    parser.add_argument("--top", type=int, default=20, help="relations and types listed (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    stats = graph_stats(load_graph(args.dir), top=args.top)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0
