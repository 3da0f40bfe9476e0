"""Natural text (tasks/text.py): the pinned byte corpora, their split, bits per byte, and the code
and prose tasks through ``suite.run``.

Each test names the one-line mutation it was watched failing on."""
import math

import numpy as np
import pytest
import torch

import tasks.text as text
from suite.config.build import SpecError
from suite.evaluation.evaluate import score_examples
from suite.config.compose import CONF_DIR
from suite.run import execute
from tasks import build_task
from tasks.base import BOS_ID, VOCAB_SIZE
from tests.conftest import fast_or_exhaustive, make_spec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TINY = ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "train.steps=3",
        "train.batch_size=4", "train.seq_len=16", "eval.n_examples=3", "eval.batch_size=3", "eval.multiples=[1,2,4]",
        "logger=none"]
# held_out(name) for these one-letter names (SHA-256 of the name below 0.2 * 2**32)
HELD, KEPT = "c", "a"


@pytest.fixture
def toy(monkeypatch):
    """A corpus ``toy`` of the given documents in place of a real one; returns a setter."""
    def use(docs, name="toy"):
        monkeypatch.setitem(text.SOURCES, name, text.Source("a toy", "none", lambda: list(docs)))
        text.load.cache_clear()
        return text.load(name)
    yield use
    text.load.cache_clear()


class Toy(text.TextLM):
    name = "toy"  # not in the registry: a test's own task over the toy corpus
    corpus = "toy"


def test_the_split_names_are_what_the_hash_says():
    assert text.held_out(HELD) and not text.held_out(KEPT)


class RepeatModel(torch.nn.Module):
    """Logits 0 for every token but log(3) for the input token: p(next = this) = 3 / (V + 2),
    p(any other) = 1 / (V + 2)."""

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, VOCAB_SIZE)
        logits.scatter_(2, tokens[..., None], math.log(3.0))
        return logits


def test_bits_per_byte_is_the_hand_computation_on_a_two_document_toy_corpus(toy):
    """Held-out document ``abb``: its stream is ``abb\\n``, one window of 4 bytes at length 5.
    Each byte's probability under ``RepeatModel``: ``a`` after ``<s>`` 1/(V+2), ``b`` after ``a``
    1/(V+2), ``b`` after ``b`` 3/(V+2), ``\\n`` after ``b`` 1/(V+2). With training length 3 the
    positions at or past it are 3 and 4 (the second ``b`` and ``\\n``).

    Mutation checks: ``past = nll[train_len:]`` in tasks/text.py bits_per_byte (one position too
    late) makes this fail; so does dropping ``/ LN2`` (nats, not bits)."""
    toy([(KEPT, b"xyzxyzxyz"), (HELD, b"abb")])
    task = Toy(digest=text.load("toy").digest)
    (ex,) = task.eval_set(5, 0, 1)
    assert ex.tokens == [BOS_ID, *text.encode_bytes(b"abb\n")]
    tally = score_examples(RepeatModel(), task, [ex], 1, torch.device("cpu"), torch.autocast("cpu", enabled=False),
                           train_len=3)
    rows = {m: v for m, v, _, s in tally.rows() if s == "all"}
    v = VOCAB_SIZE + 2
    hand = (3 * math.log2(v) + math.log2(v / 3)) / 4
    past = (math.log2(v / 3) + math.log2(v)) / 2
    assert rows["bits_per_byte"] == pytest.approx(hand, rel=1e-6)
    assert rows["bits_per_byte_past_train"] == pytest.approx(past, rel=1e-6)
    assert rows["loss"] == pytest.approx(hand * math.log(2), rel=1e-6)  # the suite's own loss, in nats


def test_no_held_out_byte_reaches_training(toy):
    """The training document is all ``T``, the held-out one all ``H``: no training window, at any
    length or draw, holds an ``H``, and every evaluation window is held-out text only. On the real
    corpora the two sides share no document and each stream is exactly its side's documents.

    Mutation check: building the training stream from every document (``stream(docs)`` for
    ``stream(kept)`` in Corpus.of) makes this fail."""
    corpus = toy([(KEPT, b"T" * 300), (HELD, b"H" * 300)])
    task = Toy(digest=corpus.digest)
    rng = np.random.default_rng(0)
    seen = set()
    for length in (2, 17, 64, 250):
        for _ in range(200):
            seen |= set(text.decode_bytes(task.generate(rng, length).tokens))
    assert seen == {ord("T"), ord("\n")}
    for length in (5, 33):
        got = {b for ex in task.eval_set(length, 1234, 4) for b in text.decode_bytes(ex.tokens)}
        assert got <= {ord("H"), ord("\n")}
    for name in ("code", "prose"):
        real = text.load(name)
        held = set(real.held_out)
        assert held and held < set(real.documents)
        docs = dict(text.SOURCES[name].read())
        assert bytes(real.test) == b"".join(docs[d] + b"\n" for d in real.documents if d in held)
        assert bytes(real.train) == b"".join(docs[d] + b"\n" for d in real.documents if d not in held)


def test_evaluation_windows_do_not_overlap_and_are_readable_text():
    """ALiBi's non-overlapping windows, each valid UTF-8, the same set at every call.

    Mutation check: ``range(0, ..., 1)`` for the step ``size`` in readable_windows makes this fail."""
    task = build_task("prose")
    for length in (64, 512):
        exs = task.eval_set(length, 1234, 50)
        starts = [ex.meta["start"] for ex in exs]
        assert starts == sorted(starts) and all(b - a >= length - 1 for a, b in zip(starts, starts[1:]))
        for ex in exs:
            text.decode_bytes(ex.tokens).decode("utf-8")  # raises on a split character
            assert len(ex.tokens) == length and ex.answer_spans == [(1, length)]
        assert [e.tokens for e in task.eval_set(length, 1234, 50)] == [e.tokens for e in exs]


def test_the_content_digest_covers_names_and_bytes():
    """Mutation check: leaving the name out of content_digest makes this fail."""
    docs = [("a", b"one"), ("b", b"two")]
    base = text.content_digest(docs)
    assert text.content_digest([("a", b"one"), ("b", b"twO")]) != base
    assert text.content_digest([("a", b"one"), ("c", b"two")]) != base
    assert text.content_digest([("a", b"on"), ("b", b"etwo")]) != base  # a byte moved across documents
    assert base == text.content_digest(list(docs))


def test_a_different_corpus_is_refused_before_training_naming_both_digests(toy):
    """Mutation check: returning the corpus in ``checked`` without comparing digests makes this fail."""
    found = toy([(KEPT, b"other text"), (HELD, b"held")], name="code").digest
    with pytest.raises(SpecError) as err:
        make_spec("task=code")
    message = str(err.value)
    assert text.PINNED["code"] in message and found in message
    assert "expected" in message and "make install PYTHON=python3.11" in message and "task.digest" in message


def test_a_missing_corpus_is_refused_naming_the_expected_digest(monkeypatch):
    """Mutation check: letting the ImportError through in ``load`` (no CorpusRefused) makes this fail."""
    def gone():
        raise ImportError("No module named 'pydoc_data'")

    monkeypatch.setitem(text.SOURCES, "prose", text.Source(text.SOURCES["prose"].what, "PSF-2.0", gone))
    text.load.cache_clear()
    try:
        with pytest.raises(SpecError, match="corpus 'prose' is missing") as err:
            make_spec("task=prose")
    finally:
        text.load.cache_clear()
    assert text.PINNED["prose"] in str(err.value) and "Python 3.11.7" in str(err.value)


def test_a_changed_corpus_digest_changes_the_run_id(toy):
    """The digest is a task option, so it is in the spec: other text is another run and another cell.

    Mutation check: making ``digest`` a class constant instead of a field (``digest = ...`` in
    TextLM and Code, so it leaves the task's options) makes this fail."""
    pinned = make_spec("task=code")
    assert dict(pinned.tasks[0].params)["digest"] == text.PINNED["code"]
    other = toy([(KEPT, b"other text " * 40), (HELD, b"held")], name="code").digest
    moved = make_spec("task=code", f"task.digest={other}")
    assert moved.run_id != pinned.run_id and moved.config_hash != pinned.config_hash


def test_text_trains_at_the_training_length_only():
    """Fixed-length windows as the language-modelling papers; synthetic tasks keep their range.

    Mutation check: removing the fixed_length rule in suite/config/build.py makes this fail."""
    assert make_spec("task=code").train.min_len is None
    assert make_spec("task=copy").train.min_len == 4


ARCHS = sorted(p.stem for p in (CONF_DIR / "arch").glob("*.yaml"))  # every scheme, and every layer pattern
CASES = [(arch, corpus) for arch in ARCHS for corpus in ("code", "prose")]
FAST = [("alibi", "code"), ("learned", "prose"), ("path", "code")]


@pytest.mark.parametrize("arch,corpus", fast_or_exhaustive(CASES, FAST))
def test_every_scheme_trains_and_scores_on_both_corpora(arch, corpus, tmp_path):
    """Through ``suite.run``: bits per byte at every eval length, past the training length above it,
    or ``unsupported`` for both where the scheme cannot represent the length (learned positions).

    Mutation check: dropping "bits_per_byte_past_train" from ``TextLM.metrics`` (tasks/text.py) makes this fail."""
    import json

    spec = make_spec(f"+arch={arch}", f"task={corpus}", "sweep_name=lmtest", *TINY)
    payload = json.loads(execute(spec, results_dir=tmp_path, progress=False).read_text())
    rows = {(r["eval_len"], r["metric"]): r for r in payload["rows"] if r["slice"] == "all"}
    assert payload["run"]["corpora"][corpus]["digest"] == text.PINNED[corpus]
    limit = max(spec.eval_lengths) if arch != "learned" else spec.model.layers[0].position_cfg.max_positions
    for n in spec.eval_lengths:
        if n - 1 > limit:
            assert rows[(n, "bits_per_byte")]["status"] == rows[(n, "bits_per_byte_past_train")]["status"] == "unsupported"
            continue
        bpb = rows[(n, "bits_per_byte")]
        assert bpb["status"] == "ok" and bpb["headline"] == "bits_per_byte" and bpb["higher_is_better"] is False
        assert bpb["value"] == pytest.approx(rows[(n, "loss")]["value"] / math.log(2), rel=1e-6)
        assert ((n, "bits_per_byte_past_train") in rows) == (n > spec.train.seq_len)


# ---------------------------------------------------------------------------------------------
# lm-eval: posbench_code and posbench_prose


@pytest.fixture(scope="module")
def prose_run(tmp_path_factory):
    overrides = [o for o in TINY if not o.startswith(("train.steps=", "eval.n_examples=", "eval.multiples="))]
    spec = make_spec("task=prose", "sweep_name=lmtext", *overrides, "train.steps=30", "eval.n_examples=40",
                     "eval.multiples=[1,2]")
    return spec, execute(spec, results_dir=tmp_path_factory.mktemp("results"), progress=False)


@pytest.mark.parametrize("name", ["code", "prose"])
def test_lm_eval_documents_are_the_held_out_windows(name):
    """Mutation check: ``text_docs`` dropping the first byte (``example.tokens[2:]``) makes this fail."""
    from suite.lmeval import tasks as T
    from suite.lmeval.yamls import template

    assert template(name) == "_rolling_template"
    docs = T.build_docs(name, lengths=[64, 128], n_examples=3)
    task = build_task(name)
    for length in (64, 128):
        want = [text.decode_bytes(ex.tokens[1:]).decode("utf-8") for ex in task.eval_set(length, 1234, 3)]
        mine = [d for d in docs if d["length"] == length]
        assert [d["text"] for d in mine] == want and [d["n_bytes"] for d in mine] == [length - 1] * 3


def test_lm_eval_bits_per_byte_equal_the_suites_on_the_same_windows(prose_run):
    """posbench_prose through lm-eval's loglikelihood_rolling and bits_per_byte aggregation, on the
    run's own eval windows (same lengths, count and seed), equals the bits per byte the run stored.

    Mutation check: ``tok_encode`` reading the text with the word tokenizer for a byte-level run
    (``self.byte_level`` False in suite/lmeval/model.py) makes this fail; so does counting
    characters for bytes in process_results_bytes (``len(doc["text"])`` differs where the prose has
    a curly quote)."""
    import json

    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from suite.lmeval import PosBenchEvalLM, include_dir

    spec, path = prose_run
    stored = {r["eval_len"]: r["value"] for r in json.loads(path.read_text())["rows"]
              if r["metric"] == "bits_per_byte" and r["slice"] == "all"}
    manager = TaskManager(include_path=str(include_dir()), include_defaults=False,
                          metadata={"lengths": spec.eval_lengths, "n_examples": spec.eval.n_examples})
    out = lm_eval.simple_evaluate(model=PosBenchEvalLM(pretrained=str(path)), tasks=["posbench_prose"],
                                  task_manager=manager, bootstrap_iters=0)
    values = out["results"]["posbench_prose"]
    assert sorted(stored) == spec.eval_lengths
    for length in spec.eval_lengths:
        assert values[f"bits_per_byte,len={length}"] == pytest.approx(stored[length], rel=1e-5)


def test_the_board_ranks_bits_per_byte_lowest_first_with_no_effective_length():
    """Rows of task ``code`` take the headline the task declares (bits per byte) and its declared
    direction: the MRR puts the lower scheme first, and effective length (a threshold on a score
    where higher is better) does not apply to it.

    Mutation check: declaring bits_per_byte higher-is-better in suite/data/metrics.py makes this fail."""
    from suite.report import boards, ranking
    from suite.report.sections import effective_length
    from tests.test_report import _row, frame

    rows = [_row(f"{s}-{seed}", s, seed, "code", e, v + 0.1 * seed + (0.5 if e == 64 else 0.0), metric="bits_per_byte")
            for s, v in (("alibi", 2.0), ("rope", 3.0)) for seed in (0, 1) for e in (32, 64)]
    df = frame(rows)
    assert set(df.headline) == {"bits_per_byte"} and set(df.higher_is_better) == {False}
    board = boards.leaderboard(df)
    m = ranking.mrr(board)
    assert list(m.scheme) == ["alibi", "rope"] and list(m.mrr_ood) == [1.0, 0.5]
    assert effective_length.effective_length(board).empty


def _sweep(name, *overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"+sweep={name}", *overrides], return_hydra_config=True)


@pytest.mark.parametrize("name", ["lm", "lm_gpu"])
def test_the_lm_recipes_build_and_their_eval_sets_fit_the_held_out_text(name):
    """The classic six and KERPLE, FIRE and FoX (decay start) at 5 seeds on both corpora, PaTH too
    on the GPU; CPU: the tiny model at 64 bytes (the text families' own lengths,
    conf/family/), GPU: the small model at 512 bytes on the GPU recipe; both
    evaluated at 1 to 8 x, and every eval length's set of held-out windows exists (one job of each
    corpus built and its largest eval set drawn).

    Mutation check: eval.n_examples: 64 in conf/sweep/lm_gpu.yaml (the prose held-out text holds
    37 windows of 4,095 bytes) makes this fail."""
    from suite.config.build import build

    cfg = _sweep(name)
    params = cfg.hydra.sweeper.params
    zoo = ["kerple", "fire", "fox_decay"] if name == "lm" else ["kerple", "fire", "path", "fox_decay"]
    assert params["+arch"].split(",") == ["nope", "sinusoidal", "learned", "rope", "alibi", "t5", *zoo]
    corpora = params["+family"] if name == "lm" else params.task
    assert corpora.split(",") == ["code", "prose"] and len(params.seed.split(",")) == 5
    for corpus in ("code", "prose"):
        choice = f"+family={corpus}" if name == "lm" else f"task={corpus}"
        spec = build(_sweep(name, "+arch=alibi", choice, "hydra.mode=RUN").copy())
        assert spec.train.min_len is None and max(spec.eval.multiples) >= 8 and spec.sweep == name
        if name == "lm":
            assert (spec.model.name, spec.train.name, spec.train.seq_len) == ("tiny", "cpu", 64)
        else:
            assert (spec.model.name, spec.train.name, spec.train.device) == ("small", "gpu", "cuda")
            assert spec.train.seq_len >= 512
        task = spec.tasks[0].build()
        assert len(task.eval_set(max(spec.eval_lengths), spec.eval.seed, spec.eval.n_examples)) == spec.eval.n_examples


def test_the_report_says_effective_length_does_not_apply_to_bits_per_byte():
    """A board of text tasks prints why its effective-length section holds no table, and a board
    mixing text with synthetic tasks names the text tasks the table leaves out.

    Mutation check: ``effective_note`` returning '' (or naming the tasks that have a column) in
    suite/report/render.py makes this fail."""
    from suite.report import boards
    from suite.report.sections.effective_length import note as effective_note
    from suite.report.sections import effective_length
    from tests.test_report import _row, frame

    text = [_row(f"{s}-{seed}", s, seed, "code", e, v + 0.1 * seed, metric="bits_per_byte")
            for s, v in (("alibi", 2.0), ("rope", 3.0)) for seed in (0, 1) for e in (32, 64)]
    copy = [_row(f"{s}-c{seed}", s, seed, "copy", e, v, metric="token_accuracy")
            for s, v in (("alibi", 0.95), ("rope", 0.9)) for seed in (0, 1) for e in (32, 64)]
    for rows, expected in ((text, "every task of this board (code) is scored by one where lower is better"),
                           (text + copy, "Not applicable to code: scored by a metric where lower is better.")):
        board = boards.leaderboard(frame(rows))
        r = {"tasks": sorted(board.task.unique()), "effective": effective_length.effective_length(board)}
        assert expected in effective_note(r)
    board = boards.leaderboard(frame(copy))
    assert effective_note({"tasks": ["copy"], "effective": effective_length.effective_length(board)}) == ""
