"""The contract between hopsmith's stages: every record that crosses a stage boundary, and the run config.

Import records from their modules (`schemas.wiki`, `schemas.questions`, ...): this package imports nothing
itself, so that `schemas.secrets` (which the CLI needs before anything else) loads without pydantic.
"""
