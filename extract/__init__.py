"""Stage 1: read pages from a source, classify them, extract entities and typed relations with provenance,
and write the entity-relation shards (entities, relations, skipped, pages + manifest).

Steps, each a plain function the Beam pipeline and `extract_records` (one process, no Beam) share:

1. `classify.classify_record`: every input record is an article, a redirect, or a SkippedRecord (read
   errors from the source, `non_article` namespaces, `disambiguation` pages).
2. `classify.resolve_redirects`: the redirect map with chains followed to their end; pages in a cycle are
   skipped as `redirect_cycle`, the others as `redirect` (they live on as aliases of their target).
3. `classify.pick_duplicate`: a title seen twice keeps its latest revision (of exact copies, one); the
   others are `duplicate`. Only titles seen more than once are grouped, so the shuffle holds only their pages.
4. `article.extract_article`: one article -> Entity, Relations (infobox facts + lead `links_to`) and its
   Page, or a SkippedRecord (`oversized`, `timeout`, `parse_error`, `broken_markup`). Head entities are
   those whose revision lies within `window_days` before `as_of` (default: the newest plausible revision
   in the input; see `as_of.AsOfChoice`).
5. `article.attach_aliases`: redirect titles become the aliases of the entity they resolve to.

Every input record ends as exactly one kept entity or one skipped row, so `pages_in == kept + skipped`
holds and is checked before the manifest is written.

Modules: `sources` (dump and API readers), `classify`, `article`, `as_of`, `tables` (the output tables'
order, shards and counts), `oracle` (`extract_records`), `units` (phase 1), `joins` and `shards` (phase 2),
`transforms` (the Beam composites) and `stage` (`run_extract`).
"""
