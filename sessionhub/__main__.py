"""``python -m sessionhub``: the ``sessionhub`` command (see sessionhub/cli.py)."""

from sessionhub.cli import main

main()
