"""``python -m tether.tui.cli``: the ``tether`` command."""

from tether.tui.cli import main

main()
