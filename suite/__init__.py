"""PosBench: a benchmark suite and leaderboard for positional encoding in decoder-only transformers."""
from suite import pins as _pins

_pins.apply()  # before anything imports torch: the numeric paths are chosen when it loads
