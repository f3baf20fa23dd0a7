"""The light client a project's roll script uses; its public names are re-exported by `vibe_rl.swarm`."""
