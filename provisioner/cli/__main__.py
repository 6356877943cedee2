"""``python -m provisioner.cli``: the ``provisioner`` command."""

import sys

from provisioner.cli.main import main

sys.exit(main())
