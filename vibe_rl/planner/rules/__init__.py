"""Offline planner rules, one module per template family: `vibe_rl.planner.rules.<family>.build(facts, manifest)`.

Adding a family = a folder under templates/ plus a module here whose `build` returns a TaskSpec.
"""
