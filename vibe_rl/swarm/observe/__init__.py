"""Seeing training: per-update metrics and their loggers, curves, the trace reader and viewer, overwatch."""
