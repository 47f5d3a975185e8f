#!/usr/bin/env bash
# Set up the .venv and run epochlog's main job: `epochlog up` (a local cluster).
# Extra arguments go to `epochlog up`.
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$EPOCHLOG_ROOT"

epochlog_ensure_venv ""
epochlog_activate
exec epochlog up "$@"
