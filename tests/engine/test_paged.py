"""The paged generator: same tokens and logprobs as the simple loop, prefix reuse, invalidation, limits.

On CPU the paged path runs eagerly in fp32 and must agree with the simple loop to
float precision. The `gpu` tests run the same checks in bf16 with CUDA graphs.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.engine import SamplingParams, load_engine  # noqa: E402
from vibe_rl.errors import EngineError  # noqa: E402
from vibe_rl.schema import EngineConfig, TrainConfig  # noqa: E402

FOLLOW_UP = "<|im_end|>\n<|im_start|>user\nYour turn again: vote.<|im_end|>\n<|im_start|>assistant\n"


def paged(tiny_model_dir, device="cpu", **kw):
    cfg = dict(path=str(tiny_model_dir), device=device, max_model_len=512, generator="paged", block_size=4,
               prefill_chunk=7)  # small blocks and chunks: every code path runs on short prompts
    cfg.update(kw)
    return load_engine(EngineConfig(**cfg), TrainConfig(lr=1e-2), trainable=True)


@pytest.fixture(scope="module")
def engines(tiny_model_dir):
    simple = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=512, generator="simple"),
                         trainable=False)
    eng = paged(tiny_model_dir)
    yield simple, eng
    simple.close()
    eng.close()


def prompts(tok, n):
    return [tok.encode(tok.apply_chat_template([{"role": "user", "content": f"Player {i}: describe your word."}],
                                               add_generation_prompt=True, tokenize=False)) for i in range(n)]


@pytest.mark.parametrize("temperature,top_p", [(0.0, 1.0), (1.0, 1.0), (0.8, 0.9)])
def test_paged_matches_the_simple_loop(engines, temperature, top_p):
    simple, eng = engines
    ps = prompts(eng.tokenizer, 6)
    params = [SamplingParams(temperature=temperature, top_p=top_p, max_tokens=20, seed=i) for i in range(6)]
    want = [f.result() for f in [simple.submit(p, s) for p, s in zip(ps, params, strict=True)]]
    got = [f.result() for f in [eng.submit(p, s) for p, s in zip(ps, params, strict=True)]]
    for a, b in zip(want, got, strict=True):
        assert b.token_ids == a.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
        assert b.finish_reason == a.finish_reason


@pytest.mark.parametrize("top_logprobs", [0, 2])
def test_rows_that_stop_early_while_the_next_step_is_in_flight(engines, top_logprobs, caplog):
    """The step after a row's stop token was launched before that token was read: its extra token is
    dropped, its K/V write stays in the row's own blocks, and the other rows are unaffected."""
    simple, eng = engines
    ps = prompts(eng.tokenizer, 6)
    params = [SamplingParams(temperature=1.0, max_tokens=24, seed=i, stop=[stop], top_logprobs=top_logprobs)
              for i, stop in enumerate(["e", "a", "o", " ", "t", "zzz"])]
    before = eng.stats.get("wasted_decode_rows", 0)
    want = [f.result() for f in [simple.submit(p, s) for p, s in zip(ps, params, strict=True)]]
    got = [f.result() for f in [eng.submit(p, s) for p, s in zip(ps, params, strict=True)]]
    assert any(g.finish_reason == "stop" for g in want) and any(g.finish_reason == "length" for g in want)
    for a, b in zip(want, got, strict=True):
        assert (b.token_ids, b.finish_reason) == (a.token_ids, a.finish_reason)
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
    if top_logprobs == 0:  # the 'dist' mode reads each step before launching the next: nothing is wasted
        assert eng.stats["wasted_decode_rows"] > before
    i = next(i for i, g in enumerate(want) if g.finish_reason == "stop")
    alone = eng.generate(ps[i], params[i])  # the step in flight holds only rows that have ended
    assert (alone.token_ids, alone.finish_reason) == (want[i].token_ids, "stop")
    assert not [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]  # no batch failed and was retried
    # the cache the extra steps wrote into is still right for later calls
    again = eng.generate(ps[0] + got[0].token_ids, SamplingParams(max_tokens=8, seed=9))
    assert again.token_ids == simple.generate(ps[0] + got[0].token_ids, SamplingParams(max_tokens=8, seed=9)).token_ids


def test_a_row_that_fills_the_context_is_not_fed_past_its_budget(engines):
    """A row whose budget ends with the step in flight is not fed again (no wasted row), up to the
    context's last position."""
    simple, eng = engines
    ps = prompts(eng.tokenizer, 2)
    params = [SamplingParams(max_tokens=10_000, seed=3), SamplingParams(max_tokens=300, seed=5)]
    before = eng.stats.get("wasted_decode_rows", 0)
    want = [f.result() for f in [simple.submit(p, s) for p, s in zip(ps, params, strict=True)]]
    got = [f.result() for f in [eng.submit(p, s) for p, s in zip(ps, params, strict=True)]]
    assert len(got[0].token_ids) == eng.max_model_len - len(ps[0]) and got[0].finish_reason == "length"
    assert got[1].finish_reason == "length"
    assert eng.stats.get("wasted_decode_rows", 0) == before
    assert [g.token_ids for g in got] == [g.token_ids for g in want]


def test_a_follow_up_call_reuses_the_cached_prompt_and_answer(engines):
    simple, eng = engines
    tok = eng.tokenizer
    first = prompts(tok, 1)[0]
    answer = eng.generate(first, SamplingParams(max_tokens=16, seed=5))
    follow = first + answer.token_ids + tok.encode(FOLLOW_UP)
    before = eng.stats["prefix_hit_tokens"]
    got = eng.generate(follow, SamplingParams(max_tokens=16, seed=6))
    reused = eng.stats["prefix_hit_tokens"] - before
    computed = len(first) + len(answer.token_ids) - 1  # the last sampled token was never fed
    assert reused == computed // 4 * 4  # every full block of the first call
    assert got.token_ids == simple.generate(follow, SamplingParams(max_tokens=16, seed=6)).token_ids


def test_requests_joining_a_running_batch_match_running_alone(engines):
    simple, eng = engines
    ps = prompts(eng.tokenizer, 8)
    results: dict[int, list[int]] = {}

    def call(i):
        results[i] = eng.generate(ps[i], SamplingParams(max_tokens=12 + i, seed=i)).token_ids

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for i, th in enumerate(threads):
        th.start()
        if i % 3 == 0:
            threading.Event().wait(0.01)  # stagger: some arrive mid-batch
    for th in threads:
        th.join()
    for i in range(8):
        assert results[i] == simple.generate(ps[i], SamplingParams(max_tokens=12 + i, seed=i)).token_ids


def test_streaming_and_top_logprobs(engines):
    _, eng = engines
    seen: list[tuple[int, float]] = []
    gen = eng.submit(prompts(eng.tokenizer, 1)[0], SamplingParams(max_tokens=8, seed=1, top_logprobs=3),
                     on_token=lambda t, lp: seen.append((t, lp))).result()
    assert [t for t, _ in seen] == gen.token_ids
    assert len(gen.top_logprobs) == len(gen.token_ids)
    assert all(len(top) <= 3 and top == sorted(top, key=lambda x: -x[1]) for top in gen.top_logprobs)


def simple_loop(eng, prompt, sampling):
    """The simple loop on the paged engine's own (current) weights."""
    from vibe_rl.engine.generate import Request, generate_batch

    return generate_batch(eng.model, eng.tokenizer, [Request(prompt, sampling, sampling.seed)], eos_ids=eng.eos_ids,
                          pad_id=eng.pad_id, max_model_len=eng.max_model_len)[0]


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_a_weight_update_drops_the_prefix_cache_and_new_weights_are_used(tiny_model_dir, lora_rank):
    from vibe_rl.rl.samples import Sample
    from vibe_rl.schema import LoraConfig

    eng = paged(tiny_model_dir, lora=LoraConfig(rank=lora_rank, alpha=8))
    try:
        assert (eng.paged.runner._fused is None) == (lora_rank > 0)  # LoRA layers are called as they are
        p = prompts(eng.tokenizer, 1)[0]
        eng.generate(p, SamplingParams(max_tokens=8, seed=0))
        assert eng.paged.blocks.cached_blocks > 0
        ids = p + [5, 6, 7]
        for _ in range(3):
            eng.train([Sample(input_ids=ids, loss_mask=[0] * len(p) + [1, 1, 1], old_logprobs=[-3.0] * len(ids),
                              advantage=1.0)])
        assert eng.version == 3 and eng.paged.blocks.cached_blocks == 0
        before = eng.stats["prefix_hit_tokens"]
        sampling = SamplingParams(max_tokens=12, seed=0)
        got = eng.generate(p, sampling)
        assert got.weight_version == 3
        assert eng.stats["prefix_hit_tokens"] == before  # nothing from the old weights was reused
        want = simple_loop(eng, p, sampling)
        assert got.token_ids == want.token_ids
        assert max(abs(x - y) for x, y in zip(got.logprobs, want.logprobs, strict=True)) < 1e-4
    finally:
        eng.close()


def test_a_request_larger_than_the_cache_fails_alone(tiny_model_dir):
    import json

    c = json.loads((tiny_model_dir / "config.json").read_text())
    per_token = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * 4
    eng = paged(tiny_model_dir, kv_cache_gb=40 * 4 * per_token / 2**30)  # 40 blocks of 4 tokens
    try:
        assert eng.paged.blocks.num_blocks == 40
        tok = eng.tokenizer
        small = prompts(tok, 1)[0]
        huge = eng.submit(small * 8, SamplingParams(max_tokens=400))
        ok = eng.submit(small, SamplingParams(max_tokens=4, seed=0))
        with pytest.raises(EngineError, match="kv_cache_gb"):
            huge.result(timeout=60)
        assert len(ok.result(timeout=60).token_ids) >= 1
    finally:
        eng.close()


def test_auto_uses_the_simple_loop_on_cpu(tiny_model_dir):
    eng = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=128), trainable=False)
    try:
        assert eng.paged is None
    finally:
        eng.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; the CPU tests above cover the logic")
def test_gpu_paged_with_cuda_graphs_matches_rescoring_and_reuses_prefixes(tiny_model_dir):
    """bf16 with CUDA graphs: each recorded logprob is within 0.05 (mean) of a full training forward's."""
    from vibe_rl.rl.logprobs import token_logprobs

    eng = paged(tiny_model_dir, device="cuda", block_size=16, prefill_chunk=2048)
    try:
        assert eng.paged.runner.use_graphs
        tok = eng.tokenizer
        ps = prompts(tok, 20)
        gens = [f.result(timeout=120) for f in [eng.submit(p, SamplingParams(temperature=0.8, top_p=0.9,
                                                                              max_tokens=24, seed=i))
                                                 for i, p in enumerate(ps)]]
        for p, g in zip(ps, gens, strict=True):
            with torch.no_grad():
                logits = eng.model(torch.tensor([p + g.token_ids], device="cuda")).logits[0, len(p) - 1:-1]
            n = len(g.token_ids)
            ref = token_logprobs(logits, torch.tensor(g.token_ids, device="cuda"), torch.full((n,), 0.8, device="cuda"),
                                 torch.full((n,), 0.9, device="cuda"))
            assert (ref.cpu() - torch.tensor(g.logprobs)).abs().mean() < 0.05
        follow = ps[0] + gens[0].token_ids + tok.encode(FOLLOW_UP)
        before = eng.stats["prefix_hit_tokens"]
        eng.generate(follow, SamplingParams(max_tokens=8, seed=1))
        assert eng.stats["prefix_hit_tokens"] - before >= len(ps[0]) // 16 * 16
        assert len(eng.paged.runner._graphs) >= 1
    finally:
        eng.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; the CPU tests above cover the logic")
def test_gpu_two_engines_in_one_process_both_keep_their_cuda_graphs(tiny_model_dir):
    """A server holds its trainable engine and a frozen static-model copy: captures must not break each other."""
    a, b = paged(tiny_model_dir, device="cuda", block_size=16), paged(tiny_model_dir, device="cuda", block_size=16)
    try:
        ps = prompts(a.tokenizer, 24)
        futures = [(a if i % 2 else b).submit(p, SamplingParams(max_tokens=40 + i, seed=i)) for i, p in enumerate(ps)]
        gens = [f.result(timeout=180) for f in futures]
        assert all(len(g.token_ids) >= 1 for g in gens)
        assert a.paged.runner.use_graphs and b.paged.runner.use_graphs
        assert a.paged.runner._graphs and b.paged.runner._graphs
    finally:
        a.close()
        b.close()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; the CPU tests above cover the logic")
def test_gpu_requests_joining_mid_decode_keep_exact_logprobs(tiny_model_dir):
    """fp32 with CUDA graphs: requests join one by one while others decode, so the batch grows through
    new graph buckets (each captured while a step is in flight, whose sampled ids the next step reads
    on the device). Every recorded logprob equals a full forward's within float rounding."""
    eng = paged(tiny_model_dir, device="cuda", dtype="float32", block_size=16, prefill_chunk=2048)
    try:
        ps = prompts(eng.tokenizer, 8)

        def set_at_third_token(event: threading.Event):
            tokens: list[int] = []

            def on_token(token: int, logprob: float) -> None:
                tokens.append(token)
                if len(tokens) == 3:
                    event.set()
            return on_token

        futures = []
        for i, p in enumerate(ps):
            third = threading.Event()  # the next request joins at this one's third token (or its end)
            futures.append(eng.submit(p, SamplingParams(max_tokens=24, seed=i), on_token=set_at_third_token(third)))
            futures[-1].add_done_callback(lambda _, ev=third: ev.set())
            assert third.wait(timeout=120), f"request {i} produced no tokens"
        gens = [f.result(timeout=120) for f in futures]
        assert eng.stats["joined_requests"] >= 1 and len(eng.paged.runner._graphs) >= 3, eng.stats
        for p, g in zip(ps, gens, strict=True):
            with torch.no_grad():
                logits = eng.model(torch.tensor([p + g.token_ids], device="cuda")).logits[0, len(p) - 1:-1].float()
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(g.token_ids, device="cuda")[:, None])[:, 0]
            assert (ref.cpu() - torch.tensor(g.logprobs)).abs().max() < 1e-3, (p, g.token_ids)
    finally:
        eng.close()


def test_calls_sent_at_once_with_a_common_prefix_compute_it_once(engines):
    """Four players vote on the same record at once: the later three wait for the first one's prefill of the
    shared prefix and reuse its blocks (with prefill chunks of 7 tokens, all four arrive while it runs)."""
    simple, eng = engines
    tok = eng.tokenizer
    record = "Round 1: player_1 said it is sweet. player_2 said it is red. player_3 said it grows on trees. " * 2
    ps = [tok.encode(tok.apply_chat_template([{"role": "user", "content": f"{record}You are player_{i}. Vote."}],
                                             add_generation_prompt=True, tokenize=False)) for i in range(4)]
    common = next(k for k, column in enumerate(zip(*ps, strict=False)) if len(set(column)) > 1)
    assert common >= 40
    before = eng.stats["prefix_hit_tokens"]
    futures = [eng.submit(p, SamplingParams(max_tokens=6, seed=i)) for i, p in enumerate(ps)]
    got = [f.result().token_ids for f in futures]
    assert eng.stats["prefix_hit_tokens"] - before >= 3 * (common // 4 * 4)  # every full shared block, three times
    assert got == [simple.generate(p, SamplingParams(max_tokens=6, seed=i)).token_ids for i, p in enumerate(ps)]
