"""Checks the commands make before they start anything: a port that can be bound, environment variables that
hold something usable, pydantic errors of a command's own options turned into one line naming the option."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from pydantic import ValidationError

from vibe_rl.errors import SECRET_FIELD, ConfigError, field_errors


def check_port(host: str, port: int, port_option: str = "--port", host_option: str = "--host") -> None:
    """Refuse, before serving, a port that is taken or not allowed and a host that is no address of this machine."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"{host_option} {host!r} is not an address or a host name this machine can resolve "
                          f"({exc}). Use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface).") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT does not count
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"{port_option} {port} on {host} is in use by another process. Stop it (`ss -ltnp "
                                  f"| grep :{port}` shows which) or pick another {port_option} (0: any free port)."
                                  ) from None
            if exc.errno == errno.EACCES:
                raise ConfigError(f"{port_option} {port}: ports below 1024 need root. Pick a port from 1024 to "
                                  "65535.") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"{host_option} {host} is not an address of this machine. Use 127.0.0.1 (this "
                                  "machine only) or 0.0.0.0 (every interface).") from None
            raise ConfigError(f"Cannot listen on {host}:{port} ({exc.strerror or exc}). Check {host_option} and "
                              f"{port_option}.") from None


def check_token_env() -> None:
    """VIBE_RL_SWARM_TOKEN set to blanks, or VIBE_RL_SWARM_TOKEN_FILE naming no readable token, would be sent (or
    not) silently and end in a bare 401; say which variable is wrong instead."""
    from vibe_rl.swarm.auth import ENV_TOKEN, ENV_TOKEN_FILE

    token = os.environ.get(ENV_TOKEN)
    if token is not None and token != "" and not token.strip():
        raise ConfigError(f"{ENV_TOKEN} is set but holds only spaces. Unset it (`unset {ENV_TOKEN}`: the token is "
                          "then found on this machine) or set it to the server's admin token.")
    path = os.environ.get(ENV_TOKEN_FILE)
    if path:
        file = Path(path)
        if not file.is_file():
            what = "a folder" if file.is_dir() else "missing"
            raise ConfigError(f"{ENV_TOKEN_FILE}={path} is {what}. Point it at the server's token file "
                              f"(<experiment dir>/swarm.token) or unset it.")
        try:
            text = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{ENV_TOKEN_FILE}={path} cannot be read ({exc}). Point it at the server's token "
                              "file (<experiment dir>/swarm.token) or unset it.") from None
        if not text:
            raise ConfigError(f"{ENV_TOKEN_FILE}={path} is empty. Point it at the server's token file "
                              "(<experiment dir>/swarm.token) or unset it.")


def check_url(url: str, option: str = "--url") -> None:
    """A server URL must be http(s)://host[:port]; a bare host:port or a blank value is named with the fix."""
    from urllib.parse import urlparse

    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"{option} {url!r} is not a server URL. Pass it with its scheme, e.g. {option} "
                          "http://127.0.0.1:10086 (what `vibe-rl swarm start` prints).")
    try:
        _ = parsed.port
    except ValueError:
        raise ConfigError(f"{option} {url!r} has an invalid port. Use a port from 1 to 65535, e.g. {option} "
                          "http://127.0.0.1:10086.") from None


def option_error(exc: ValidationError, options: dict[str, str]) -> ConfigError:
    """The first error of a config built from command-line options, as 'OPTION VALUE: what is wrong'."""
    err = exc.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    option = options.get(field, field)
    shown = "" if SECRET_FIELD.search(field) else f" {err.get('input')!r}"  # a secret is never echoed
    return ConfigError(f"{option}{shown}: {err['msg'][0].lower() + err['msg'][1:]}. See --help for its meaning.")


def check_project(project: Path) -> None:
    """A project argument must be a folder holding task_spec.json; say which of the two it is not."""
    from vibe_rl.schema.spec import SPEC_FILE

    if project.is_file():
        raise ConfigError(f"{project} is a file; pass the project folder that holds it, e.g. {project.resolve().parent}.")
    if not project.is_dir():
        raise ConfigError(f"{project} does not exist. Pass a project folder (made by `vibe-rl new` or `vibe-rl init`).")
    if not (project / SPEC_FILE).is_file():
        raise ConfigError(f"{project} has no {SPEC_FILE}, so it is not a vibe-rl project. Pass the project folder, "
                          f"re-create it with `vibe-rl new`, or write one (`vibe-rl schema taskspec` shows its fields).")
    check_spec(project)


def check_spec(project: Path) -> None:
    """task_spec.json must be a valid TaskSpec without unknown keys (a misspelt one would be dropped silently);
    one line names what is wrong and how to find the rest."""
    import json

    from vibe_rl.config import unknown_keys
    from vibe_rl.schema.spec import SPEC_FILE, TaskSpec

    path = project / SPEC_FILE
    fix = (f"Fix it (`vibe-rl doctor {project}` lists every problem, `vibe-rl schema taskspec` every field) or "
           "re-create the project with `vibe-rl new`.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text. {fix}") from None
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}). {fix}") from None
    try:
        TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path} is not a valid TaskSpec: {field_errors(exc)}. {fix}") from None
    unknown = unknown_keys(TaskSpec, data)
    if unknown:
        raise ConfigError(f"{path} has unknown key(s): {', '.join(unknown[:10])} (misspelt? they would be "
                          f"ignored and their defaults used). {fix}")


def check_overrides(overrides: list[str], option: str = "--set") -> None:
    """`key.sub=value` items of a TrainJob, checked before anything starts: the '=', the key's spelling, and a
    value of the field's type (checks between fields are left to the job, which also has the config's values)."""
    from vibe_rl.config import apply_overrides, unknown_keys, unknown_keys_message
    from vibe_rl.schema import TrainJob

    data: dict = {}
    for item in overrides:
        try:
            apply_overrides(data, [item])
        except ConfigError as exc:
            raise ConfigError(f"{option} {item!r}: {exc}") from None
    unknown = unknown_keys(TrainJob, data)
    if unknown:
        raise ConfigError(unknown_keys_message(TrainJob, unknown, f" in {option}"))
    keys = {item.split("=", 1)[0].strip(): item for item in overrides}
    try:
        TrainJob.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(part) for part in err["loc"])
            if where in keys:
                raise ConfigError(f"{option} {keys[where]!r}: {err['msg']}. `vibe-rl swarm start --help` and "
                                  "docs/client.md ('The job') list the keys and their types.") from None
