"""Domain knowledge as tables a reviewer reads: the DBpedia ontology (classes, properties, infobox
mappings) and the names that carry no fact (ontology), the phrasebook of relation phrases with its
break scanner (phrasebook), the phrasing rules and the one stop-word list (lexicon), and the wikitext template vocabulary with its separators (templates)."""
