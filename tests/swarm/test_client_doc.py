"""docs/client.md stays true: its job table is the schema's, and its snippets, pasted into a fresh file,
train the tiny model on a real server to global step 3 with rewards that vary, leaving the checkpoint
that its export section names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.swarm.conftest import Server
from vibe_rl.schema.reference import END, START, job_reference
from vibe_rl.swarm import SwarmClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def client_snippets() -> str:
    section = DOC.read_text(encoding="utf-8").split("## Write a client", 1)[1].split("\n## ", 1)[0]
    return "\n\n".join(re.findall(r"^```python\n(.*?)^```", section, re.M | re.S))


def test_the_job_reference_is_the_schema():
    text = DOC.read_text(encoding="utf-8")
    table = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert table == job_reference(), "docs/client.md: run python -m vibe_rl.schema.reference docs/client.md"


def test_a_client_written_from_the_doc_trains_to_step_3(tmp_path, tiny_model_dir):
    script = tmp_path / "my_client.py"
    script.write_text(client_snippets())
    assert "swarm.episode(" in script.read_text() and "run_in_flight(" in script.read_text()
    server = Server(tmp_path / "exp").start()
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "VIBE_RL_SWARM_URL": server.url})
        assert done.returncode == 0, done.stderr[-3000:] + server.output()
        assert "step 3:" in done.stdout and ", 0 failed" in done.stdout, done.stdout
        with SwarmClient(server.url) as swarm:
            assert swarm.status().global_step == 3
            updates = [u.model_dump() for u in swarm.updates()]
        # the toy reward keeps varying: far from saturated, and every update has a group whose rewards differ
        # (a group whose rewards all agree has zero advantage and teaches nothing)
        assert all(0.0 < u["reward_mean"] < 0.9 and u["all_equal_groups"] < u["groups"] for u in updates), updates
        # the export section's checkpoint exists (save_freq: 1) and exports
        from vibe_rl.cli.export import export_checkpoint

        out = export_checkpoint(tmp_path / "exp" / "checkpoints" / "step_000003", tmp_path / "exported")
        assert (out / "config.json").is_file()
    finally:
        server.stop()
