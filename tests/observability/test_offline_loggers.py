"""wandb and swanlab loggers in their offline/local modes (no key, nothing uploaded): the run files they
write hold the logged steps. Skipped, with the reason, where the packages are not installed."""

from __future__ import annotations

import pytest

from vibe_rl.swarm.observe.loggers import MetricsSink, make_loggers


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for key in ("WANDB_API_KEY", "SWANLAB_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")


def log_two_steps(name: str, tmp_path):
    sink = MetricsSink(make_loggers([name], tmp_path, "offline-test"))
    for step in (1, 2):
        sink.finish(step, {"reward_mean": 0.25 * step, "loss": 0.1, "episodes": 4, "tokens": 40})
    sink.close()
    assert sink.errors == []


def test_wandb_offline_run_is_written(tmp_path):
    pytest.importorskip("wandb", reason="the wandb logger needs the 'wandb' extra")
    log_two_steps("wandb", tmp_path)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert runs, "wandb wrote no offline run"
    assert list(runs[0].glob("*.wandb")), "the offline run has no .wandb data file"


def test_swanlab_local_run_is_written(tmp_path):
    pytest.importorskip("swanlab", reason="the swanlab logger needs the 'swanlab' extra")
    log_two_steps("swanlab", tmp_path)
    files = [p for p in (tmp_path / "swanlog").rglob("*") if p.is_file()]
    assert files, "swanlab wrote nothing under swanlog/"


def test_a_missing_package_names_the_extra(tmp_path, monkeypatch):
    import sys

    from vibe_rl.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match=r"vibe-rl\[wandb\]"):
        make_loggers(["wandb"], tmp_path, "x")
