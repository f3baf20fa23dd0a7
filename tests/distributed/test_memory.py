"""The per-GPU memory estimate said before a run (new --dry-run, doctor, vibe-rl run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vibe_rl.engine.memory import Estimate, count_parameters, fit_note, params_from_config, params_from_name


def test_parameter_count_from_config_is_exact(tiny_model_dir):
    from vibe_rl.engine.loader import load_causal_lm

    model = load_causal_lm(tiny_model_dir, "cpu", None)
    counted, source = count_parameters(str(tiny_model_dir))
    assert counted == sum(p.numel() for p in model.parameters())
    assert source.endswith("config.json")


def test_parameter_count_of_published_shapes():
    from vibe_rl.engine.shapes import QWEN_VOCAB, SHAPES

    billions = {k: params_from_config({**SHAPES[k], "vocab_size": QWEN_VOCAB}) / 1e9 for k in ("0.5b", "7b", "14b")}
    assert billions["0.5b"] == pytest.approx(0.494, abs=0.01)  # Qwen2.5-0.5B
    assert billions["7b"] == pytest.approx(7.62, abs=0.02)  # Qwen2.5-7B
    assert billions["14b"] == pytest.approx(14.77, abs=0.03)  # Qwen2.5-14B


def test_size_from_the_name_when_the_path_is_elsewhere():
    assert params_from_name("/models/Qwen2.5-14B-Instruct") == 14_000_000_000
    assert params_from_name("Qwen/Qwen2.5-0.5B") == 500_000_000
    assert params_from_name("/tmp/qwen05b") == 500_000_000  # not 5B
    assert params_from_name("SmolLM2-360M-Instruct") == 360_000_000
    assert params_from_name("gpt2") is None
    assert count_parameters("/nowhere/Llama-3.1-8B")[0] == 8_000_000_000


def test_sharding_divides_the_training_state_and_lora_shrinks_it():
    p = 7_000_000_000
    one, two, four = (Estimate.of(p, n, lora=False).per_gpu_gb for n in (1, 2, 4))
    assert one > two > four
    assert Estimate.of(p, 1, lora=True).per_gpu_gb < one / 3


def test_a_full_14b_fine_tune_does_not_fit_one_80gb_gpu_and_the_note_names_the_fixes():
    fits, note = fit_note("server1", "/models/Qwen2.5-14B-Instruct", 1, lora=False, gpu_gb=80)
    assert not fits
    assert "WILL NOT FIT" in note and "model.lora.rank" in note and "3 GPUs" in note and "smaller model" in note
    fits, note = fit_note("server1", "/models/Qwen2.5-14B-Instruct", 4, lora=False, gpu_gb=80)
    assert fits and note.endswith("fits")
    assert fit_note("server1", "tiny", 4, lora=False)[0]


def test_a_model_that_fits_only_without_generation_replicas_is_said_so():
    """14B full fine-tune on 2 x 80 GB: replica 28 GB + shards 56 GB per GPU is too much, the shards alone fit;
    the server's 'auto' then runs without replicas (dist_engine.generation_replicas decides with the same test)."""
    from vibe_rl.engine.memory import replicas_fit

    fits, note = fit_note("server1", "/models/Qwen2.5-14B-Instruct", 2, lora=False, gpu_gb=80)
    assert fits and "fits without" in note and "generation_replicas" in note and "LoRA or more GPUs" in note, note
    assert not replicas_fit(14_000_000_000, 2, False, 80) and replicas_fit(14_000_000_000, 4, False, 80)
    assert replicas_fit(14_000_000_000, 1, False, 80)  # one GPU: the model generates itself, never a replica
    assert Estimate.of(14_000_000_000, 2, False, replicas=False).per_gpu_gb < 0.95 * 80


def test_new_dry_run_says_whether_each_server_fits():
    proc = subprocess.run([sys.executable, "-m", "vibe_rl", "new", "--dry-run", "--json",
                           "who is spy with 2 GPUs, model path /models/Qwen2.5-14B-Instruct"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # stdout stays the TaskSpec JSON; the estimate goes to stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("memory: ")]
    assert lines and all("14.0B parameters" in line for line in lines), proc.stderr
    assert any("WILL NOT FIT" in line and "LoRA" in line for line in lines), lines


def test_vibe_rl_run_gives_each_server_its_gpus_and_says_whether_it_fits(tmp_path, monkeypatch):
    """The seeds' adversarial mode on an 8-GPU node: 4 + 4 GPUs, a memory line per server."""
    import shutil

    from vibe_rl.autopilot.plan import RunOptions, plan_sessions
    from vibe_rl.schema.spec import TaskSpec

    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "who_is_spy"
    shutil.copytree(root / "generated" / "who_is_spy", project)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    spec = TaskSpec.load(project)
    notes: list[str] = []
    views, _ = plan_sessions(spec, "agent_roll_adv", RunOptions(project_dir=project, device="gpu"),
                             tmp_path / "sv", tmp_path / "cv", notes)
    assert [v.session.env["CUDA_VISIBLE_DEVICES"] for v in views] == ["0,1,2,3", "4,5,6,7"]
    memory = [n for n in notes if n.startswith("memory: ")]
    assert len(memory) == 2 and all("on 4 GPU(s)" in n for n in memory), notes
