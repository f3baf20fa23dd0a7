"""The multi-model translation family end to end: planner values from the example specs, the committed
generated project (kept in sync with the templates), lint, doctor (clean, and catching an injected wiring
mistake), and full episodes against two real swarm servers on loopback with the tiny model, each server
receiving its own grader's reward (offline rules, then a scripted LLM judge that scores the two differently)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted_api import ScriptedAPI
from project_kit import (
    REPO,
    VIBE_RL,
    assert_matches_the_templates,
    copy_project,
    pytest_inside,
    ruff_check,
    sessions_without_hash,
    start_server,
    stop_server,
)

from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold.doctor import diagnose

EXAMPLES = REPO / "templates" / "multi_model_translation" / "examples"
SEED = EXAMPLES / "seed_prompt.zh.md"
PROJECT = REPO / "generated" / "multi_model_translation"
HUB = "/mnt/data_cpfs/model_cache/modelscope/hub/Qwen/Qwen/"


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(PROJECT, tmp_path)


# ---- planner -------------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt", ["seed_prompt.zh.md", "seed_prompt.en.md"])
def test_example_specs_give_the_seed_values(prompt):
    spec = OfflinePlanner().plan((EXAMPLES / prompt).read_text(encoding="utf-8"))
    assert (spec.family, spec.short_name, spec.gpus) == ("multi_model_translation", "trans", 8)
    assert [(s.name, s.port, s.gpus, s.model_path, s.config) for s in spec.servers] == [
        ("server1", 10086, 4, HUB + "Qwen2.5-7B-Instruct", "config.yaml"),
        ("server2", 10087, 4, HUB + "Qwen2.5-14B-Instruct", "config_server2.yaml")]
    wiring = {r: spec.model_for_role(r).name for r in ("rough_translator", "detector", "final_translator")}
    assert wiring == {"rough_translator": "server1", "detector": "server2", "final_translator": "server1"}
    assert spec.mode().rewarded == {"server1": "translators", "server2": "detector"}
    assert spec.gpu_split() == {"server1": [0, 1, 2, 3], "server2": [4, 5, 6, 7]}
    t = spec.training
    assert (t.batch_size, t.grpo_n, t.save_freq) == (32, 4, 5)
    assert "TranslationQualityGrader" in spec.reward.description and "ProperNounDetectionGrader" in spec.reward.description
    assert sessions_without_hash(spec) == ["trans-swarm-server", "trans-swarm-server-2", "trans-swarm-client"]
    assert spec.static_models == [] and spec.constraints.no_chinese_in_code


def test_chinese_and_english_examples_agree():
    zh, en = (OfflinePlanner().plan((EXAMPLES / f).read_text(encoding="utf-8"))
              for f in ("seed_prompt.zh.md", "seed_prompt.en.md"))
    assert zh == en


def test_short_spec_uses_the_seed_layout():
    spec = OfflinePlanner().plan("Multi-model translation workflow with proper noun detection, model "
                                 "Qwen/Qwen2.5-1.5B-Instruct, 2 GPUs, batch size 4, grpo_n 2")
    assert [(s.port, s.gpus, s.model_path) for s in spec.servers] == [
        (10086, 1, "Qwen/Qwen2.5-1.5B-Instruct"), (10087, 1, "Qwen/Qwen2.5-1.5B-Instruct")]
    assert spec.model_for_role("detector").name == "server2"
    assert (spec.training.batch_size, spec.training.grpo_n) == (4, 2)


# ---- the committed project -----------------------------------------------------------------------

@pytest.mark.parametrize("text, named", [
    ("Three-agent workflow translating English legal contract clauses into Chinese: drafter, term checker, "
     "polisher. Batch size 8, grpo_n 2.", "legal"),
    ("编写一个新闻稿翻译流程（英文 -> 中文），三个智能体：初译、术语检查、润色。Batch size 4，grpo_n 2", "新闻"),
])
def test_another_text_domain_is_noted(text, named):
    """The family's mock data, prompts and graders are academic paragraphs; a spec for legal clauses or news
    rendered an 'academic' project without a word about the domain it asked for."""
    spec = OfflinePlanner().plan(text, family="multi_model_translation")
    said = [n for n in spec.notes if "academic paper paragraphs" in n]
    assert len(said) == 1 and repr(named) in said[0] and "mock_dataset.py" in said[0]


def test_academic_examples_have_no_domain_note():
    for prompt in ("seed_prompt.zh.md", "seed_prompt.en.md"):
        spec = OfflinePlanner().plan((EXAMPLES / prompt).read_text(encoding="utf-8"))
        assert not [n for n in spec.notes if "academic paper paragraphs" in n]


def test_generated_project_matches_the_templates(tmp_path):
    assert_matches_the_templates(PROJECT, SEED, tmp_path)


def test_roll_is_short_and_ruff_clean():
    assert len((PROJECT / "agent_roll.py").read_text().splitlines()) < 100
    done = ruff_check(PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_grader_tests_pass_inside_the_project(project):
    done = pytest_inside(project, "test_workflow.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_dataset_has_more_distinct_tasks_than_a_batch():
    tasks = json.loads((PROJECT / "mock_translation_dataset.json").read_text(encoding="utf-8"))
    seeds = [str(t["seed"]) for t in tasks]
    assert len(tasks) == 200 and all(s.strip() for s in seeds) and len(set(seeds)) == len(seeds)
    assert len(tasks) >= json.loads((PROJECT / "task_spec.json").read_text())["training"]["batch_size"]
    assert {"source", "reference", "terms", "abbreviations"} <= set(tasks[0])


def test_doctor_passes_and_catches_injected_wiring_mistake(project):
    assert [f for f in diagnose(PROJECT) if f.level == "error"] == []
    run = project / "agent_run.py"
    run.write_text(run.read_text().replace('"detector": "server2"', '"detector": "server1"'))
    errors = [f for f in diagnose(project) if f.level == "error"]
    assert len(errors) == 1 and errors[0].file == "agent_run.py" and "detector" in errors[0].message
    done = subprocess.run([VIBE_RL, "doctor", str(project)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "detector" in done.stdout + done.stderr


# ---- full episodes against two real swarm servers -------------------------------------------------

def judge_answer(body: dict) -> str:
    """The scripted LLM judge: 2 points for any translation, 1 for any detection."""
    score = 1 if "reviewer's JSON" in body["messages"][0]["content"] else 2
    return json.dumps({"score": score, "reason": "scripted"})


DRIVER = """
import json, sys
from vibe_rl.swarm import SwarmClient, TrainJob
from agent_roll import load_tasks
from agent_run import run_episode
swarms = {"server1": SwarmClient(sys.argv[1]), "server2": SwarmClient(sys.argv[2])}
configs = {"server1": "config.yaml", "server2": "config_server2.yaml"}
for name, swarm in swarms.items():
    swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(configs[name]), verbose=False)
task = load_tasks()[int(sys.argv[3])]
opened = {name: swarm.begin_episode(discard_episode_timeout=600) for name, swarm in swarms.items()}
outputs = run_episode(task, {name: creds for name, (_, creds) in opened.items()})
ended = {name: swarms[name].end_episode(task, uuid, outputs[name]) for name, (uuid, _) in opened.items()}
print(json.dumps({"task": task.task_id, "outputs": {k: v.model_dump() for k, v in outputs.items()}, "ended": ended,
                  "uuids": {name: uuid for name, (uuid, _) in opened.items()},
                  "status": {name: s.get_engine_status() for name, s in swarms.items()},
                  "traces": {name: s.get_traces(limit=500)["calls"] for name, s in swarms.items()}}))
"""


def drive(project: Path, urls: list[str], index: int, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", DRIVER, *urls, str(index)], cwd=project, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "VIBE_RL_MAX_TOKENS": "24", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_routing(result: dict) -> None:
    """Agents 1 and 3 spoke only to server 1, agent 2 only to server 2, each in that server's episode."""
    players = {name: sorted(c["player"] for c in calls if c["episode_uuid"] == result["uuids"][name])
               for name, calls in result["traces"].items()}
    assert players == {"server1": ["final_translator:agent_3", "rough_translator:agent_1"],
                       "server2": ["detector:agent_2"]}
    assert not any(c["static"] for calls in result["traces"].values() for c in calls)


@pytest.mark.slow
def test_episodes_reward_each_server_with_its_own_grader(project, tmp_path, tiny_model_dir):
    servers = [start_server(tmp_path, "server1", 24, 4096), start_server(tmp_path, "server2", 24, 4096)]
    try:
        urls = [url for _, url in servers]
        env_off = {"JUDGE_MODEL": "", "JUDGE_BASE_URL": ""}
        rules = drive(project, urls, 0, env_off)
        with ScriptedAPI(judge_answer) as judge:
            judged = drive(project, urls, 1, {"JUDGE_MODEL": "judge", "JUDGE_BASE_URL": judge.url,
                                              "JUDGE_API_KEY": "k"})
    finally:
        for proc, _ in servers:
            stop_server(proc)
    for result in (rules, judged):
        check_routing(result)
        assert all(not e["already_ended"] for e in result["ended"].values())
        outs = result["outputs"]
        assert (outs["server1"]["metadata"]["grader"], outs["server2"]["metadata"]["grader"]) == (
            "translation", "detection")
        for name, out in outs.items():
            assert math.isfinite(out["reward"]) and 0.0 <= out["reward"] <= 1.0
            task = {t["task_id"]: t for t in result["status"][name]["tasks"]}[result["task"]]
            assert task["episodes"] == 1 and task["reward_mean"] == pytest.approx(out["reward"], abs=1e-3)
    # Offline rules graded the tiny model's output; the judge scored translation 2 and detection 1.
    assert "judge" not in rules["outputs"]["server1"]["metadata"]["details"]
    assert judged["outputs"]["server1"]["reward"] == 1.0 and judged["outputs"]["server2"]["reward"] == 0.5
    assert {t["task_id"]: t["reward_mean"] for t in judged["status"]["server2"]["tasks"]}[judged["task"]] == 0.5
