"""``python -m bench`` (``make bench``): every figure beside its target; see ``bench.run``."""

import logging
import sys

from bench.run import main

logging.basicConfig(level=logging.ERROR)  # the daemons started here log their lives; the figures are the output
sys.exit(main())
