"""``python -m suite.bench``: the same as ``python -m suite.bench.perf``."""
import sys

from suite.bench.perf import main

sys.exit(main())
