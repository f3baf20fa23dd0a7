"""bf16 on a CPU pays only where the CPU multiplies it natively: elsewhere the engine says so and names the fix."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.engine import loader  # noqa: E402


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_without_native_bf16_is_served_with_a_warning_naming_float32(monkeypatch, caplog, native):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert loader.cpu_bf16_native() is native
    with caplog.at_level(logging.WARNING, logger="vibe_rl.engine.loader"):
        assert loader.resolve_dtype("bfloat16", "cpu") is torch.bfloat16  # asked for: served as asked
        assert loader.resolve_dtype("auto", "cpu") is torch.float32
    warned = [r.getMessage() for r in caplog.records]
    assert bool(warned) is not native
    if warned:
        assert "no native bf16" in warned[0] and "model.dtype: float32" in warned[0]


def test_the_probe_falls_back_to_the_kernels_cpu_flags(monkeypatch, tmp_path):
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.delattr(torch.cpu, name, raising=False)
    flags = tmp_path / "cpuinfo"
    monkeypatch.setattr(loader, "CPUINFO", flags)
    flags.write_text("flags\t\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert loader.cpu_bf16_native()
    flags.write_text("flags\t\t: fpu avx512f\n")
    assert not loader.cpu_bf16_native()
