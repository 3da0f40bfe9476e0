"""A report is a list of sections: a section defined outside the suite, registered the way a scheme
is (``SECTIONS``, as ``SCHEMES``), appears in index.md, in index.html and in its own CSV file, and
the Markdown and HTML back ends render any sections' blocks in the order given.

Mutation checks: ``render.build`` iterating a list of sections made once at import (the catalogue
as the package found it) instead of ``ordered()`` at each build makes
test_a_section_defined_outside_the_suite_is_rendered_and_writes_its_csv fail, and so does
``render.save`` without ``report.csvs()``, or ``save`` keeping the CSV file of a section the board
no longer has (its ``csv_names`` loop removed); ``Report.blocks`` ordering its parts by ``order``
instead of as given makes test_the_back_ends_render_hand_made_sections_in_the_given_order fail, and
so does ``to_markdown.render`` without the blank line after each block, or the HTML ``Heading``
writing its code unescaped.
"""
import re

import pandas as pd
import pytest

from suite.report import context, render
from suite.report.blocks import Alert, Heading, Image, Items, Paragraph, Strong, Table
from suite.report.plots import Plot
from suite.report.sections import SECTIONS, Section
from tests.test_report import _row, frame


class RunsPerScheme(Section):
    """A section the suite does not ship: each scheme's runs, summed over its tasks."""

    name, order = "runs_per_scheme", 75  # after the power section (70), before the effective length (90)
    csv_names = ("runs_per_scheme.csv",)

    def build(self, ctx):
        per_task = ctx.board.drop_duplicates(["scheme", "task"])
        return per_task.groupby("scheme", as_index=False).runs.sum()

    def blocks(self, built, ctx):
        return [Heading("Runs per scheme"), Paragraph("Each scheme's runs, summed over its tasks."),
                Table(built, index=False, floatfmt="g", id="runs-per-scheme")]

    def csvs(self, built, ctx):
        return {"runs_per_scheme.csv": built.to_csv(index=False)}


def _df() -> pd.DataFrame:
    """Three rope runs and one alibi run of copy, at 32 and 64."""
    runs = [("rope", seed) for seed in range(3)] + [("alibi", 0)]
    return frame([_row(f"{scheme}-{seed}", scheme, seed, "copy", length, value)
                  for scheme, seed in runs for length, value in ((32, 0.95), (64, 0.5 + 0.1 * seed))])


def test_a_section_defined_outside_the_suite_is_rendered_and_writes_its_csv(monkeypatch, tmp_path):
    monkeypatch.setitem(SECTIONS, RunsPerScheme.name, RunsPerScheme)
    out = render.write(_df(), "fx", tmp_path / "fx")
    md = (out / "index.md").read_text()
    assert md.index("## Power") < md.index("## Runs per scheme") < md.index("## Effective length")
    assert "## Runs per scheme\n\nEach scheme's runs, summed over its tasks.\n\n| scheme" in md
    assert re.search(r"^\| alibi +\| +1 \|$", md, re.M) and re.search(r"^\| rope +\| +3 \|$", md, re.M)
    page = (out / "index.html").read_text()
    assert page.index("<h2>Power</h2>") < page.index("<h2>Runs per scheme</h2>") < page.index("<h2>Effective length</h2>")
    assert "<p>Each scheme&#x27;s runs, summed over its tasks.</p>" in page
    table = page[page.index('<table id="runs-per-scheme"'):]
    table = table[:table.index("</table>")]
    cells = re.findall(r"<td>(.*?)</td>", table)
    assert cells == ["alibi", "1", "rope", "3"]
    assert pd.read_csv(out / "runs_per_scheme.csv").to_dict("records") == [{"scheme": "alibi", "runs": 1},
                                                                         {"scheme": "rope", "runs": 3}]
    monkeypatch.setattr(RunsPerScheme, "build", lambda self, ctx: None)  # the board has nothing for it now
    render.write(_df(), "fx", out)
    assert "Runs per scheme" not in (out / "index.md").read_text() and not (out / "runs_per_scheme.csv").exists()


class First(Section):
    name, order = "first", 1

    def build(self, ctx):
        return "first"

    def blocks(self, built, ctx):
        return [Heading("Board ", 1, code="a<b"), Alert("Warning: <3 runs"), Strong(f"{built} finding", id="lead"),
                Items(("runs: 4", "source: <none>"))]


class Second(Section):
    name, order = "second", 2

    def build(self, ctx):
        return "second"

    def blocks(self, built, ctx):
        t = pd.DataFrame({"x": [0.5, 2.0]}, index=pd.Index(["a", "b"], name="row"))
        return [Heading(built.title()), Paragraph(f"{built} text"), Table(t, id="second"), Image("pic", "a picture")]

    def plots(self, built, ctx):
        return {"pic": Plot(b"\x89PNG", [])}


MARKDOWN = """## Second

second text

| row   |     x |
|:------|------:|
| a     | 0.500 |
| b     | 2.000 |

![a picture](plots/pic.png)

# Board `a<b`

> **Warning: <3 runs**

**first finding**

- runs: 4
- source: <none>
"""


@pytest.fixture(scope="module")
def shared():
    return context.build(_df(), "hand<made>")


def test_the_back_ends_render_hand_made_sections_in_the_given_order(shared):
    """Second is given first though its ``order`` is later: the back ends keep the given order."""
    report = render.Report(shared, ((Second(), Second().build(shared)), (First(), First().build(shared))))
    assert render.markdown(report) == MARKDOWN
    page = render.html_page(report)
    assert page.startswith("<!doctype html>") and "<title>PosBench: hand&lt;made&gt;</title>" in page
    body = page[page.index("<body>") + len("<body>"):page.index("</body>")]
    parts = ["<h2>Second</h2>", "<p>second text</p>", '<table id="second" class="dataframe">',
             "<th>row</th>", "<td>0.500</td>", "<td>2.000</td>", '<img alt="a picture" src="data:image/png;base64,iVBORw==">',
             "<h1>Board <code>a&lt;b</code></h1>", "<p class='warn'>Warning: &lt;3 runs</p>",
             "<p id='lead'><strong>first finding</strong></p>", "<ul><li>runs: 4</li><li>source: &lt;none&gt;</li></ul>"]
    at = [body.find(p) for p in parts]
    assert -1 not in at and at == sorted(at), dict(zip(parts, at))
    assert body.endswith("</ul>")
