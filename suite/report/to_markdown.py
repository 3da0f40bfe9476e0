"""The Markdown back end: index.md from a report's blocks (``suite.report.blocks``), each block
followed by a blank line; tables in GitHub's pipe format with one header row."""
from __future__ import annotations

from functools import singledispatch

import pandas as pd

from suite.report.blocks import Alert, Block, Heading, Image, Items, Paragraph, Strong, Table


def render(blocks: list[Block]) -> str:
    """The Markdown page of ``blocks``, in their order."""
    lines = []
    for block in blocks:
        lines += [text(block), ""]
    return "\n".join(lines)


@singledispatch
def text(block) -> str:
    raise TypeError(f"no Markdown for {type(block).__name__}")


@text.register
def _(block: Heading) -> str:
    return "#" * block.level + " " + block.text + (f"`{block.code}`" if block.code is not None else "")


@text.register
def _(block: Paragraph) -> str:
    return block.text


@text.register
def _(block: Strong) -> str:
    return f"**{block.text}**"


@text.register
def _(block: Alert) -> str:
    return f"> **{block.text}**"


@text.register
def _(block: Items) -> str:
    return "\n".join(f"- {line}" for line in block.lines)


@text.register
def _(block: Image) -> str:
    return f"![{block.alt}](plots/{block.name}.png)"


@text.register
def _(block: Table) -> str:
    t = block.frame
    if block.index and (t.index.name or isinstance(t.index, pd.MultiIndex)):  # a named index: the first column
        t = t.reset_index()
    return t.to_markdown(index=False, floatfmt=block.floatfmt, disable_numparse=not block.numparse)
