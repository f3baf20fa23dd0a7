"""RL building blocks: samples from recorded turns, GRPO advantages, the policy-gradient loss, SFT.

Light to import; torch is imported inside the functions that need it.
"""
