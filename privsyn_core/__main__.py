"""``python -m privsyn_core``: the ``privsyn`` command line (also a script spark-submit can run)."""

import sys

from privsyn_core.cli import main

sys.exit(main())
