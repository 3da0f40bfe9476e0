"""make report-check: a headless Chromium sees a non-blank first screen, every image, the MRR table.

Mutation checks: in suite/report/page_check.py blank, a 1 % threshold of 0 (``< 0``) makes
test_a_one_colour_screenshot_is_blank_and_a_drawn_one_is_not fail; styles.clashes keying on the
label instead of (axes, colour, marker), or style_problems skipping a plot without a record, makes
test_two_lines_of_one_plot_in_one_look_fail_the_style_check fail.
"""
import matplotlib.pyplot as plt
import numpy as np
import pytest

from suite.report import page_check, render
from suite.report.styles import Style
from tests.test_report_readable import _df


def test_a_one_colour_screenshot_is_blank_and_a_drawn_one_is_not(tmp_path):
    white = np.ones((100, 100, 3))
    plt.imsave(tmp_path / "white.png", white)
    assert page_check.blank(tmp_path / "white.png")
    white[20:40, 10:90] = 0  # a line of text's worth of ink
    plt.imsave(tmp_path / "text.png", white)
    assert not page_check.blank(tmp_path / "text.png")


def test_two_lines_of_one_plot_in_one_look_fail_the_style_check(tmp_path):
    r = render.build(_df(), "fx")
    assert page_check.style_problems(render.save(r, tmp_path / "ok")) == []
    r["styles"].update({"alibi": Style("#1f77b4", "o"), "rope": Style("#1f77b4", "o")})  # one look twice
    out = render.save(r, tmp_path / "dup")
    assert page_check.style_problems(out) == [
        "plots/copy.png: 'alibi' and 'rope' share colour #1f77b4 and marker 'o'"]  # read from the drawn lines
    (out / "plots" / "summary.styles.json").unlink()
    assert "plots/summary.png has no style record plots/summary.styles.json (rebuild the report)" in \
        page_check.style_problems(out)


@pytest.fixture
def page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="make report-check installs playwright")
    browser_path = page_check.find_chromium()
    if browser_path is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        yield browser.new_page(viewport=page_check.VIEWPORT)
        browser.close()


def test_a_built_report_passes_and_a_broken_image_or_missing_table_is_named(page, tmp_path):
    out = render.write(_df(), "fx", tmp_path / "fx")
    assert page_check.check_page(page, out / "index.html", tmp_path / "ok.png") == []
    html = (out / "index.html").read_text()
    broken = html.replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1)  # the first image cannot decode
    (tmp_path / "broken.html").write_text(broken.replace('id="mrr"', 'id="gone"'))
    problems = page_check.check_page(page, tmp_path / "broken.html", tmp_path / "broken.png")
    assert any("did not load" in p for p in problems) and "the MRR table is not visible" in problems
