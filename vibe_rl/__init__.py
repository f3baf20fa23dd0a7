"""vibe-rl: from an RL idea to a running GRPO training in minutes."""

__version__ = "0.1.0"
