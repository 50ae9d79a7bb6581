"""`hopsmith census`: world-scale fact counts from a full dump's graph, for the questions stage's uniqueness."""

from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "census",
        help="count subjects per fact and entities per class of a (full dump's) graph, for questions.census",
        description="Count, over an extract stage's graph folder, how many subjects state each (relation, value) "
        "fact and how many entities each class has, and write them as JSON. Give the file as `questions.census` "
        "so that a described start must be unique at the scale of that graph, not only of the run's slice.",
    )
    parser.add_argument("graph", help="the graph folder of `hopsmith extract` over a full dump")
    parser.add_argument("--out", required=True, help="the census file to write (JSON)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    from synth.census import count_census, save_census

    census = count_census(args.graph)
    save_census(census, args.out)
    print(f"census of {census.entities:,} entities and {len(census.values):,} facts written to {args.out}")
    return 0
