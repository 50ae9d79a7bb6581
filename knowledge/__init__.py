"""Domain knowledge as tables a reviewer reads: the DBpedia ontology (classes, properties, infobox
mappings), the lexicon of relation phrases and type nouns, and the template vocabulary."""
