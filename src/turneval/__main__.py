"""``python -m turneval``: the ``turneval`` command line (see :mod:`turneval.cli`)."""

import sys

from turneval.cli import main

if __name__ == "__main__":
    sys.exit(main())
