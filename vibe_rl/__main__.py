"""`python -m vibe_rl ...` runs the command line (torchrun starts server ranks this way)."""

from vibe_rl.cli import main

if __name__ == "__main__":
    main()
