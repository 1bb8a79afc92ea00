"""``python -m tether.tui.cli``: the ``tether`` command, its exit code the process's."""

import sys

from tether.tui.cli import main

sys.exit(main())
