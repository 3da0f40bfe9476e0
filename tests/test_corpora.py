"""The pinned byte corpora (tasks/corpora.py): what each holds, their split, their digests, the
held-out overlap each run stores, and the refusals that name how to get a missing corpus.

Each test names the one-line mutation it was watched failing on."""
import hashlib
import json

import numpy as np
import pytest

import tasks.corpora as corpora
from suite.config.build import SpecError
from tests.conftest import make_spec

# held_out(name) for these one-letter names (SHA-256 of the name below 0.2 * 2**32)
HELD, KEPT = "c", "a"


@pytest.fixture
def toy(monkeypatch):
    """A corpus of the given documents in place of a real one; returns a setter."""
    def use(docs, name="toy"):
        monkeypatch.setitem(corpora.SOURCES, name, corpora.Source("a toy", "none", lambda: list(docs), "make toy"))
        corpora.load.cache_clear()
        return corpora.load(name)
    yield use
    corpora.load.cache_clear()


def test_the_split_names_are_what_the_hash_says():
    assert corpora.held_out(HELD) and not corpora.held_out(KEPT)


def test_no_document_belongs_to_two_corpora():
    """No name and no content is in both corpora, and code holds neither the prose's source
    (pydoc_data) nor a codec or entity table.

    Mutation check: dropping "pydoc_data" from ``DATA_PACKAGES`` makes this fail (pydoc_data's
    topics are the documentation's prose)."""
    code, prose = (dict(corpora.SOURCES[name].read()) for name in ("code", "prose"))
    assert not set(code) & set(prose)
    digest = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    assert not {digest(d) for d in code.values()} & {digest(d) for d in prose.values()}
    assert not [name for name in code if name.split("/")[0] in ("pydoc_data", "encodings")]
    assert "html/entities.py" not in code and "stringprep.py" not in code and "os.py" in code


def test_the_data_tables_left_out_are_what_the_rule_finds():
    """``DATA_MODULES`` is exactly the modules of the pinned library that ``data_table`` calls
    tables, and the rule tells a table from code.

    Mutation check: ``DATA_SHARE = 0.9`` (a table only when nearly all literal) makes this fail."""
    found = {name for name, path in corpora.stdlib_modules() if corpora.data_table(path.read_bytes())}
    assert found == corpora.DATA_MODULES
    table = b"TABLE = {\n" + b"".join(b"    %d: 'x%d',\n" % (i, i) for i in range(400)) + b"}\n"
    assert corpora.data_table(table)
    code = b"def f(x):\n" + b"".join(b"    x = x + %d\n" % i for i in range(400)) + b"    return x\n"
    assert not corpora.data_table(code) and not corpora.data_table(b"__all__ = ['a', 'b']\n")


def test_the_prose_corpus_is_over_5_mb_of_pinned_english_under_its_licence():
    """Mutation check: reading only ``library/`` (``root.rglob("library/*.rst.txt")``) makes this
    fail: the corpus would be another digest and under 5 MB."""
    prose = corpora.load("prose")
    assert prose.n_bytes >= 5_000_000 and len(prose.documents) > 400
    assert prose.digest == corpora.PINNED["prose"] and corpora.SOURCES["prose"].licence == "PSF-2.0"
    assert all(name.endswith(".rst.txt") for name in prose.documents)
    assert len(prose.train) > 1750 * 32 * 64  # the CPU recipe's 1,750 steps of 32 windows of 64 bytes: under one epoch
    assert corpora.load("code").digest == corpora.PINNED["code"]


def test_the_held_out_overlap_is_the_share_of_held_out_ngrams_seen_in_training(toy):
    """A hand count: the held-out stream ``abcdefg\\n`` has 5 windows of 4 bytes; training holds
    ``bcde`` and ``efg\\n`` among its own, so 2 of 5 occur.

    Mutation check: comparing against the held-out stream itself (``ngram_hashes(corpus.test)``
    as the training side) makes this fail."""
    corpus = toy([(KEPT, b"xxbcdexxefg"), (HELD, b"abcdefg")])
    assert bytes(corpus.test) == b"abcdefg\n" and corpus.overlap(4) == pytest.approx(2 / 5)
    assert corpus.record()[f"held_out_{corpora.NGRAM}gram_overlap"] == round(corpus.overlap(), 4)
    hashes = corpora.ngram_hashes(np.frombuffer(b"abab", dtype=np.uint8), 2)
    assert hashes[0] == hashes[2] != hashes[1]


def test_the_overlap_is_stored_with_the_run_and_printed_by_describe(toy, tmp_path):
    """Mutation check: leaving the overlap out of ``Corpus.record`` makes this fail."""
    from suite.run import execute
    from tests.test_text import TINY

    spec = make_spec("task=prose", "sweep_name=ov", *TINY)
    payload = json.loads(execute(spec, results_dir=tmp_path, progress=False).read_text())
    stored = payload["run"]["corpora"]["prose"][f"held_out_{corpora.NGRAM}gram_overlap"]
    assert stored == round(corpora.load("prose").overlap(), 4) and 0 < stored < 0.5
    assert f"{stored:.1%}"[:3] in corpora.describe("prose") and "occur in training" in corpora.describe("prose")


def test_no_held_out_byte_reaches_training_on_the_real_corpora():
    """Each stream is exactly its side's documents, and the sides share no document.

    Mutation check: building the training stream from every document (``stream(docs)`` for
    ``stream(kept)`` in Corpus.of) makes this fail."""
    for name in ("code", "prose"):
        real = corpora.load(name)
        held = set(real.held_out)
        assert held and held < set(real.documents)
        docs = dict(corpora.SOURCES[name].read())
        assert bytes(real.test) == b"".join(docs[d] + b"\n" for d in real.documents if d in held)
        assert bytes(real.train) == b"".join(docs[d] + b"\n" for d in real.documents if d not in held)


def test_the_content_digest_covers_names_and_bytes():
    """Mutation check: leaving the name out of content_digest makes this fail."""
    docs = [("a", b"one"), ("b", b"two")]
    base = corpora.content_digest(docs)
    assert corpora.content_digest([("a", b"one"), ("b", b"twO")]) != base
    assert corpora.content_digest([("a", b"one"), ("c", b"two")]) != base
    assert corpora.content_digest([("a", b"on"), ("b", b"etwo")]) != base  # a byte moved across documents
    assert base == corpora.content_digest(list(docs))


def test_a_different_corpus_is_refused_before_training_naming_both_digests(toy):
    """Mutation check: returning the corpus in ``checked`` without comparing digests makes this fail."""
    found = toy([(KEPT, b"other text"), (HELD, b"held")], name="code").digest
    with pytest.raises(SpecError) as err:
        make_spec("task=code")
    message = str(err.value)
    assert corpora.PINNED["code"] in message and found in message
    assert "expected" in message and corpora.SOURCES["code"].install in message and "task.digest" in message


def test_a_missing_prose_corpus_is_refused_naming_how_to_install_it(monkeypatch, tmp_path):
    """No root holds the documentation's sources: the task is refused before training, naming the
    expected digest and both ways to install the package.

    Mutation check: letting the FileNotFoundError through in ``load`` (no CorpusRefused) makes this fail."""
    monkeypatch.setattr(corpora, "prose_roots", lambda: [tmp_path / "nowhere"])
    corpora.load.cache_clear()
    try:
        with pytest.raises(SpecError, match="corpus 'prose' is missing") as err:
            make_spec("task=prose")
    finally:
        corpora.load.cache_clear()
    message = str(err.value)
    assert corpora.PINNED["prose"] in message
    assert "make corpora" in message and "apt-get install python3.11-doc" in message


def test_the_prose_roots_look_in_the_environment_first(monkeypatch, tmp_path):
    """``$POSBENCH_CORPORA`` is read before the project's cache and the system's folder.

    Mutation check: appending the environment's root last in ``prose_roots`` makes this fail."""
    monkeypatch.setenv("POSBENCH_CORPORA", str(tmp_path))
    roots = corpora.prose_roots()
    assert roots[0] == tmp_path / corpora.PROSE_PACKAGE / corpora.PROSE_SOURCES
    assert roots[-1].as_posix() == "/" + corpora.PROSE_SOURCES.as_posix()
