"""The training server: `app.build_app(ServerConfig)` and what it serves (see docs/architecture.md)."""
