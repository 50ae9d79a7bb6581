"""`hopsmith` command line: one module per command; the top floor, it may import every package."""
