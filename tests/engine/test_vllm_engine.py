"""The vLLM engine on the tiny model, for real, against the torch engine (the vLLM tier: bash scripts/test-vllm.sh).

Both engines load the same tiny model in fp32 on CPU and train the same samples with the same settings, so
after every step their weights are equal: any difference in what vLLM returns is the sync's fault.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed here (it pins its own torch and transformers): run bash scripts/test-vllm.sh")]

TOL = 1e-4


@pytest.fixture(scope="module")
def engines(tiny_model_dir):
    from vibe_rl.engine import load_engine
    from vibe_rl.schema import EngineConfig, TrainConfig

    train = TrainConfig(lr=1e-3)
    vllm_engine = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=1024,
                                           engine="vllm"), train)
    torch_engine = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=1024), train)
    yield vllm_engine, torch_engine
    vllm_engine.close()
    torch_engine.close()


def _prompt(engine, text: str) -> list[int]:
    rendered = engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                    tokenize=False)
    return engine.tokenizer.encode(rendered)


def _max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def _greedy_parity(v, t, prompts: list[list[int]]) -> float:
    from vibe_rl.engine.base import SamplingParams

    worst = 0.0
    for prompt in prompts:
        a = v.generate(prompt, SamplingParams(temperature=0, max_tokens=16))
        b = t.generate(prompt, SamplingParams(temperature=0, max_tokens=16))
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        worst = max(worst, _max_diff(a.logprobs, b.logprobs))
    return worst


def _train_both(v, t, prompt: list[int], advantage: float) -> None:
    from vibe_rl.engine.base import SamplingParams
    from vibe_rl.rl.samples import Sample

    gens = [v.generate(prompt, SamplingParams(temperature=1.0, max_tokens=8, seed=s)) for s in (1, 2)]
    samples = [Sample(input_ids=prompt + g.token_ids, loss_mask=[0] * len(prompt) + [1] * len(g.token_ids),
                      old_logprobs=[0.0] * len(prompt) + g.logprobs, advantage=a)
               for g, a in zip(gens, (advantage, -advantage), strict=True)]
    before = v.version
    mv, mt = v.train(samples), t.train(samples)
    assert v.version == t.version == before + 1 and mv["weight_sync_s"] >= 0
    assert abs(mv["loss"] - mt["loss"]) < 1e-5  # the same step on the same weights


def test_greedy_tokens_and_fp32_logprobs_match_the_torch_engine(engines):
    v, t = engines
    prompts = [_prompt(v, "Describe the word apple."), _prompt(v, "Translate 'river' into French."), [5, 9, 300]]
    worst = _greedy_parity(v, t, prompts)
    print(f"greedy max |logprob diff| vllm vs torch: {worst:.3g}")
    assert worst < TOL


def test_sampled_logprobs_are_the_sampling_distributions_and_stream(engines):
    """Temperature and top-p: each token's logprob (and its top alternatives) is `sampling_logprobs` of the
    trainer's logits at that position, and on_token sees every token in order before the result."""
    torch = pytest.importorskip("torch")
    from vibe_rl.engine.base import SamplingParams
    from vibe_rl.rl.logprobs import sampling_logprobs

    v, _ = engines
    prompt = _prompt(v, "Guess the word.")
    streamed: list[tuple[int, float]] = []
    gen = v.submit(prompt, SamplingParams(temperature=0.8, top_p=0.9, max_tokens=24, seed=7, top_logprobs=3),
                   on_token=lambda tok, lp: streamed.append((tok, lp))).result()
    assert streamed == list(zip(gen.token_ids, gen.logprobs, strict=True)) and len(gen.token_ids) > 0
    with torch.no_grad():
        logits = v.trainer.model(torch.tensor([prompt + gen.token_ids])).logits[0, len(prompt) - 1:-1]  # (n, V)
        n = logits.shape[0]
        logp = sampling_logprobs(logits, torch.full((n,), 0.8), torch.full((n,), 0.9))
    want = logp.gather(-1, torch.tensor(gen.token_ids)[:, None]).squeeze(-1).tolist()
    worst = _max_diff(gen.logprobs, want)
    print(f"sampled (T=0.8, top_p=0.9) max |logprob diff| vllm vs sampling_logprobs: {worst:.3g}")
    assert worst < TOL
    for i, top in enumerate(gen.top_logprobs):
        values, ids = logp[i].topk(3)
        assert [tid for tid, _ in top] == ids.tolist()[:len(top)]
        assert _max_diff([lp for _, lp in top], values.tolist()[:len(top)]) < TOL


def test_a_stop_string_ends_the_answer_at_the_token_that_completes_it_and_stays_in_it(engines):
    from vibe_rl.engine.base import SamplingParams

    v, _ = engines
    tok, checked = v.tokenizer, 0
    for seed in range(8):
        free = v.generate([5, 9, 300], SamplingParams(temperature=1.0, max_tokens=30, seed=seed))
        text = tok.decode(free.token_ids, skip_special_tokens=False)
        stop = text[len(text) // 2:len(text) // 2 + 2]
        if len(stop.strip()) < 2:
            continue
        cut = v.generate([5, 9, 300], SamplingParams(temperature=1.0, max_tokens=30, seed=seed, stop=[stop]))
        assert cut.finish_reason == "stop" and cut.token_ids == free.token_ids[:len(cut.token_ids)]
        assert stop in tok.decode(cut.token_ids, skip_special_tokens=False)
        assert stop not in tok.decode(cut.token_ids[:-1], skip_special_tokens=False)
        checked += 1
    assert checked >= 3


def test_a_weight_update_changes_the_logprobs_exactly_as_the_torch_engines(engines):
    v, t = engines
    prompt = _prompt(v, "Describe the word tiger.")
    from vibe_rl.engine.base import SamplingParams

    before = v.generate(prompt, SamplingParams(temperature=0, max_tokens=8)).logprobs
    _train_both(v, t, prompt, advantage=1.0)
    after_v = v.generate(prompt, SamplingParams(temperature=0, max_tokens=8))
    after_t = t.generate(prompt, SamplingParams(temperature=0, max_tokens=8))
    assert after_v.weight_version == after_t.weight_version == v.version
    assert after_v.token_ids == after_t.token_ids
    moved, worst = _max_diff(before[:1], after_t.logprobs[:1]), _max_diff(after_v.logprobs, after_t.logprobs)
    print(f"after an update: logprobs moved by {moved:.3g}; max |diff| vllm vs torch {worst:.3g}")
    assert moved > 1e-3 and worst < TOL
    assert _greedy_parity(v, t, [_prompt(v, "Describe the word apple."), [5, 9, 300]]) < TOL


def test_the_prefix_cache_is_used_and_reset_at_every_weight_change(engines):
    from vibe_rl.engine.base import SamplingParams

    v, t = engines
    long_prompt = _prompt(v, " ".join(["The village discusses and votes."] * 60))  # > two 128-token blocks
    assert len(long_prompt) > 300
    greedy = SamplingParams(temperature=0, max_tokens=4)
    v.generate(long_prompt, greedy)
    cached = v.stats["prefix_hit_tokens"]
    v.generate(long_prompt, greedy)
    assert v.stats["prefix_hit_tokens"] - cached >= 128, "the second call reused no cached block"
    resets = v.stats["prefix_cache_resets"]
    _train_both(v, t, long_prompt[:40], advantage=-1.0)
    assert v.stats["prefix_cache_resets"] == resets + 1
    cached = v.stats["prefix_hit_tokens"]
    a, b = v.generate(long_prompt, greedy), t.generate(long_prompt, greedy)
    assert v.stats["prefix_hit_tokens"] == cached, "KV of the old weights was reused after the update"
    assert a.token_ids == b.token_ids and _max_diff(a.logprobs, b.logprobs) < TOL


def test_a_failed_sync_leaves_a_usable_engine_with_the_trainers_weights(engines):
    torch = pytest.importorskip("torch")
    v, t = engines
    failed = v.stats["failed_syncs"]
    v.sync_weights([("model.embed_tokens.weight", torch.zeros(3, 3))])  # the wrong shape: vLLM refuses it
    assert v.stats["failed_syncs"] == failed + 1 and v.stats["rebuilds"] >= 1  # half-loaded: rebuilt
    assert _greedy_parity(v, t, [_prompt(v, "Describe the word apple.")]) < TOL


def test_the_checkpoint_directory_sync_of_worker_processes(engines):
    """tensor_parallel_size > 1 runs vLLM in worker processes, where weights go through a safetensors directory
    (`reload_weights(weights_path=...)`): that path, run here on the one-process engine, and the arguments a
    TP run starts vLLM with."""
    from vibe_rl.engine import vllm_setup
    from vibe_rl.schema import EngineConfig

    v, t = engines
    _train_both(v, t, _prompt(v, "Vote for a player."), advantage=1.0)
    v.in_process = False
    failed, rebuilds = v.stats["failed_syncs"], v.stats["rebuilds"]
    try:
        v.sync_weights()
    finally:
        v.in_process = True
    assert (v.stats["failed_syncs"], v.stats["rebuilds"]) == (failed, rebuilds), "the directory sync itself failed"
    assert _greedy_parity(v, t, [_prompt(v, "Describe the word apple.")]) < TOL
    tp = EngineConfig(engine="vllm", tensor_parallel_size=2, device="cuda", gpu_memory_utilization=0.4)
    args = vllm_setup.engine_args(tp, v.path, "cuda", 2048)
    assert args["tensor_parallel_size"] == 2 and args["distributed_executor_backend"] == "mp"
    assert args["gpu_memory_utilization"] == 0.4 and args["logprobs_mode"] == "processed_logprobs"
    assert vllm_setup.process_env(tp, "cuda")["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    assert vllm_setup.process_env(tp, "cuda")["VLLM_LOGGING_STREAM"] == "ext://sys.stderr"  # stdout stays the caller's


def test_save_and_load_keep_vllm_on_the_loaded_weights(engines, tmp_path):
    v, t = engines
    from vibe_rl.engine.base import SamplingParams

    prompt = _prompt(v, "Describe the word apple.")
    v.save(tmp_path / "ckpt")
    saved = v.generate(prompt, SamplingParams(temperature=0, max_tokens=8)).logprobs
    _train_both(v, t, prompt, advantage=1.0)
    v.load(tmp_path / "ckpt")
    again = v.generate(prompt, SamplingParams(temperature=0, max_tokens=8)).logprobs
    assert _max_diff(saved, again) < TOL


def test_a_frozen_vllm_engine_serves_without_a_trainer_and_refuses_to_train(engines, tiny_model_dir):
    from vibe_rl.engine import load_engine
    from vibe_rl.engine.base import SamplingParams
    from vibe_rl.errors import EngineError
    from vibe_rl.schema import EngineConfig

    v, _ = engines
    frozen = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=1024, engine="vllm"),
                         trainable=False)
    try:
        assert frozen.trainer is None and frozen.eos_ids == v.eos_ids and frozen.max_model_len == v.max_model_len
        gen = frozen.generate([5, 9, 300], SamplingParams(temperature=0, max_tokens=4))
        assert len(gen.token_ids) == 4 and gen.weight_version == 0
        with pytest.raises(EngineError, match="trainable=False"):
            frozen.train([])
    finally:
        frozen.close()


def test_tensor_parallel_2_on_cpu_serves_and_syncs_through_worker_processes(tiny_model_dir):
    """A real tensor_parallel_size 2 run on CPU (two vLLM worker processes, one core each): the torch engine's
    logprobs before and after an update, the weights going through the checkpoint directory."""
    import os

    from vibe_rl.engine import load_engine
    from vibe_rl.schema import EngineConfig, TrainConfig

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("tensor parallelism 2 on CPU needs 2 cores for its 2 workers")
    train = TrainConfig(lr=1e-3)
    v = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=1024, engine="vllm",
                                 tensor_parallel_size=2), train)
    t = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=1024), train)
    try:
        assert not v.in_process and v.args["tensor_parallel_size"] == 2
        prompts = [_prompt(v, "Describe the word apple."), [5, 9, 300]]
        assert _greedy_parity(v, t, prompts) < TOL
        _train_both(v, t, prompts[0], advantage=1.0)
        assert v.stats["failed_syncs"] == 0 and v.stats["prefix_cache_resets"] == 1
        worst = _greedy_parity(v, t, prompts)
        print(f"TP=2 after an update: max |logprob diff| vllm vs torch {worst:.3g}")
        assert worst < TOL
    finally:
        v.close()
        t.close()


def test_when_rebuilding_fails_too_every_call_says_the_engine_is_down(tiny_model_dir, tmp_path):
    torch = pytest.importorskip("torch")
    from vibe_rl.engine import load_engine
    from vibe_rl.engine.base import SamplingParams
    from vibe_rl.errors import EngineError
    from vibe_rl.schema import EngineConfig

    eng = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=256, engine="vllm"))
    try:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        eng._sync_dir = blocker  # the rebuild writes the trainer's weights below it: here it cannot
        with pytest.raises(EngineError, match="vLLM engine is down.*Restart the server"):
            eng.sync_weights([("model.embed_tokens.weight", torch.zeros(3, 3))])
        with pytest.raises(EngineError, match="vLLM engine is down"):
            eng.submit([5, 9, 300], SamplingParams(max_tokens=2))
    finally:
        eng.close()
