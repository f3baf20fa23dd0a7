"""Batched generation on the tiny model: fidelity of logprobs, batching, stops, clear errors."""

from __future__ import annotations

import importlib.util
import threading

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.engine import SamplingParams, load_engine  # noqa: E402
from vibe_rl.errors import ConfigError, MissingExtraError, ModelLoadError, SequenceTooLongError  # noqa: E402
from vibe_rl.rl.logprobs import token_logprobs  # noqa: E402
from vibe_rl.schema import EngineConfig  # noqa: E402


def rescore(engine, prompt, gen, temperature, top_p):
    """Score recorded ids with one plain forward pass (no cache, no padding)."""
    full = torch.tensor([prompt + gen.token_ids])
    with torch.no_grad():
        logits = engine.model(full).logits[0, len(prompt) - 1:-1]  # (n, V)
    n = len(gen.token_ids)
    return token_logprobs(logits, torch.tensor(gen.token_ids), torch.full((n,), temperature),
                          torch.full((n,), top_p))


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8), (0.5, 0.9), (0.0, 1.0)])
def test_logprobs_match_rescoring(engine, chat_prompt, temperature, top_p):
    # Several requests of different lengths in one batch exercise padding and row dropping.
    params = [SamplingParams(temperature=temperature, top_p=top_p, max_tokens=8 + 6 * i, seed=i) for i in range(4)]
    prompts = [chat_prompt[i:] for i in range(4)]
    futures = [engine.submit(p, s) for p, s in zip(prompts, params, strict=True)]
    for prompt, fut in zip(prompts, futures, strict=True):
        gen = fut.result(timeout=120)
        assert len(gen.token_ids) == len(gen.logprobs) > 0
        expected = rescore(engine, prompt, gen, temperature, top_p)
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4), (gen.logprobs, expected)
        assert all(lp <= 0 for lp in gen.logprobs)


def test_top_p_renormalises_over_the_nucleus(engine, chat_prompt):
    full = engine.generate(chat_prompt, SamplingParams(temperature=1.0, top_p=1.0, max_tokens=6, seed=3))
    nucleus = engine.generate(chat_prompt, SamplingParams(temperature=1.0, top_p=0.5, max_tokens=6, seed=3))
    # renormalising over fewer tokens raises each sampled token's probability
    assert nucleus.logprobs[0] > full.logprobs[0] - 1e-6 or nucleus.token_ids[0] != full.token_ids[0]
    assert sum(nucleus.logprobs) / len(nucleus.logprobs) > sum(full.logprobs) / len(full.logprobs)


def test_seeded_request_gives_the_same_result_alone_or_in_a_batch(engine, chat_prompt):
    sp = SamplingParams(temperature=0.9, max_tokens=12, seed=42)
    alone = engine.generate(chat_prompt, sp)
    others = [engine.submit(chat_prompt[i:], SamplingParams(max_tokens=20, seed=100 + i)) for i in range(1, 6)]
    batched = engine.submit(chat_prompt, sp).result(timeout=120)
    [f.result(timeout=120) for f in others]
    assert batched.token_ids == alone.token_ids
    assert max(abs(a - b) for a, b in zip(batched.logprobs, alone.logprobs, strict=True)) < 1e-4


def test_concurrent_requests_all_complete_and_honour_max_tokens(engine, chat_prompt):
    results: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            results[i] = engine.generate(chat_prompt, SamplingParams(max_tokens=1 + i % 7, seed=i))
        except Exception as exc:  # surfaced by the assertion below
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert sorted(results) == list(range(24))
    assert not [g for g in results.values() if isinstance(g, Exception)], results
    for i, gen in results.items():
        assert len(gen.token_ids) <= 1 + i % 7
        if gen.finish_reason == "length":
            assert len(gen.token_ids) == 1 + i % 7
        else:
            assert gen.token_ids[-1] in engine.eos_ids


def test_stop_strings_end_generation(engine, chat_prompt):
    tok = engine.tokenizer
    free = engine.generate(chat_prompt, SamplingParams(temperature=0.0, max_tokens=30))
    text = tok.decode(free.token_ids)
    assert len(text) > 6
    stop = text[3:6]  # a string the greedy continuation is known to produce
    gen = engine.generate(chat_prompt, SamplingParams(temperature=0.0, max_tokens=30, stop=[stop]))
    out = tok.decode(gen.token_ids)
    assert gen.finish_reason == "stop"
    assert stop in out and stop not in tok.decode(gen.token_ids[:-1])
    assert free.token_ids[:len(gen.token_ids)] == gen.token_ids


def test_response_is_capped_by_max_model_len(tiny_model_dir, chat_prompt):
    eng = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=len(chat_prompt) + 3),
                      trainable=False)
    try:
        gen = eng.generate(chat_prompt, SamplingParams(temperature=1.0, max_tokens=50, seed=1))
        assert len(gen.token_ids) <= 3
        with pytest.raises(SequenceTooLongError, match="max_model_len"):
            eng.submit(chat_prompt + [5, 6, 7], SamplingParams())
    finally:
        eng.close()


def test_missing_path_names_the_fix(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist.*tiny"):
        load_engine(EngineConfig(path=str(tmp_path / "nope")))
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_engine(EngineConfig(path=str(tmp_path)))


def test_not_a_causal_lm_names_the_fix(tmp_path):
    transformers = pytest.importorskip("transformers")
    transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="not a causal language model"):
        load_engine(EngineConfig(path=str(tmp_path)))


def test_bad_requests_are_rejected(engine):
    with pytest.raises(ConfigError, match="empty"):
        engine.submit([], SamplingParams())
    with pytest.raises(ConfigError, match="outside the vocabulary"):
        engine.submit([10**7], SamplingParams())
    with pytest.raises(ConfigError, match="top_p"):
        SamplingParams(top_p=0.0)


def test_cluster_engines_say_what_to_do():
    for name in ("vllm", "verl"):
        if name == "vllm" and importlib.util.find_spec("vllm") is not None:
            continue  # the vLLM tier (bash scripts/test-vllm.sh) loads it for real
        with pytest.raises((MissingExtraError, ConfigError), match=rf"vibe-rl\[{name}\]|not wired"):
            load_engine(EngineConfig(engine=name))


def test_importing_the_engine_base_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, vibe_rl.engine.base, vibe_rl.engine, vibe_rl.rl.samples; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_gumbel_sampler_draws_from_the_given_distribution():
    from vibe_rl.engine.sampler import gumbel_sample

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -4.0, float("-inf")]])
    p = logits.softmax(-1)[0]
    n = 100_000
    for seeds, steps in [(torch.arange(n), torch.zeros(n, dtype=torch.long)),
                         (torch.full((n,), 7), torch.arange(n))]:
        tokens = gumbel_sample(logits.log_softmax(-1).expand(n, -1), seeds, steps)
        freq = torch.bincount(tokens, minlength=6).double() / n
        z = (freq - p) / (p * (1 - p) / n).sqrt().clamp(min=1e-12)
        assert z.abs().max() < 4.5, z
        assert freq[5] == 0  # a token outside the nucleus (-inf) is never drawn


def test_max_batch_size_splits_a_burst_into_several_batches(tiny_model_dir, chat_prompt):
    eng = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_batch_size=3), trainable=False)
    try:
        futures = [eng.submit(chat_prompt, SamplingParams(max_tokens=4, seed=i)) for i in range(7)]
        assert all(len(f.result(timeout=120).token_ids) <= 4 for f in futures)
        assert eng.stats["requests"] == 7 and eng.stats["largest_batch"] <= 3
    finally:
        eng.close()
    with pytest.raises(Exception, match="closed"):
        eng.submit(chat_prompt, SamplingParams())


def test_a_burst_of_requests_runs_as_one_batch(engine, chat_prompt):
    before = dict(engine.stats)
    futures = [engine.submit(chat_prompt, SamplingParams(max_tokens=3, seed=i)) for i in range(10)]
    [f.result(timeout=120) for f in futures]
    assert engine.stats["requests"] - before["requests"] == 10
    assert engine.stats["batches"] - before["batches"] <= 3  # submitted together, batched (nearly) together


def test_requests_join_a_running_batch_and_match_running_alone(engine, chat_prompt):
    from vibe_rl.engine.generate import Request, generate_batch

    def run(first, poll=None):
        return generate_batch(engine.model, engine.tokenizer, first, eos_ids=engine.eos_ids, pad_id=engine.pad_id,
                              max_model_len=engine.max_model_len, poll=poll)

    specs = [(chat_prompt, 9, 1), (chat_prompt, 5, 10), (chat_prompt[3:], 5, 11), (chat_prompt[:-2], 6, 12),
             (chat_prompt[1:], 7, 13)]
    reqs = [Request(p, SamplingParams(temperature=0.9, top_p=0.95, max_tokens=m, seed=s), s) for p, m, s in specs]
    arrivals = [[], reqs[1:3], [], [reqs[3]], [reqs[4]]]  # joiners arrive at different decode steps
    offered = []

    def poll(free):
        offered.append(free)
        return arrivals.pop(0) if arrivals else []

    joined = run([reqs[0]], poll)
    assert len(joined) == 5 and all(r.future.done() for r in reqs)
    for r, gen in zip(reqs, joined, strict=True):
        alone = run([Request(r.prompt_ids, r.sampling, r.seed)])[0]
        assert gen.token_ids == alone.token_ids and gen.finish_reason == alone.finish_reason
        assert max(abs(a - b) for a, b in zip(gen.logprobs, alone.logprobs, strict=True)) < 1e-4
        assert r.future.result() == gen
    assert offered[0] == 63  # default max_batch_size 64, one row running


def test_a_short_request_returns_before_a_long_one_in_the_same_batch(engine, chat_prompt):
    order = []
    long = engine.submit(chat_prompt, SamplingParams(temperature=0.0, max_tokens=200))
    long.add_done_callback(lambda _: order.append("long"))
    short = engine.submit(chat_prompt, SamplingParams(temperature=0.0, max_tokens=2))
    short.add_done_callback(lambda _: order.append("short"))
    assert len(short.result(timeout=120).token_ids) == 2
    assert long.result(timeout=120).finish_reason == "length"
    assert order == ["short", "long"]  # each future resolves when its row finishes, not when the batch ends
