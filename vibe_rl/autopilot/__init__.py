"""The autopilot: tmux sessions in uv venvs, a watcher that diagnoses failures,
a trace audit of player -> model routing, and an LLM fix loop (`vibe-rl run`)."""
