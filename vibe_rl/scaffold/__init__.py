"""Templates -> projects (render) and static checks of projects (doctor)."""

from vibe_rl.scaffold.families import Manifest, list_families, load_family, templates_root
from vibe_rl.scaffold.render import render_files, render_project

__all__ = ["Manifest", "list_families", "load_family", "render_files", "render_project", "templates_root"]
