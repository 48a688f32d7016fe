"""`python -m app.cli`: the qatune command."""

import sys

from app.cli import main

sys.exit(main())
