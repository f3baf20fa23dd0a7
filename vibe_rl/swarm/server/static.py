"""Static (non-trained) models that episodes call by name, e.g. an opponent team.

A call whose `model` names a configured static model is forwarded to its
OpenAI-compatible URL with the key read from its env var (the key is never
logged or echoed), or, when no URL is configured or its key's env var is unset,
served by a frozen local copy of a model (default: the trainable model's initial
weights), with a note in the server's status saying so. A static model with a
`source` ('checkpoint:latest', 'checkpoint:step:N', 'checkpoint:pool:last-K') plays
a frozen past checkpoint of the trainable model instead (`snapshots`). The call is
recorded in the episode as context only: it never becomes a training sample.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from typing import Any

from vibe_rl.rl.samples import Turn
from vibe_rl.schema import StaticModel, TrainJob
from vibe_rl.swarm.protocol import ChatCompletionRequest
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.generate import ChatResult, generate_on, sse_chunks
from vibe_rl.swarm.server.snapshots import Snapshots

# What an upstream error message may echo of a credential: bearer strings, OpenAI/Anthropic-style keys (also
# partly starred: 'sk-abc***wxyz'), key=... query parameters, and long token-like words.
_SECRETS = re.compile(r"(?i)\bbearer\s+\S+|\b(?:sk|pk|rk|ak|key|token)[-_][A-Za-z0-9*_.\-]{4,}|"
                      r"(?:api[_-]?key|access[_-]?token|token|key|secret|password)=[^\s&\"']+|"
                      r"\b(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{32,}\b")


def redact(text: str, *secrets: str | None) -> str:
    """`text` with every given secret and anything that looks like a credential replaced by '[redacted]': an
    upstream's error message is relayed to clients and logs, never what it echoed of the key."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = re.sub(r"(?<=://)[^/@\s]+@", "[redacted]@", text)  # user:password@ of a URL
    return _SECRETS.sub("[redacted]", text)


def upstream_of(model: StaticModel) -> tuple[str | None, str | None]:
    """(base_url, api_key) from the config and its env vars; (None, None) means 'serve locally'.

    A model that names an api_key_env which is unset is served locally too: forwarding it
    would only fail upstream (no key, or no network on an offline machine)."""
    url = model.base_url or (os.environ.get(model.base_url_env) if model.base_url_env else None)
    key = os.environ.get(model.api_key_env) if model.api_key_env else None
    if not url or (model.api_key_env and not key):
        return None, None
    return url.rstrip("/"), key


def unset_vars(model: StaticModel) -> list[str]:
    """The env vars of a static model with a configured endpoint that are unset now (its URL's, its key's), so
    that it is served locally; [] when it is forwarded or has no endpoint at all."""
    if not (model.base_url or model.base_url_env) or upstream_of(model) != (None, None):
        return []
    return [env for env in (None if model.base_url else model.base_url_env, model.api_key_env)
            if env and not os.environ.get(env)]


def local_note(model: StaticModel, served: str = "it is served by", copy_of: str = "the trainable model",
               hint: bool = True) -> str | None:
    """The note for a static model with a configured endpoint that a frozen local copy will serve (its URL's or
    key's env var is unset), naming exactly the unset variables; None when it is forwarded or has no endpoint."""
    unset = unset_vars(model)
    if not unset:
        return None
    names = " and ".join(unset)
    return (f"static model {model.name!r}: {names} {'is' if len(unset) == 1 else 'are'} not set, so {served} a "
            f"frozen local copy of {model.local_path or copy_of}"
            + (f"; export {names} and restart to call the real model" if hint else ""))


def local_notes(models: list[StaticModel]) -> list[str]:
    """One note per static model that will be served by a frozen local copy although a URL was configured."""
    return [note for note in map(local_note, models) if note]


class StaticRouter:
    def __init__(self, job: TrainJob, load_frozen: Callable[[str], Any]):
        self.job = job
        self.models = {m.name: m for m in job.static_models}
        self._load_frozen = load_frozen
        self.snapshots = Snapshots(job, load_frozen)
        self.notes = local_notes(job.static_models) + self.snapshots.boot_notes(job.static_models)
        self._local: dict[str, Any] = {}
        self._lock = asyncio.Lock()
        self._http = None

    def resolve(self, name: str) -> StaticModel | None:
        return self.models.get(name)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        for engine in self._local.values():
            await asyncio.to_thread(engine.close)
        self._local.clear()
        await self.snapshots.close()

    async def complete(self, model: StaticModel, req: ChatCompletionRequest, timing: dict[str, Any],
                       picked: dict[str, int] | None = None) -> ChatResult:
        """`picked`: the episode's snapshot step per checkpoint-sourced static model (chosen at its first call)."""
        if model.source:
            return await self._snapshot(model, req, timing, {} if picked is None else picked)
        url, key = upstream_of(model)
        if url is None:
            engine = await self._frozen(model.local_path or self.job.model.path)
            return await generate_on(engine, req, self.job.rollout, model.name, timing, static=True)
        return await self._forward(model, url, key, req)

    async def _snapshot(self, model: StaticModel, req: ChatCompletionRequest, timing: dict[str, Any],
                        picked: dict[str, int]) -> ChatResult:
        if model.name not in picked:
            picked[model.name] = self.snapshots.pick(model)
        step = picked[model.name]
        tagged = req.model_copy(update={"model": f"{model.name}@{'initial' if step == 0 else f'step_{step}'}"})
        if step == 0:
            return await generate_on(await self._frozen(self.job.model.path), tagged, self.job.rollout, model.name,
                                     timing, static=True)
        engine, release = await self.snapshots.get(model, step)
        try:
            result = await generate_on(engine, tagged, self.job.rollout, model.name, timing, static=True)
        except BaseException:
            release()  # idempotent: a call that failed before or while generating
            raise
        if result.finished is None:  # generated already
            release()
        else:  # a stream: released when its generation ends (or is cancelled)
            result.finished.add_done_callback(lambda _f: release())
        return result

    async def _frozen(self, path: str) -> Any:
        async with self._lock:
            if path not in self._local:
                self._local[path] = await asyncio.to_thread(self._load_frozen, path)
        return self._local[path]

    async def _forward(self, model: StaticModel, url: str, key: str | None,
                       req: ChatCompletionRequest) -> ChatResult:
        import httpx

        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0))
        # context_only is vibe-rl's own field (an upstream API would refuse it); a static call is never trained anyway
        payload = req.model_dump(exclude_none=True, exclude={"stream", "stream_options", "context_only"})
        payload["model"] = model.upstream_model or model.name
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            resp = await self._http.post(f"{url}/chat/completions", json=payload, headers=headers)
        except httpx.HTTPError as exc:
            raise ApiError(502, f"Static model '{model.name}' at {redact(url, key)} is unreachable: "
                                f"{type(exc).__name__}. Check its base_url / base_url_env.",
                           code="upstream_unreachable") from None
        if resp.status_code >= 400:
            try:
                error = resp.json().get("error", {})
                detail = str(error.get("message", "") if isinstance(error, dict) else error)
            except (ValueError, AttributeError):
                detail = resp.text
            status = resp.status_code if resp.status_code < 500 else 502
            hint = " Check the api_key_env variable." if resp.status_code in (401, 403) else ""
            detail = redact(detail[:2000], key)[:300]
            raise ApiError(status, f"Static model '{model.name}' upstream answered {resp.status_code}: {detail}.{hint}",
                           code="upstream_error")
        body = resp.json()
        body["model"] = model.name
        messages = [m.model_dump(exclude_none=True) for m in req.messages]
        text = ((body.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        turn = Turn(prompt_ids=[], response_ids=[], response_logprobs=[], messages=messages, response_text=text,
                          model=model.name, static=True)
        if req.stream:
            return ChatResult(sse_chunks(body, bool(req.stream_options and req.stream_options.include_usage)), [turn])
        return ChatResult(body, [turn])
