"""uv venvs: built once per project, reused, server with the host's torch, client without torch."""

from __future__ import annotations

import subprocess

import torch

from vibe_rl.autopilot.venvs import MARKER, ensure_venv


def _py(venv, code):
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True)


def test_server_and_client_venvs(base_project):
    server = ensure_venv(base_project, "server")
    client = ensure_venv(base_project, "client")
    assert not server.created and not client.created  # the session fixture built them: reused
    assert (server.path / MARKER).is_file()
    res = _py(server.path, "import torch, vibe_rl; print(torch.__version__); print(vibe_rl.__file__)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == torch.__version__  # the host's build, never a downloaded one
    assert (server.path / "bin" / "vibe-rl").exists()
    res = _py(client.path, "import importlib.util as u, vibe_rl.swarm, openai, httpx; print(u.find_spec('torch'))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "None"  # the client side stays light


def test_changed_plan_rebuilds(base_project, tmp_path):
    import json
    import shutil

    proj = tmp_path / "p"
    proj.mkdir()
    shutil.copytree(base_project / ".venv-client", proj / ".venv-client", symlinks=True)
    marker = proj / ".venv-client" / MARKER
    data = json.loads(marker.read_text())
    assert ensure_venv(proj, "client").created is False
    data["hash"] = "stale"
    marker.write_text(json.dumps(data))
    again = ensure_venv(proj, "client")
    assert again.created and json.loads(marker.read_text())["hash"] != "stale"


def test_torch_comes_from_a_local_wheel_never_an_index_on_cpu(tmp_path, monkeypatch):
    import shutil as sh

    import pytest

    from vibe_rl.autopilot import venvs

    monkeypatch.setattr(venvs, "WHEEL_DIRS", [tmp_path])
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    assert venvs._torch_requirement("2.13.0") == str(wheel)
    wheel.unlink()
    if sh.which("nvidia-smi") is None:
        with pytest.raises(venvs.VenvError, match="CUDA build"):
            venvs._torch_requirement("2.13.0")


def test_a_project_that_asks_for_vllm_plans_its_server_venv_with_the_vllm_extra(tmp_path):
    """The plan only (building it downloads vLLM, ~2.5 GB on CPU: the vLLM tier builds the same set in
    .venv-vllm): the extra and the torch it pins, never the host's torch site; a changed plan rebuilds."""
    import json
    import shutil as sh

    from vibe_rl.autopilot import venvs
    from vibe_rl.engine.choice import needs_vllm
    from vibe_rl.schema import EngineConfig

    plan = venvs._plan("server", vllm=True)
    flavor = "cuda" if sh.which("nvidia-smi") else "cpu"
    assert plan["vllm"] == flavor and plan["torch"] == venvs.VLLM_BUILDS[flavor][1] and plan["torch_site"] is None
    assert "vllm" not in venvs._plan("server") and "vllm" not in venvs._plan("client", vllm=True)
    assert json.dumps(venvs._plan("server", vllm=True), sort_keys=True) != json.dumps(venvs._plan("server"),
                                                                                    sort_keys=True)
    assert needs_vllm(EngineConfig(engine="vllm")) and not needs_vllm(EngineConfig(engine="auto"))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Phi3ForCausalLM"]}))
    assert needs_vllm(EngineConfig(engine="auto", path=str(tmp_path)))
    assert not needs_vllm(EngineConfig(engine="torch", path=str(tmp_path)))
