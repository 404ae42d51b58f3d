"""``python -m distsort.cli``: the ``distsort`` command."""
from distsort.cli.command import run

if __name__ == "__main__":  # not when pytest's doctest collection imports it
    run()
