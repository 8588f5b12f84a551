"""``python -m tilescope`` is the ``tilescope`` command."""

import sys

from tilescope.cli import main

sys.exit(main())
