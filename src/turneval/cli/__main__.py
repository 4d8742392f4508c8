"""``python -m turneval.cli``: the ``turneval`` command line, as ``python -m turneval``."""

import sys

from turneval.cli._entry import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
