"""Stage 1: read pages from a source, classify them, extract entities and typed relations with provenance,
and write the entity-relation shards."""
