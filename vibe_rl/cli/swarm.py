"""`vibe-rl swarm start|overwatch|status|stop`."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    swarm = typer.Typer(help="The swarm server (one per trainable model) and its monitor.", no_args_is_help=True)
    app.add_typer(swarm, name="swarm")
    from vibe_rl.cli.plot import register_plot

    register_plot(swarm)

    @swarm.command()
    def start(
        port: int = typer.Option(10086, "--port", min=0, max=65535, help="TCP port (0: any free port)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Bind address (loopback by default)."),
        config: str | None = typer.Option(None, "--config", help="TrainJob YAML: the job an empty start uses."),
        model: str | None = typer.Option(None, "--model", help="tiny|smollm2|PATH: overrides any synced job's model.path."),
        experiment_dir: str | None = typer.Option(None, "--experiment-dir", help="Overrides experiment.dir."),
        set_: list[str] = typer.Option([], "--set", help="key.sub=value overrides of any synced job (repeatable)."),
        boot: bool = typer.Option(False, "--boot", help="Start the engine now with --config's job."),
        token_file: str | None = typer.Option(None, "--token-file", help=(
            "Admin token file (read if it exists, else written 0600); default <experiment dir>/swarm.token.")),
        token: str | None = typer.Option(None, "--token", help=(
            "Admin token (visible in `ps`; prefer --token-file or VIBE_RL_SWARM_TOKEN).")),
        allowed_host: list[str] = typer.Option([], "--allowed-host", help=(
            "Extra Host/Origin name accepted besides the bind address and loopback (repeatable).")),
        incomplete_group_ttl: float = typer.Option(6 * 3600.0, "--incomplete-group-ttl", help=(
            "Seconds a task group may stay below grpo_n without a new episode before it is discarded (counted).")),
        header_timeout: float = typer.Option(10.0, "--header-timeout", help=(
            "Seconds a connection may take to send a request's headers (then it is closed): slow-header clients "
            "cannot hold connections open.")),
        max_episode_bytes: int = typer.Option(64 * 1024 * 1024, "--max-episode-bytes", help=(
            "Most request bytes the chat calls of one episode may add up to (stored with it); beyond: 413.")),
        max_episode_calls: int = typer.Option(4096, "--max-episode-calls", help=(
            "Most LLM calls of one episode; beyond: 413.")),
        prepared_timeout: float | None = typer.Option(None, "--prepared-timeout", help=(
            "Seconds a prepared episode (a multi-server end's first phase) waits for its commit or abort before "
            "this server asks its peers how the game's transaction ended (default: its idle timeout, at most 60).")),
        nproc_per_node: int = typer.Option(0, "--nproc-per-node", min=0, help=(
            "Processes (GPUs) on this node; 0: every GPU it sees (1 on CPU). Above 1, training is sharded (FSDP2).")),
        nnodes: int = typer.Option(1, "--nnodes", min=1, help="Nodes of a multi-node server (same command on each)."),
        node_rank: int = typer.Option(0, "--node-rank", min=0, help="This node's rank; node 0 serves HTTP."),
        master_addr: str = typer.Option("127.0.0.1", "--master-addr", help="Node 0's address for the rendezvous."),
        master_port: int = typer.Option(0, "--master-port", min=0, help=(
            "Rendezvous port on node 0; 0: a free port (one node only).")),
    ) -> None:
        """Serve episodes and train: OFFLINE until a client syncs a job (or --boot).

        Control calls and /episode/begin need the admin token; a SwarmClient on this machine finds it."""
        from pathlib import Path

        from pydantic import ValidationError

        from vibe_rl.cli import checks, ranks
        from vibe_rl.engine import distributed
        from vibe_rl.errors import ConfigError
        from vibe_rl.schema import TrainJob
        from vibe_rl.swarm.server.config import ServerConfig
        from vibe_rl.swarm.server.errors import ApiError

        for option, value, example in (("--config", config, "config.yaml"), ("--token-file", token_file, "swarm.token")):
            if value and Path(value).is_dir():
                raise ConfigError(f"{option} {value} is a folder; pass a file, e.g. {option} {Path(value) / example}.")
        checks.check_overrides(list(set_))  # a malformed or misspelt --set fails now, not when a client syncs
        try:
            base = TrainJob.from_yaml(config) if config else None
        except UnicodeDecodeError:
            raise ConfigError(f"--config {config} is not UTF-8 text. Save it as UTF-8 (e.g. iconv -f GBK -t UTF-8 "
                              f"{config} > job.yaml) and pass that file.") from None
        try:
            cfg = ServerConfig(host=host, port=port, base_job=base, boot_on_start=boot, model=model,
                               experiment_dir=experiment_dir, overrides=list(set_), token=token, token_file=token_file,
                               allowed_hosts=list(allowed_host), incomplete_group_ttl=incomplete_group_ttl,
                               header_timeout=header_timeout, max_episode_bytes=max_episode_bytes,
                               max_episode_calls=max_episode_calls, prepared_timeout=prepared_timeout)
        except ValidationError as exc:
            raise checks.option_error(exc, {"incomplete_group_ttl": "--incomplete-group-ttl", "port": "--port",
                                            "host": "--host", "token": "--token",
                                            "header_timeout": "--header-timeout",
                                            "max_episode_bytes": "--max-episode-bytes",
                                            "max_episode_calls": "--max-episode-calls",
                                            "prepared_timeout": "--prepared-timeout"}) from None
        if node_rank == 0 and not distributed.launched_by_torchrun():  # before the ranks start: rank 0 serves HTTP
            checks.check_port(host, port)
        role = ranks.start_ranks(nproc_per_node, nnodes, node_rank, master_addr, master_port,
                                 cpu=ranks.forces_cpu(list(set_), config))
        if role == ranks.WORKER_DONE:
            distributed.end_process()
        from vibe_rl.swarm.server.app import serve

        if base is not None:  # print the override notes up front, not only when a client syncs
            try:
                notes = cfg.effective_job(base)[1]
            except ApiError as exc:
                raise typer.BadParameter(exc.message, param_hint="--config") from None
            for note in notes:
                typer.echo(f"note: {note}")
        elif model or set_ or experiment_dir:
            typer.echo("note: --model/--set/--experiment-dir will override the job a client syncs")
        typer.echo(f"vibe-rl swarm server on http://{host}:{port} (OpenAI base URL http://{host}:{port}/v1)")
        try:
            serve(cfg)
        finally:
            ranks.finish(role)
        if role == ranks.DRIVER:
            distributed.end_process()

    @swarm.command()
    def overwatch(
        url: str = typer.Option("http://127.0.0.1:10086", "--url", help="Swarm server URL."),
        once: bool = typer.Option(False, "--once", help="Print one snapshot and exit."),
        interval: float = typer.Option(2.0, "--interval", min=0.1, help="Seconds between refreshes."),
    ) -> None:
        """Live view of a swarm server: state, step, pool, running episodes, tasks."""
        from vibe_rl.cli.checks import check_token_env, check_url
        from vibe_rl.swarm.observe.overwatch import run

        check_token_env()
        check_url(url)
        raise typer.Exit(run(url, once=once, interval=interval))

    @swarm.command()
    def ui(url: str = typer.Option("http://127.0.0.1:10086", "--url", help="Swarm server URL.")) -> None:
        """Print a one-time login link of the server's trace viewer (/control/ui) for a browser: opening it sets
        a session cookie (HttpOnly, SameSite=Strict); the admin token never goes into a URL."""
        import httpx

        from vibe_rl.cli.checks import check_token_env, check_url
        from vibe_rl.errors import SwarmError
        from vibe_rl.swarm.auth import client_token

        check_token_env()
        check_url(url)
        token = client_token(url)
        try:
            resp = httpx.post(url.rstrip("/") + "/control/login", timeout=30,
                              headers={"Authorization": f"Bearer {token}"} if token else {})
        except httpx.HTTPError as exc:
            raise SwarmError(f"Cannot reach the swarm server at {url} ({type(exc).__name__}). Is it running?") from None
        if resp.status_code != 200:
            raise SwarmError(f"{url} refused a login link ({resp.status_code}): "
                             f"{resp.json().get('error', {}).get('message', resp.text[:200])}")
        data = resp.json()
        typer.echo(f"open once in your browser (valid {data['expires_in_s']:.0f} s, one use): {data['login_url']}")

    @swarm.command()
    def status(url: str = typer.Option("http://127.0.0.1:10086", "--url", help="Swarm server URL.")) -> None:
        """Print the server's status JSON."""
        from vibe_rl.cli.checks import check_token_env, check_url
        from vibe_rl.swarm import SwarmClient

        check_token_env()
        check_url(url)
        with SwarmClient(url) as client:
            typer.echo(json.dumps(client.get_engine_status(), indent=2))

    @swarm.command()
    def stop(url: str = typer.Option("http://127.0.0.1:10086", "--url", help="Swarm server URL.")) -> None:
        """Stop the engine (the server keeps running, OFFLINE)."""
        from vibe_rl.cli.checks import check_token_env, check_url
        from vibe_rl.swarm import SwarmClient

        check_token_env()
        check_url(url)
        with SwarmClient(url) as client:
            typer.echo(json.dumps(client.stop_engine(), indent=2))
