"""``python -m ember``: the ``ember`` command line (see :mod:`ember.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
