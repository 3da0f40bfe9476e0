"""MRR ranks over cells some schemes are absent from (a dev folder of one-off runs: a text task
only ALiBi ran, a copy cell only NoPE ran) take no difference of two absent schemes, so no
numpy RuntimeWarning reaches the report's terminal, and the ranks are the ones the rule gives.

Mutation check: ``tie_ranks`` taking ``s[:, None] - s[:, :, None]`` over every pair again (-inf - -inf)
makes test_ranks_with_two_absent_schemes_warn_nothing fail.
"""
import warnings

import numpy as np

from suite.report import ranking


def test_ranks_with_two_absent_schemes_warn_nothing():
    # one replicate, four schemes, two cells: in cell 0 schemes 2 and 3 are absent, in cell 1 scheme 0 is
    s = np.array([[[0.9, -np.inf], [0.5, 0.7], [-np.inf, 0.7001], [-np.inf, 0.2]]])  # (R, S, C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low = ranking.tie_ranks(s, "min")
        average = ranking.tie_ranks(s, "average")
    # cell 0: 0.9 first, 0.5 second; cell 1: 0.7 and 0.7001 tied first (closer than the margin), 0.2 third
    assert low[0, :2, 0].tolist() == [1.0, 2.0] and low[0, 1:, 1].tolist() == [1.0, 1.0, 3.0]
    assert average[0, 1:, 1].tolist() == [1.5, 1.5, 3.0]
