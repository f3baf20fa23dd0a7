"""Names and ports that belong to one project, so two projects of one family never collide.

A project is identified by its resolved folder: `key(dir)` is a 4-hex-digit hash of that path.
- tmux sessions: `<short_name>-<key>-swarm-server[-N]` and `<short_name>-<key>-swarm-client`.
- default ports: the spec's port plus an offset derived from the same hash (a multiple of 10, below
  2000), so a project keeps its ports from run to run while another project of the family gets others.
  A port that is still busy when the servers start moves to the next free one, and the run says so.
"""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

from vibe_rl.errors import ConfigError
from vibe_rl.schema.spec import TaskSpec

PORT_SPAN = 200  # offsets 0, 10, ..., 1990: room for ten servers per project
PORT_SEARCH = 50  # ports tried past a busy one before giving up


def key(project_dir: Path) -> str:
    """Four hex digits that tell this project folder from any other on the machine."""
    return hashlib.sha1(str(Path(project_dir).resolve()).encode()).hexdigest()[:4]


def prefix(spec: TaskSpec, project_dir: Path) -> str:
    return f"{spec.short_name}-{key(project_dir)}"


def server_session(spec: TaskSpec, project_dir: Path, server: str) -> str:
    """`spy-3f2a-swarm-server` for the first server, `spy-3f2a-swarm-server-2` for the second, ..."""
    index = [s.name for s in spec.servers].index(spec.server(server).name)
    return f"{prefix(spec, project_dir)}-swarm-server" + (f"-{index + 1}" if index else "")


def client_session(spec: TaskSpec, project_dir: Path) -> str:
    return f"{prefix(spec, project_dir)}-swarm-client"


def all_sessions(spec: TaskSpec, project_dir: Path) -> list[str]:
    """Every session this project may own (all modes' servers, then the client)."""
    return [server_session(spec, project_dir, s.name) for s in spec.servers] + [client_session(spec, project_dir)]


def default_port(spec_port: int, project_dir: Path) -> int:
    """The spec's port moved by this project's own offset (stable across runs of the project)."""
    offset = (int(key(project_dir), 16) % PORT_SPAN) * 10
    port = spec_port + offset
    return port if port <= 65535 else spec_port


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def next_free_port(port: int, taken: set[int] = frozenset()) -> int:
    """`port` if it is free (and not in `taken`), else the next free one above it."""
    for candidate in range(port, min(port + PORT_SEARCH, 65536)):
        if candidate not in taken and port_free(candidate):
            return candidate
    raise ConfigError(f"Ports {port}-{port + PORT_SEARCH - 1} are all in use: stop what listens there "
                      f"(`ss -ltnp`), or set another port for the server in task_spec.json.")
