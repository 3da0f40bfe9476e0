"""The HTML back end: a self-contained index.html from a report's blocks (``suite.report.blocks``),
run-supplied text escaped, every plot embedded as a PNG data URL, an empty table cell read '-'."""
from __future__ import annotations

import base64
import html
from functools import singledispatch

import pandas as pd

from suite.report.blocks import Alert, Block, Heading, Image, Items, Paragraph, Strong, Table
from suite.report.boards import EMPTY
from suite.report.plots import Plot

STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
         "table{border-collapse:collapse;margin:1em 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
         "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}.warn{background:#fde2e1;"
         "border:1px solid #d33;padding:.5em;font-weight:bold}")
esc = html.escape


def render(blocks: list[Block], plots: dict[str, Plot], title: str) -> str:
    """The page of ``blocks``, in their order, titled ``title``; each ``Image`` embeds the plot of its name."""
    body = "".join(element(block, plots) for block in blocks)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _id(block, quote: str = "'") -> str:
    """The id attribute of a block that has one, `` id='verdict'`` (tables and images quote it with
    ``quote``); '' for one without."""
    return f" id={quote}{block.id}{quote}" if block.id else ""


@singledispatch
def element(block, plots: dict[str, Plot]) -> str:
    raise TypeError(f"no HTML for {type(block).__name__}")


@element.register
def _(block: Heading, plots) -> str:
    code = f"<code>{esc(block.code)}</code>" if block.code is not None else ""
    return f"<h{block.level}>{esc(block.text)}{code}</h{block.level}>"


@element.register
def _(block: Paragraph, plots) -> str:
    return f"<p{_id(block)}>{esc(block.text)}</p>"


@element.register
def _(block: Strong, plots) -> str:
    return f"<p{_id(block)}><strong>{esc(block.text)}</strong></p>"


@element.register
def _(block: Alert, plots) -> str:
    return f"<p class='warn'>{esc(block.text)}</p>"


@element.register
def _(block: Items, plots) -> str:
    return "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in block.lines) + "</ul>"


@element.register
def _(block: Image, plots) -> str:
    data, ident = base64.b64encode(plots[block.name].png).decode(), _id(block, '"')
    return f'<img{ident} alt="{esc(block.alt)}" src="data:image/png;base64,{data}">'


@element.register
def _(block: Table, plots) -> str:
    """One header row: a shown index becomes the first column (an unnamed one under an empty header)."""
    t = block.frame
    if block.index:
        t = t.reset_index() if t.index.name or isinstance(t.index, pd.MultiIndex) else t.rename_axis("").reset_index()
    out = t.to_html(index=False, escape=True, float_format=f"{{:{block.floatfmt}}}".format, na_rep=EMPTY, border=0)
    return out.replace("<table", "<table" + _id(block, '"'), 1)
