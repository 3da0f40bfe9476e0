"""Full causal attention: every query sees itself and all earlier keys."""
from suite.model.span.base import Span


class Full(Span):
    name = "full"
    is_full = True

    def allowed(self, pos_q, pos_k):
        return pos_k[None, :] <= pos_q[:, None]

    def mask_mod(self):
        return lambda b, h, q_idx, kv_idx: kv_idx <= q_idx
