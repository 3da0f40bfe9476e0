"""Natural text (tasks/text.py): the same target bytes at every length, bits per byte on them, and
the code and prose tasks through ``suite.run`` and lm-eval (the corpora: tests/test_corpora.py).

Each test names the one-line mutation it was watched failing on."""
import math

import numpy as np
import pytest
import torch

import tasks.corpora as corpora
import tasks.text as text
from suite.config.build import SpecError
from suite.evaluation.evaluate import score_examples
from suite.config.compose import CONF_DIR
from suite.run import execute
from tasks import build_task
from tasks.base import BOS_ID, VOCAB_SIZE
from tests.conftest import fast_or_exhaustive, make_spec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TINY = ["task.target=8", "model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "train.steps=3",
        "train.batch_size=4", "train.seq_len=16", "eval.n_examples=3", "eval.batch_size=3", "eval.multiples=[1,2,4]",
        "logger=none"]
HELD, KEPT = "c", "a"  # held out and kept by tasks.corpora.held_out (tests/test_corpora.py)


@pytest.fixture
def toy(monkeypatch):
    """A corpus ``toy`` of the given documents in place of a real one, its targets kept after 4
    bytes of context (not ``CONTEXT_MAX``); returns a setter."""
    monkeypatch.setattr(text, "CONTEXT_MAX", 4)

    def use(docs, name="toy"):
        monkeypatch.setitem(corpora.SOURCES, name, corpora.Source("a toy", "none", lambda: list(docs), "make toy"))
        corpora.load.cache_clear()
        return corpora.load(name)
    yield use
    corpora.load.cache_clear()


class Toy(text.TextLM):
    name = "toy"  # not in the registry: a test's own task over the toy corpus
    corpus = "toy"


class RepeatModel(torch.nn.Module):
    """Logits 0 for every token but log(3) for the input token: p(next = this) = 3 / (V + 2),
    p(any other) = 1 / (V + 2)."""

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, VOCAB_SIZE)
        logits.scatter_(2, tokens[..., None], math.log(3.0))
        return logits


def test_bits_per_byte_is_the_hand_computation_on_the_target_bytes(toy):
    """Held-out document ``abcbb``: its stream is ``abcbb\n``; with 4 bytes of context kept and a
    target of 2 bytes, the one target slot is ``b\n`` after ``abcb``. Under ``RepeatModel`` the
    target's ``b`` after ``b`` has probability 3/(V+2) and ``\n`` after ``b`` 1/(V+2); at length 4
    the window is ``<s> c b b \n`` less its first context byte.

    Mutation checks: scoring every byte of the window (``answer_spans=[(1, len(tokens))]`` in
    tasks/text.py target_example) makes this fail; so does dropping ``/ LN2`` (nats, not bits)."""
    toy([(KEPT, b"xyzxyzxyz"), (HELD, b"abcbb")])
    task = Toy(digest=corpora.load("toy").digest, target=2)
    (ex,) = task.eval_set(5, 0, 1)
    assert ex.tokens == [BOS_ID, *text.encode_bytes(b"cbb\n")] and ex.answer_spans == [(3, 5)]
    tally = score_examples(RepeatModel(), task, [ex], 1, torch.device("cpu"), torch.autocast("cpu", enabled=False),
                           train_len=3)
    rows = {m: v for m, v, _, s in tally.rows() if s == "all"}
    v = VOCAB_SIZE + 2
    hand = (math.log2(v / 3) + math.log2(v)) / 2
    assert rows["bits_per_byte"] == pytest.approx(hand, rel=1e-6)
    assert rows["loss"] == pytest.approx(hand * math.log(2), rel=1e-6)  # the suite's own loss, in nats
    profile = {s: value for m, value, _, s in tally.rows() if m == "bits_per_byte_at"}
    assert profile["position=4-4"] == pytest.approx(math.log2(v)) and len(profile) == 4  # positions 1..4


def test_no_held_out_byte_reaches_training(toy):
    """The training document is all ``T``, the held-out one all ``H``: no training window, at any
    length or draw, holds an ``H``, and every evaluation example is held-out text only.

    Mutation check: building the training stream from every document (``stream(docs)`` for
    ``stream(kept)`` in Corpus.of, tasks/corpora.py) makes this fail."""
    corpus = toy([(KEPT, b"T" * 300), (HELD, b"H" * 300)])
    task = Toy(digest=corpus.digest, target=4)
    rng = np.random.default_rng(0)
    seen = set()
    for length in (2, 17, 64, 250):
        for _ in range(200):
            seen |= set(text.decode_bytes(task.generate(rng, length).tokens))
    assert seen == {ord("T"), ord("\n")}
    for length in (6, 9):
        got = {b for ex in task.eval_set(length, 1234, 4) for b in text.decode_bytes(ex.tokens)}
        assert got <= {ord("H"), ord("\n")}


@pytest.mark.parametrize("name", ["code", "prose"])
def test_every_length_scores_the_same_target_bytes_with_a_growing_context(name):
    """The targets are byte-identical at every eval length, never overlap, end the window, and are
    readable text with their context; the context before them grows with the length (by up to 3
    bytes less, to start on a character boundary).

    Mutation check: drawing the target slots with the length in the seed
    (``default_rng([seed, target, length])`` in tasks/text.py target_ends) makes this fail."""
    task = build_task(name)
    n, t = 40, task.target
    sets = {length: task.eval_set(length, 1234, n) for length in (64, 128, 512, 4096)}
    targets = {length: [ex.tokens[ex.answer_spans[0][0]:] for ex in exs] for length, exs in sets.items()}
    assert all(targets[length] == targets[64] for length in targets)
    for length, exs in sets.items():
        for ex in exs:
            (start, end), = ex.answer_spans
            assert end == len(ex.tokens) <= length and end - start == t and length - 4 <= len(ex.tokens)
            text.decode_bytes(ex.tokens[1:start]).decode("utf-8")  # raises on a split character
            text.decode_bytes(ex.tokens[start:]).decode("utf-8")
    ends = [ex.meta["end"] for ex in sets[64]]
    assert ends == sorted(ends) and all(b - a >= t for a, b in zip(ends, ends[1:]))
    contexts = [np.mean([ex.meta["context"] for ex in sets[length]]) for length in (64, 128, 512, 4096)]
    assert contexts == sorted(contexts) and contexts[-1] > 4000
    assert [e.tokens for e in task.eval_set(128, 1234, n)] == [e.tokens for e in sets[128]]


def test_a_length_past_the_kept_context_is_refused_naming_the_longest():
    """Mutation check: dropping the longest-length check in ``eval_examples`` makes this fail (a
    window would start before the held-out stream)."""
    task = build_task("code")
    longest = text.CONTEXT_MAX + task.target + 1
    assert len(task.eval_set(longest, 1234, 2)[0].tokens) >= longest - 3
    with pytest.raises(ValueError, match=f"at most {longest}"):
        task.eval_set(longest + 1, 1234, 2)


def test_a_changed_corpus_digest_changes_the_run_id(toy, monkeypatch):
    """The digest is a task option, so it is in the spec: other text is another run and another cell.

    Mutation check: making ``digest`` a class constant instead of a field (``digest = ...`` in
    TextLM and Code, so it leaves the task's options) makes this fail."""
    monkeypatch.setattr(text, "CONTEXT_MAX", 8192)  # the pinned corpus, with its own context
    pinned = make_spec("task=code", "train.seq_len=64", "eval.multiples=[1,2,4]")
    assert dict(pinned.tasks[0].params)["digest"] == corpora.PINNED["code"]
    other = toy([(KEPT, b"other text " * 400), (HELD, b"held text " * 400)], name="code").digest
    monkeypatch.setattr(text, "CONTEXT_MAX", 600)  # the toy's held-out text keeps 600 bytes before its targets
    moved = make_spec("task=code", f"task.digest={other}", "train.seq_len=64", "eval.multiples=[1,2,4]")
    assert moved.run_id != pinned.run_id and moved.config_hash != pinned.config_hash


def test_text_trains_at_the_training_length_only():
    """Fixed-length windows as the language-modelling papers; synthetic tasks keep their range.

    Mutation check: removing the fixed_length rule in suite/config/build.py makes this fail."""
    assert make_spec("task=code").train.min_len is None
    assert make_spec("task=copy").train.min_len == 4


ARCHS = sorted(p.stem for p in (CONF_DIR / "arch").glob("*.yaml"))  # every scheme, and every layer pattern
CASES = [(arch, corpus) for arch in ARCHS for corpus in ("code", "prose")]
FAST = [("alibi", "code"), ("learned", "prose")]  # one bias scheme on code, the table that stops at L on prose


@pytest.mark.parametrize("arch,corpus", fast_or_exhaustive(CASES, FAST))
def test_every_scheme_trains_and_scores_on_both_corpora(arch, corpus, tmp_path):
    """Through ``suite.run``: bits per byte on the targets at every eval length, with the loss by
    position over the whole window, or ``unsupported`` where the scheme cannot represent the length
    (learned positions).

    Mutation check: dropping "bits_per_byte_at" from ``TextLM.metrics`` (tasks/text.py) makes this fail."""
    import json

    spec = make_spec(f"+arch={arch}", f"task={corpus}", "sweep_name=lmtest", *TINY)
    payload = json.loads(execute(spec, results_dir=tmp_path, progress=False).read_text())
    rows = {(r["eval_len"], r["metric"]): r for r in payload["rows"] if r["slice"] == "all"}
    assert payload["run"]["corpora"][corpus]["digest"] == corpora.PINNED[corpus]
    limit = max(spec.eval_lengths) if arch != "learned" else spec.model.layers[0].position_cfg.max_positions
    for n in spec.eval_lengths:
        if n - 1 > limit:
            assert rows[(n, "bits_per_byte")]["status"] == "unsupported"
            continue
        bpb = rows[(n, "bits_per_byte")]
        assert bpb["status"] == "ok" and bpb["headline"] == "bits_per_byte" and bpb["higher_is_better"] is False
        assert bpb["value"] == pytest.approx(rows[(n, "loss")]["value"] / math.log(2), rel=1e-6)
        bins = [r for r in payload["rows"] if r["metric"] == "bits_per_byte_at" and r["eval_len"] == n]
        assert bins and all(r["slice"].startswith("position=") and r["status"] == "ok" for r in bins)


# ---------------------------------------------------------------------------------------------
# lm-eval: posbench_code and posbench_prose


@pytest.fixture(scope="module")
def prose_run(tmp_path_factory):
    overrides = [o for o in TINY if not o.startswith(("train.steps=", "eval.n_examples=", "eval.multiples="))]
    spec = make_spec("task=prose", "sweep_name=lmtext", *overrides, "train.steps=30", "eval.n_examples=40",
                     "eval.multiples=[1,2]")
    return spec, execute(spec, results_dir=tmp_path_factory.mktemp("results"), progress=False)


@pytest.mark.parametrize("name", ["code", "prose"])
def test_lm_eval_documents_are_the_suites_contexts_and_targets(name):
    """Mutation check: ``text_docs`` dropping the first context byte (``example.tokens[2:start]``) makes this fail."""
    from suite.lmeval import tasks as T
    from suite.lmeval.yamls import template

    assert template(name) == "_text_template"
    docs = T.build_docs(name, lengths=[64, 128], n_examples=3)
    task = build_task(name)
    for length in (64, 128):
        exs = task.eval_set(length, 1234, 3)
        mine = [d for d in docs if d["length"] == length]
        assert [d["context"] + d["target"] for d in mine] == [text.decode_bytes(ex.tokens[1:]).decode("utf-8") for ex in exs]
        assert [d["n_bytes"] for d in mine] == [task.target] * 3 and len({d["target"] for d in mine}) == 3


def test_lm_eval_bits_per_byte_equal_the_suites_on_the_same_windows(prose_run):
    """posbench_prose through lm-eval's loglikelihood of each target given its context and the
    bits_per_byte aggregation, on the run's own eval examples (same lengths, count and seed), equals
    the bits per byte the run stored.

    Mutation check: ``tok_encode`` reading the text with the word tokenizer for a byte-level run
    (``self.byte_level`` False in suite/lmeval/model.py) makes this fail; so does ``_encode_pair``
    deferring to lm-eval's for a byte-level run (it moves a context's trailing spaces into the
    target: 8.60 bits per byte against the suite's 8.22 on this run); so does counting
    characters for bytes in text_docs (``len(target)`` of the decoded text differs where the prose has
    a curly quote)."""
    import json

    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from suite.lmeval import PosBenchEvalLM, include_dir

    spec, path = prose_run
    stored = {r["eval_len"]: r["value"] for r in json.loads(path.read_text())["rows"]
              if r["metric"] == "bits_per_byte" and r["slice"] == "all"}
    manager = TaskManager(include_path=str(include_dir()), include_defaults=False,
                          metadata={"lengths": spec.eval_lengths, "n_examples": spec.eval.n_examples,
                                    "params": {"prose": {"target": dict(spec.tasks[0].params)["target"]}}})
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

    Mutation check: eval.n_examples: 200000 in conf/sweep/lm_gpu.yaml (the held-out code holds about
    100,000 target slots of 16 bytes, fewer of 256) makes this fail."""
    from suite.config.build import build

    cfg = _sweep(name)
    params = cfg.hydra.sweeper.params
    zoo = ["kerple", "fire", "fox_decay"] if name == "lm" else ["kerple", "fire", "path", "fox_decay"]
    assert params["+arch"].split(",") == ["nope", "sinusoidal", "learned", "rope", "alibi", "t5", *zoo]
    families = params["+family"] if name == "lm" else params.task
    assert families.split(",") == ["code", "prose"] and len(params.seed.split(",")) == 5
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


@pytest.mark.parametrize("target", [1, 3, 16])
def test_target_spans_are_the_slots_on_character_boundaries_read_byte_by_byte(target):
    """``target_ends`` (vectorized) against its definition written byte by byte: the consecutive
    slots after CONTEXT_MAX bytes whose both ends start a UTF-8 character (the text's end counts),
    ``n`` of them drawn by the seed alone, in stream order; two-, three- and four-byte characters."""
    raw = ("añb€c\U0001d11ed" * 2000).encode()
    data = np.frombuffer(raw, dtype=np.uint8)  # ends in "d": with target 1 the last slot ends the text

    def boundary(i):
        return i >= len(data) or (int(data[i]) & 0xC0) != 0x80

    slots = [e for e in range(text.CONTEXT_MAX + target, len(data) + 1, target) if boundary(e - target) and boundary(e)]
    assert (slots[-1] == len(data)) == (target == 1)
    assert 0 < len(slots) < (len(data) - text.CONTEXT_MAX) // target  # some slots fall mid-character
    chosen = np.sort(np.random.default_rng([7, target, text.TARGET_STREAM]).choice(len(slots), size=40, replace=False))
    ends = text.target_ends(data, target, seed=7, n=40)
    assert ends == [slots[i] for i in chosen] and all(type(e) is int for e in ends)
    assert text.target_ends(data, target, seed=7, n=len(slots)) == slots
