"""The leaderboard's tables under the names other modules and scripts read them by, each from
its home: the board (``suite.report.boards``), the MRR (``suite.report.ranking``), the effective
length (``suite.report.sections.effective_length``)."""
from __future__ import annotations

from suite.report.boards import EMPTY, board_of, cell_text, leaderboard, pivot, primary, scheme_order
from suite.report.ranking import BOOTSTRAP_REPS, BOOTSTRAP_SEED, TIED_BELOW, mrr, mrr_intervals, mrr_learned
from suite.report.sections.effective_length import effective_length

__all__ = ["BOOTSTRAP_REPS", "BOOTSTRAP_SEED", "EMPTY", "TIED_BELOW", "board_of", "cell_text", "effective_length",
           "leaderboard", "mrr", "mrr_intervals", "mrr_learned", "pivot", "primary", "scheme_order"]
