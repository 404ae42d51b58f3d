"""``python -m distsort.cli``: the ``distsort`` command."""
import sys

from .command import main

if __name__ == "__main__":  # not when pytest's doctest collection imports it
    sys.exit(main())
