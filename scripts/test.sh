#!/usr/bin/env bash
# Set-up plus the whole test suite. Extra arguments go to pytest.
# Two workers (VIBE_RL_TEST_WORKERS, 0 for one process): most end-to-end tests wait on subprocesses, so one
# process leaves a core of a 2-core machine idle; --dist loadfile keeps each file's tests (and their module-scoped
# servers) in one worker.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
WORKERS=${VIBE_RL_TEST_WORKERS:-2}
PARALLEL=()
if [ "$WORKERS" != "0" ]; then PARALLEL=(-n "$WORKERS" --dist loadfile); fi
exec .venv/bin/python -m pytest -q --durations=25 "${PARALLEL[@]}" "$@"
