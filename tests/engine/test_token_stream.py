"""The engine interface's streaming callback and top_logprobs (implemented by every engine)."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.engine import SamplingParams  # noqa: E402
from vibe_rl.errors import ConfigError  # noqa: E402


def test_on_token_sees_every_token_in_order_before_the_future_resolves(engine, chat_prompt):
    seen: list[tuple[int, float]] = []
    done_when_called: list[bool] = []
    holder: dict = {}

    def on_token(token_id: int, logprob: float) -> None:
        seen.append((token_id, logprob))
        done_when_called.append(holder["future"].done() if "future" in holder else False)

    # other requests in the same batch must not disturb this one's stream
    others = [engine.submit(chat_prompt[i:], SamplingParams(max_tokens=5, seed=i)) for i in range(1, 4)]
    holder["future"] = fut = engine.submit(chat_prompt, SamplingParams(max_tokens=12, seed=7), on_token=on_token)
    gen = fut.result(timeout=120)
    [f.result(timeout=120) for f in others]
    assert [t for t, _ in seen] == gen.token_ids
    assert [lp for _, lp in seen] == gen.logprobs
    assert not any(done_when_called)
    assert gen.top_logprobs == []  # not asked for


def test_a_failing_callback_does_not_break_generation(engine, chat_prompt):
    calls = []

    def bad(token_id: int, logprob: float) -> None:
        calls.append(token_id)
        raise RuntimeError("consumer went away")

    gen = engine.submit(chat_prompt, SamplingParams(max_tokens=6, seed=1), on_token=bad).result(timeout=120)
    assert len(calls) == 1 and len(gen.token_ids) >= 1


def test_top_logprobs_list_the_most_likely_tokens_of_the_sampling_distribution(engine, chat_prompt):
    plain = engine.generate(chat_prompt, SamplingParams(temperature=0.0, max_tokens=6))
    gen = engine.generate(chat_prompt, SamplingParams(temperature=0.0, max_tokens=6, top_logprobs=3))
    assert gen.token_ids == plain.token_ids  # asking for alternatives does not change sampling
    assert len(gen.top_logprobs) == len(gen.token_ids)
    for token, logprob, top in zip(gen.token_ids, gen.logprobs, gen.top_logprobs, strict=True):
        assert len(top) == 3
        assert [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
        assert top[0][0] == token and abs(top[0][1] - logprob) < 1e-5  # greedy picks the most likely


def test_top_logprobs_leave_out_tokens_outside_the_nucleus(engine, chat_prompt):
    gen = engine.generate(chat_prompt, SamplingParams(temperature=1.0, top_p=1e-6, max_tokens=3, top_logprobs=5,
                                                      seed=2))
    assert all(len(top) == 1 for top in gen.top_logprobs)  # a nucleus of one token


def test_top_logprobs_are_bounded():
    with pytest.raises(ConfigError, match="top_logprobs"):
        SamplingParams(top_logprobs=21)


def test_callback_runs_on_the_engine_thread(engine, chat_prompt):
    threads = set()
    engine.submit(chat_prompt, SamplingParams(max_tokens=3, seed=3),
                  on_token=lambda t, lp: threads.add(threading.current_thread().name)).result(timeout=120)
    assert threads == {"vibe-rl-engine"}
