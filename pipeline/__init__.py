"""hopsmith pipeline: sources, Beam transforms, stage orchestration and the CLI."""
