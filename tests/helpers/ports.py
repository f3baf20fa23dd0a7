"""A free loopback TCP port for a server a test starts (the package's own helper, under its old name here)."""

from __future__ import annotations

from vibe_rl.swarm.launch import free_port  # noqa: F401  (imported by the tests as helpers.ports.free_port)
