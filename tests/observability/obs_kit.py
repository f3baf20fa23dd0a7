"""Helpers of the observability tests: a real `vibe-rl swarm start` on a free loopback port, and a loop that
plays one-call episodes to a given step."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import openai

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.launch import free_port, log_tail, spawn, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
# one-call episodes, 2 per update (1 task x grpo_n 2), a big learning rate for the tiny model
FAST = ["train.batch_size=1", "train.grpo_n=2", "train.lr=0.03", "rollout.max_tokens=8", "model.max_model_len=512",
        "model.device=cpu", "train.save_freq=0"]


class LiveServer:
    def __init__(self, exp_dir: Path, sets: list[str], extra: list[str] = ()):
        self.exp_dir, self.port = exp_dir, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = exp_dir.parent / f"server-{self.port}.log"
        cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "start", "--port",
               str(self.port), "--model", "tiny", "--experiment-dir", str(exp_dir), *extra]
        for s in [*FAST, *sets]:
            cmd += ["--set", s]
        exp_dir.parent.mkdir(parents=True, exist_ok=True)
        self.proc = spawn(cmd, self.log, cwd=ROOT, append=True)
        wait_healthy(self.url, self.proc, timeout=120.0, log_path=self.log, tail_chars=4000)

    def output(self) -> str:
        return log_tail(self.log, 4000)

    def stop(self) -> None:
        stop(self.proc)


def play_to_step(client: SwarmClient, step: int, job: TrainJob | None = None) -> None:
    """Start the engine and play one-call episodes (rewards 0 and 1 per task) until global_step >= step."""
    client.auto_sync_train_config_and_start_engine(job or TrainJob(), verbose=False)
    task_no = 0
    while client.get_engine_status()["global_step"] < step:
        task_no += 1
        for reward in (0.0, 1.0):
            episode_uuid, api = client.begin_episode(discard_episode_timeout=600)
            llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=2)
            llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": f"task {task_no}"}],
                                        user="civilian:player_1")
            client.end_episode(Task(task_id=f"t{task_no}"), episode_uuid, WorkflowOutput(reward=reward))
        deadline = time.monotonic() + 120
        while client.get_engine_status()["state"] not in ("ROLLING", "FINISHED") and time.monotonic() < deadline:
            time.sleep(0.1)
