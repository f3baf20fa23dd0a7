"""Helpers shared by the test folders, imported as `helpers.<module>`: tests/ is on sys.path because pytest
imports the rootdir tests/conftest.py (no __init__.py beside it) with its folder prepended."""
