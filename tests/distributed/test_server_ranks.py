"""A swarm server spread over 2 processes (rank 0 serves HTTP, rank 1 follows) trains to global
step 2 through the official openai SDK; a SIGKILL of its launcher leaves no rank behind and a
restart resumes at the checkpoint; the same server as 2 nodes x 1 process (two node ranks,
rendezvous on loopback) reaches step 2 with the same losses as 1 node x 2 processes.

Every chat call carries its own sampling seed and every episode a fixed reward, so both layouts
train on the same tokens. Compared per update: the loss within the layout's `atol` (on-policy
GRPO with equal-length answers has a loss near 0: ratio 1, advantages summing to 0 per group)
and the gradient norm, the fingerprint of the update, within `rtol`; both runs use fp32 (on the
GPUs too), so the only difference is float rounding. Before that, each layout must be on-policy:
every update trains on samples of the weights it starts from (staleness 0) whose rollout
logprobs equal the trainer's within `gap` (a replica that generated from other weights, or on
the wrong device, shows here first), and both layouts trained on as many tokens.

The CPU layout hides every GPU from its ranks (CUDA_VISIBLE_DEVICES=""), so it runs the same on
a CPU-only host and on a GPU host.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import openai
import pytest

from tests.distributed.servers import RankedServer

SETS = ["train.batch_size=2", "train.grpo_n=4", "train.lr=0.03", "train.micro_batch_size=2", "train.save_freq=1",
        "rollout.max_tokens=6", "model.max_model_len=256"]


def _cuda_pair() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


LAYOUTS = {
    "cpu": dict(sets=[*SETS, "model.device=cpu"], gpus=("", "", ""), model="tiny", rtol=1e-4, atol=1e-6, gap=1e-3),
    # fp32 on the GPUs too: bf16 rounding that differs with batch shapes could flip a sampled token
    "gpu": dict(sets=[*SETS, "model.device=auto", "model.dtype=float32"], gpus=("0,1", "0", "1"), model="tiny",
                rtol=1e-2, atol=1e-4, gap=1e-3),  # looser: GPU kernels may pick other reduction orders per batch shape
}


def play(client, task_id: str, index: int) -> None:
    """One two-turn episode; its sampling seeds and reward depend only on (task_id, index)."""
    from vibe_rl.swarm import Task, WorkflowOutput

    episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    messages = [{"role": "user", "content": f"{task_id} opens"}]
    for turn in range(2):
        out = llm.chat.completions.create(model=api.model, max_tokens=6, messages=messages,
                                          seed=1000 * ord(task_id[0]) + 10 * index + turn)
        messages += [{"role": "assistant", "content": out.choices[0].message.content or ""},
                     {"role": "user", "content": f"{task_id} turn {turn}"}]
    client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=float(index % 2)))


def train_two_steps(server: RankedServer) -> list[dict]:
    from vibe_rl.swarm import SwarmClient, TrainJob, run_in_flight

    client = SwarmClient(server.url)
    client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    for step, tasks in ((1, ["a", "b"]), (2, ["c", "d"])):
        items = [(t, i) for t in tasks for i in range(4)]
        report = run_in_flight(lambda it: play(client, *it), items, max_in_flight=8)
        assert report.failed == 0, report.failures
        deadline = time.monotonic() + 300
        while len(client.updates(0)) < step:
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
    status = client.get_engine_status()
    assert [d["rank"] for d in status["devices"]] == [0, 1], status["devices"]
    assert not status["errors"], status["errors"]
    view = subprocess.run([sys.executable, "-m", "vibe_rl", "swarm", "overwatch", "--url", server.url, "--once"],
                          capture_output=True, text=True, timeout=60)
    gpus = [d["gpu"] for d in status["devices"] if d.get("gpu") is not None]
    assert "devices: 2 process(es)" in view.stdout, view.stdout + view.stderr
    assert not gpus or f"{len(gpus)} GPU(s)" in view.stdout, view.stdout
    keys = ("loss", "grad_norm", "num_loss_tokens", "logprob_abs_diff", "staleness_mean")
    return [{k: (u.model_dump() | (u.model_extra or {})).get(k) for k in keys} for u in client.updates(0)]


def assert_on_policy(updates: list[dict], gap: float, server: RankedServer) -> None:
    for u in updates:
        assert u["staleness_mean"] == 0, (updates, server.output())
        assert u["logprob_abs_diff"] <= gap, (
            "the rollout logprobs differ from the trainer's on an on-policy update: a replica generated from "
            "other weights or numerics (tests/distributed/test_replica_ranks.py checks each replica)", updates,
            server.output())


def run_layouts(tmp_path, layout: str) -> None:
    from vibe_rl.swarm import SwarmClient, TrainJob

    spec = LAYOUTS[layout]
    gpus = spec["gpus"]
    one_node = RankedServer(tmp_path / "one-node", spec["sets"], nproc=2, model=spec["model"],
                            gpus_per_node=[gpus[0]] if gpus else None).start()
    try:
        losses = train_two_steps(one_node)
        assert len(losses) == 2 and all(u["loss"] is not None and u["grad_norm"] > 0 for u in losses), losses
        assert_on_policy(losses, spec["gap"], one_node)
        assert (one_node.exp_dir / "checkpoints" / "step_000002" / "model" / "config.json").is_file()
        one_node.kill()
        deadline = time.monotonic() + 60
        while one_node.group_alive():  # rank 1 dies with its launcher: no orphan holds the GPU
            assert time.monotonic() < deadline, "a rank outlived its killed launcher"
            time.sleep(0.2)
        one_node.start()
        client = SwarmClient(one_node.url)
        status = client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        notes = " ".join(status["notes"])
        assert "resumed from checkpoint" in notes and "global step 2" in notes, notes
        assert status["weight_version"] == 2 and len(status["devices"]) == 2
        play(client, "e", 1)  # the resumed replicas answer
    finally:
        one_node.stop()

    two_nodes = RankedServer(tmp_path / "two-nodes", spec["sets"], nproc=1, nodes=2, model=spec["model"],
                             gpus_per_node=list(gpus[1:]) if gpus else None).start()
    try:
        multi = train_two_steps(two_nodes)
        assert_on_policy(multi, spec["gap"], two_nodes)
    finally:
        two_nodes.stop()
    for a, b in zip(losses, multi, strict=True):
        assert a["num_loss_tokens"] == b["num_loss_tokens"], ("the layouts sampled different tokens", losses, multi)
        assert abs(a["loss"] - b["loss"]) <= spec["atol"], (losses, multi)
        assert abs(a["grad_norm"] - b["grad_norm"]) <= spec["rtol"] * max(a["grad_norm"], b["grad_norm"]), (losses, multi)


@pytest.mark.slow
def test_two_rank_server_on_cpu_resumes_and_matches_two_nodes(tmp_path, tiny_model_dir):
    run_layouts(tmp_path, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_pair(), reason="needs 2 CUDA GPUs")
def test_two_gpu_server_resumes_and_matches_two_nodes(tmp_path, tiny_model_dir):
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "source .device/on-device.sh first (NCCL_NVLS_ENABLE=0)"
    run_layouts(tmp_path, "gpu")
