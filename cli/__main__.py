"""`python -m cli`: the `hopsmith` command."""

import sys

from cli.main import main

sys.exit(main())
