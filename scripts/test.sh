#!/usr/bin/env bash
# Set up (Debian tools, .venv) and run the whole check: ruff, then pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/crash -x`.
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$EPOCHLOG_ROOT"

epochlog_ensure_debian_tools
epochlog_ensure_venv test
epochlog_activate

echo "== ruff check src tests bench"
ruff check src tests bench
echo "== ruff format --check src tests bench"
ruff format --check src tests bench

echo "== pytest"
rc=0
# Three workers, one test file each at a time (module fixtures stay shared): with two,
# the cores sat idle a fifth of the run while tests waited on broker, Spark and
# ZooKeeper processes. EPOCHLOG_TEST_WORKERS=0 runs serially.
python -m pytest -n "${EPOCHLOG_TEST_WORKERS:-3}" --dist loadfile "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$rc"
