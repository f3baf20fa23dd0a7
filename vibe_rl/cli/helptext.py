"""What `--help` shows besides each option's own help: the default of every option (flags say 'off', options
without a value say what is used instead) and examples for every command. Applied to the click command tree
that typer builds, so a new option without a default text is caught by tests/test_cli_bad_input.py."""

from __future__ import annotations

from typing import Any

# (command path, option) -> what is used when the option is not given (options whose default is None)
DEFAULTS = {
    ("new", "--spec-file"): "none: the spec is the argument",
    ("new", "--plan"): "none: plan the spec",
    ("new", "--out"): "generated/<slug>",
    ("new", "--name"): "from the spec",
    ("new", "--family"): "matched from the spec's keywords",
    ("run", "--mode"): "the project's first mode",
    ("run", "--until"): "first-step",
    ("run", "--timeout"): "1800",
    ("run", "--set"): "none",
    ("run", "--model"): "the tiny model on CPU, the spec's model on GPUs",
    ("play", "--task"): "any",
    ("play", "--mode"): "the project's first mode",
    ("init", "--name"): "the folder name",
    ("swarm start", "--prepared-timeout"): "the episode's idle timeout, at most 60 s",
    ("eval", "--checkpoints"): "initial latest",
    ("eval", "--opponents"): "the rows' checkpoints",
    ("eval", "--side"): "the role wired to the trainable server",
    ("eval", "--mode"): "the project's first mode",
    ("eval", "--experiment-dir"): "the config's experiment.dir",
    ("eval", "--model"): "the config's model.path",
    ("eval", "--set"): "none",
    ("eval", "--max-tokens"): "the config's rollout.max_tokens",
    ("eval", "--work-dir"): "a new temporary folder (kept)",
    ("eval", "--out"): "none",
    ("export", "--base"): "the base recorded in the checkpoint",
    ("schema taskspec", "--out"): "stdout",
    ("swarm start", "--config"): "none: the job a client syncs",
    ("swarm start", "--model"): "the job's model.path",
    ("swarm start", "--experiment-dir"): "the job's experiment.dir",
    ("swarm start", "--token-file"): "<experiment dir>/swarm.token",
    ("swarm start", "--token"): "none: read or write --token-file",
    ("swarm start", "--set"): "none",
    ("swarm start", "--allowed-host"): "none",
    ("swarm plot", "--out"): "EXPERIMENT_DIR/curves.png",
    ("traces export", "--out"): "stdout",
    ("skills install", "--source"): "this checkout",
}

EXAMPLES = {
    "new": ['vibe-rl new "who is spy, 4 players, batch 8" --dry-run --json > plan.json',
            "vibe-rl new --spec-file my_spec.md --out my_game",
            "vibe-rl new --plan plan.json --out my_game --force"],
    "doctor": ["vibe-rl doctor generated/who_is_spy", "vibe-rl doctor my_game --json"],
    "run": ["vibe-rl run my_game                          (until the first weight update)",
            "vibe-rl run my_game --until steps:10 --stop --set train.lr=1e-5",
            "vibe-rl run my_game --model smollm2 --until first-signal   (a real model on CPU)",
            "vibe-rl run my_game --detach && vibe-rl status my_game --wait 300",
            "vibe-rl run my_game --stop                   (end the project's tmux sessions)"],
    "status": ["vibe-rl status my_game", "vibe-rl status my_game --wait 300"],
    "play": ["vibe-rl play my_game --device cpu", "vibe-rl play my_game --task 7-0 --mode agent_roll"],
    "eval": ["vibe-rl eval my_game --checkpoints initial 20 40 latest --games 40",
             "vibe-rl eval my_game -c initial,latest -n 16 --json --out crossplay.json",
             "vibe-rl eval my_game -c latest --opponents initial,10,20   (one row against older opponents)",
             "vibe-rl eval my_game -c initial latest --model tiny --set model.device=cpu --max-tokens 16"],
    "init": ["vibe-rl init my_game", "vibe-rl init games/race --name race_game"],
    "export": ["vibe-rl export my_game/experiments/server1/checkpoints/step_000005 exported_model",
               "vibe-rl export CKPT merged_model --merge-lora --base /models/Qwen2.5-7B-Instruct"],
    "model tiny": ["vibe-rl model tiny /tmp/tiny_model"],
    "model smollm2": ["vibe-rl model smollm2                        (into the cache model.path: smollm2 uses)",
                      "vibe-rl model smollm2 /tmp/smollm2"],
    "schema taskspec": ["vibe-rl schema taskspec --out taskspec.schema.json"],
    "skills install": ["vibe-rl skills install", "vibe-rl skills install --agent claude-code --global"],
    "swarm start": ["vibe-rl swarm start --port 10086 --config my_game/config.yaml",
                    "vibe-rl swarm start --port 0 --model tiny --set train.batch_size=2 --boot"],
    "swarm ui": ["vibe-rl swarm ui --url http://127.0.0.1:10086"],
    "swarm overwatch": ["vibe-rl swarm overwatch --url http://127.0.0.1:10086",
                        "vibe-rl swarm overwatch --url http://127.0.0.1:10086 --once"],
    "swarm status": ["vibe-rl swarm status --url http://127.0.0.1:10086"],
    "swarm stop": ["vibe-rl swarm stop --url http://127.0.0.1:10086"],
    "swarm plot": ["vibe-rl swarm plot my_game/experiments/server1",
                   "vibe-rl swarm plot my_game/experiments/server1 --out reward.svg --json"],
    "traces serve": ["vibe-rl traces serve my_game/experiments/server1 --port 8765"],
    "traces export": ["vibe-rl traces export my_game/experiments/server1 --out episodes.jsonl"],
    "": ["vibe-rl new \"who is spy, 8 GPUs, batch 16\" --out my_game",
         "vibe-rl doctor my_game && vibe-rl run my_game --detach", "vibe-rl status my_game --wait 300",
         "vibe-rl COMMAND --help   (every command has examples)"],
    "swarm": ["vibe-rl swarm start --port 10086 --config my_game/config.yaml",
              "vibe-rl swarm overwatch --url http://127.0.0.1:10086"],
    "traces": ["vibe-rl traces serve my_game/experiments/server1"],
    "model": ["vibe-rl model tiny /tmp/tiny_model", "vibe-rl model smollm2"],
    "skills": ["vibe-rl skills install"],
    "schema": ["vibe-rl schema taskspec"],
}


def commands(command: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, command) of a click command tree, groups included; the root's path is ''."""
    out = [(path, command)]
    for name, sub in (getattr(command, "commands", None) or {}).items():
        out += commands(sub, f"{path} {name}".strip())
    return out


def options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and p.name != "help"]


def polish(root: Any) -> Any:
    """Give every option a shown default and every command its examples (in place); returns `root`."""
    for path, command in commands(root):
        for opt in options(command):
            long = max(opt.opts, key=len)
            if (path, long) in DEFAULTS:
                opt.show_default = DEFAULTS[(path, long)]
            elif opt.is_flag and opt.default is False and not opt.is_eager:  # not --version
                opt.show_default = "off"
        if path in EXAMPLES and not command.epilog:
            command.epilog = "Examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[path])
    return root
