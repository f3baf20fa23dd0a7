#!/usr/bin/env bash
# Set-up plus the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest -q --durations=25 "$@"
