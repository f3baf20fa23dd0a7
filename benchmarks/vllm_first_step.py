"""Seconds to the first weight update of a swarm server whose engine is vLLM, on an architecture of --arch.

Builds a random-init model of --arch and --shape offline (the tiny tokenizer's vocabulary), starts a real
`vibe-rl swarm start` with `model.engine` --engine on --device, and drives it through the official `openai` SDK:
--episodes episodes of one task (one GRPO group, rewards 0, 1, 0, 1, ...), each one chat call of
--max-tokens tokens, then one more call that must be served by the updated weights (`system_fingerprint` v1).
Phi-3 is an architecture the embedded paged engine refuses, so `--arch phi3 --engine vllm` is the way a
user with such a model trains. Prints ONE JSON object: start-up and first-update seconds, the update's
metrics, the server's notes and errors.

    python benchmarks/vllm_first_step.py --device cuda --arch phi3 --shape 0.5b     # on a GPU machine with vLLM
    python benchmarks/vllm_first_step.py --device cpu --arch phi3 --shape tiny --engine torch   # smoke, no vLLM
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cpu or cuda (default cuda)")
    ap.add_argument("--arch", default="phi3", help="architecture of the random model: qwen2 or phi3 (default phi3)")
    ap.add_argument("--shape", default="0.5b", help="tiny or a shape of vibe_rl.engine.shapes (default 0.5b)")
    ap.add_argument("--engine", default="vllm", choices=["vllm", "torch", "auto"], help="model.engine (default vllm)")
    ap.add_argument("--episodes", type=int, default=4, help="episodes in the one group trained (default 4)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per chat call (default 64)")
    ap.add_argument("--boot-timeout", type=float, default=900.0, help="seconds the engine may take to start")
    args = ap.parse_args()
    if args.episodes < 2:
        raise SystemExit("--episodes must be at least 2: a group of one episode has no advantage to train on.")

    import openai

    from vibe_rl.engine.shapes import build_random_model
    from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
    from vibe_rl.swarm.launch import free_port, log_tail, spawn, stop, wait_healthy

    work = Path(tempfile.mkdtemp(prefix="vllm-first-step-"))
    model_dir = work / f"{args.arch}-{args.shape}"
    t0 = time.time()
    params = build_random_model(args.shape, model_dir, vocab="tokenizer", arch=args.arch)
    build_s = time.time() - t0

    port = free_port()
    url, log = f"http://127.0.0.1:{port}", work / "server.log"
    sets = [f"model.device={args.device}", f"model.engine={args.engine}", "train.batch_size=1",
            f"train.grpo_n={args.episodes}", f"rollout.max_tokens={args.max_tokens}", "model.max_model_len=2048",
            "train.save_freq=1"]
    cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "start", "--port", str(port),
           "--model", str(model_dir), "--experiment-dir", str(work / "exp")]
    for s in sets:
        cmd += ["--set", s]
    proc = spawn(cmd, log, cwd=Path(__file__).resolve().parents[1])
    out: dict = {"device": args.device, "arch": args.arch, "shape": args.shape, "engine": args.engine,
                 "params": params, "build_model_s": round(build_s, 1)}
    try:
        wait_healthy(url, proc, timeout=120.0, log_path=log)
        client = SwarmClient(url, wait_timeout=args.boot_timeout)
        t0 = time.time()
        client.auto_sync_train_config_and_start_engine(
            TrainJob(model={"path": str(model_dir), "engine": args.engine, "device": args.device}), verbose=False)
        out["engine_start_s"] = round(time.time() - t0, 1)
        msgs = [{"role": "user", "content": "Describe the word apple in one sentence."}]
        t0, tokens = time.time(), 0
        for i in range(args.episodes):  # the last end fills the group and starts update 1
            episode_uuid, api = client.begin_episode()
            llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
            reply = llm.chat.completions.create(model=api.model, messages=msgs, max_tokens=args.max_tokens,
                                                temperature=1.0, logprobs=True)
            assert reply.system_fingerprint == "v0", reply.system_fingerprint
            tokens += reply.usage.completion_tokens
            client.end_episode(Task(task_id="apple"), episode_uuid, WorkflowOutput(reward=float(i % 2)))
        out["rollout_s"], out["generated_tokens"] = round(time.time() - t0, 2), tokens
        episode_uuid, api = client.begin_episode()  # waits while the update runs
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        after = llm.chat.completions.create(model=api.model, messages=msgs, max_tokens=8)
        out["first_update_s"] = round(time.time() - t0, 2)
        out["served_after_update"] = after.system_fingerprint
        client.abort_episode(episode_uuid)
        status = client.get_engine_status()
        out.update(global_step=status["global_step"], weight_version=status["weight_version"],
                   last_update=status["last_update"], notes=status["notes"], errors=status["errors"],
                   devices=status["devices"])
    except Exception as exc:  # the JSON still says how far it got, and the server's log says why
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["server_log_tail"] = log_tail(log, 4000)
    finally:
        stop(proc)
    print(json.dumps(out))
    if "error" in out or out.get("global_step") != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
