"""One translation episode (agent_roll mode): three agents, 2 trainable servers.

Agent 1 drafts the translation, agent 2 lists the draft's proper-noun errors as JSON, agent 3 writes the
final translation. TEAM_MODELS wires each agent to its model (`vibe-rl doctor` checks it) and every call is
tagged `user="<role>:<agent id>"`. Each server gets its own reward from its own grader (GRADERS): the final
translation's quality, or the detection's quality, scored 0-2 and normalised to [0, 1]. The graders ask an
LLM judge when JUDGE_MODEL and JUDGE_BASE_URL are set, else use the offline rules in workflow.py.
"""

import json
import os
from pathlib import Path

from vibe_rl.swarm import LLMRouter, OpenaiBaseUrlAndApiKey, Task, WorkflowOutput

from workflow import (
    LLMJudge,
    ProperNounDetectionGrader,
    TranslationQualityGrader,
    detector_messages,
    final_messages,
    rough_messages,
)

HERE = Path(__file__).resolve().parent
# Role -> the server (trainable) or static model its calls reach.
TEAM_MODELS = {
    "rough_translator": "server1",
    "final_translator": "server1",
    "detector": "server2",
}
AGENT_IDS = {"rough_translator": "agent_1", "detector": "agent_2", "final_translator": "agent_3"}
# Server -> the grader of its reward.
GRADERS = {
    "server1": "translation",
    "server2": "detection",
}
MAX_TOKENS = int(os.getenv("VIBE_RL_MAX_TOKENS", "512"))
RULES = json.loads((HERE / "mock_paragraphs.json").read_text(encoding="utf-8"))["rules"]


def call(router: LLMRouter, role: str, messages: list[dict]) -> str:
    """One agent turn on its role's model; a static model is reached by name through an episode URL."""
    llm = router.llm_for(role)
    reply = llm.client.chat.completions.create(model=llm.model, messages=messages, max_tokens=MAX_TOKENS,
                                               user=f"{role}:{AGENT_IDS[role]}")
    return reply.choices[0].message.content or ""


def run_episode(task: Task, endpoints: dict[str, OpenaiBaseUrlAndApiKey]) -> dict[str, WorkflowOutput]:
    """endpoints: server -> its episode credentials. Returns server -> its episode's output."""
    info, router = task.metadata, LLMRouter(TEAM_MODELS, endpoints)
    draft = call(router, "rough_translator", rough_messages(info["source"]))
    review = call(router, "detector", detector_messages(info["source"], draft))
    final = call(router, "final_translator", final_messages(info["source"], draft, review))
    judge = LLMJudge.from_env("JUDGE")
    grades = {"translation": TranslationQualityGrader(RULES, judge).grade(final, info),
              "detection": ProperNounDetectionGrader(RULES, judge).grade(review, draft, info)}
    meta = {"paragraph_id": info.get("paragraph_id"), "scores": {k: g.score for k, g in grades.items()},
            "final": final[:500], "review": review[:500]}
    return {server: WorkflowOutput(reward=grades[kind].reward,
                                   metadata={**meta, "grader": kind, "details": grades[kind].details})
            for server, kind in GRADERS.items()}
