"""The server's notes on static models it serves locally: they name exactly the env vars that are unset."""

from __future__ import annotations

from vibe_rl.schema.job import StaticModel
from vibe_rl.swarm.server.static import local_notes, upstream_of


def test_local_notes_name_the_unset_url_and_key_vars(monkeypatch):
    for env in ("OPP_BASE_URL", "OPP_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    by_env = StaticModel(name="qwen-plus", base_url_env="OPP_BASE_URL", api_key_env="OPP_API_KEY")
    fixed = StaticModel(name="qwen-max", base_url="https://example.invalid/v1", api_key_env="OPP_API_KEY")
    none = StaticModel(name="opponent")
    assert local_notes([by_env, fixed, none]) == [
        "static model 'qwen-plus': OPP_BASE_URL and OPP_API_KEY are not set, so it is served by a frozen local "
        "copy of the trainable model; export OPP_BASE_URL and OPP_API_KEY and restart to call the real model",
        "static model 'qwen-max': OPP_API_KEY is not set, so it is served by a frozen local copy of the trainable "
        "model; export OPP_API_KEY and restart to call the real model"]
    monkeypatch.setenv("OPP_API_KEY", "k")  # the key alone: the URL's variable is still missing, and named
    assert local_notes([by_env]) == [
        "static model 'qwen-plus': OPP_BASE_URL is not set, so it is served by a frozen local copy of the "
        "trainable model; export OPP_BASE_URL and restart to call the real model"]
    monkeypatch.setenv("OPP_BASE_URL", "http://127.0.0.1:9/v1/")
    assert local_notes([by_env, fixed]) == [] and upstream_of(by_env) == ("http://127.0.0.1:9/v1", "k")
