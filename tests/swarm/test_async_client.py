"""AsyncSwarmClient against a real server on loopback, with the openai SDK's AsyncOpenAI: episodes end, abort on
an exception, a cancellation or a missing end, and a begin cancelled by asyncio (at any moment, many times)
never leaves an open episode on the server."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from vibe_rl.errors import SwarmError
from vibe_rl.swarm import AsyncSwarmClient, NotAnEpisodeError, SwarmClient, SwarmHTTPError, Task


def running(url: str) -> int:
    with SwarmClient(url) as swarm:
        return swarm.status().running_count


def test_an_async_episode_calls_the_model_and_ends(shared_server):
    """One train episode (one call through AsyncOpenAI), one eval episode, and a repeated end (already_ended)."""
    async def main() -> tuple:
        async with AsyncSwarmClient(shared_server.url) as swarm:
            assert (await swarm.status()).state in ("ROLLING", "WEIGHT_SYNCING")
            async with swarm.episode({"task_id": "async-1", "main_query": "hi"}) as ep:
                assert ep.base_url.startswith(shared_server.url) and ep.api_key and ep.model
                assert isinstance(ep.openai(), openai.AsyncOpenAI)
                reply = await ep.openai().chat.completions.create(
                    model=ep.model, user="solver:0", messages=[{"role": "user", "content": "hi"}])
                assert isinstance(reply.choices[0].message.content, str)
                done = await ep.end(0.25, {"n": 1})
            async with swarm.episode(Task(task_id="async-eval"), eval=True) as held_out:
                await held_out.openai().chat.completions.create(
                    model=held_out.model, messages=[{"role": "user", "content": "hi"}])
                evaluated = await held_out.end(1.0)
            again = await swarm.end_episode(ep.task, ep.uuid, {"reward": 0.25, "metadata": {"n": 1}})
            return done, evaluated, again

    done, evaluated, again = asyncio.run(main())
    assert done.llm_calls == 1 and not done.already_ended and done.trainable_turns == 1
    assert evaluated.llm_calls == 1 and not evaluated.already_ended
    assert again["already_ended"] is True
    assert running(shared_server.url) == 0


def test_an_exception_a_cancellation_or_no_end_aborts_the_episode(shared_server):
    async def main() -> None:
        async with AsyncSwarmClient(shared_server.url) as swarm:
            with pytest.raises(ValueError, match="scoring failed"):
                async with swarm.episode(Task(task_id="async-raise")) as ep:
                    raise ValueError("scoring failed")
            with pytest.raises(SwarmHTTPError) as gone:  # aborted: its end is refused
                await swarm.end_episode(ep.task, ep.uuid, {"reward": 0.0})
            assert gone.value.status == 410

            async def think_forever() -> None:
                async with swarm.episode(Task(task_id="async-cancel")) as slow:
                    thinking.append(slow)
                    await asyncio.sleep(3600)

            thinking: list = []
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(think_forever(), timeout=2.0)
            assert thinking and thinking[0].closed

            with pytest.raises(SwarmError, match="without end"):
                async with swarm.episode(Task(task_id="async-noend")):
                    pass
            with pytest.raises(NotAnEpisodeError):
                with swarm.episode(Task(task_id="x")):
                    pass
            with pytest.raises(NotAnEpisodeError):
                swarm.episode(Task(task_id="x")).openai()

    asyncio.run(main())
    assert running(shared_server.url) == 0


def test_cancelled_begins_never_leave_an_open_episode(shared_server):
    """Begins cancelled by asyncio.wait_for at timeouts spread over a begin's own latency: before the request
    went out, on the wire, and after the answer came. Afterwards the server has no running episode."""
    async def main() -> tuple[int, int, int]:
        async with AsyncSwarmClient(shared_server.url) as swarm:
            start = time.monotonic()
            for _ in range(3):
                await (await swarm.begin(Task(task_id="warm"))).abort()
            latency = (time.monotonic() - start) / 6  # a begin and an abort each
            cancelled = begun = 0
            for i in range(60):
                timeout = latency * 2.0 * (i % 20) / 20  # 0 (cancelled before sending) .. twice a begin
                try:
                    ep = await asyncio.wait_for(swarm.begin(Task(task_id=f"c{i}"), timeout=300), timeout)
                except asyncio.TimeoutError:
                    cancelled += 1
                    continue
                begun += 1
                await ep.abort()
            await swarm.drain()
            return cancelled, begun, swarm.late_aborts

    cancelled, begun, late = asyncio.run(main())
    print(f"cancelled {cancelled}, begun {begun}, aborted late {late}")
    assert cancelled > 0 and begun > 0, (cancelled, begun)
    assert late > 0, "no begin was cancelled while its request was on the wire: the test did not test that"
    assert running(shared_server.url) == 0
