"""The kinds of attention span: what bounds a span ("window": a sliding window of recent keys,
"chunk": fixed chunks), each with its short label in tables ("w=16", "c=16").

Each kind is also a per-run results column, read by the results store and the report, which
load no model code: this module imports nothing, so they read it without torch. A span declares
its kind (``suite.model.span.base.Span.kind``), one of these keys or None.
"""

KINDS: dict[str, str] = {"window": "w", "chunk": "c"}
