#!/usr/bin/env bash
# Set up what the demo needs on a fresh machine (a Java runtime for PySpark, a .venv
# with epochlog and its `spark` extra: pyspark and pandas) and run epochlog's main job,
# `epochlog demo`: a local 3-broker cluster, a PySpark streaming pipeline into parquet,
# and an unclean leader election in the middle of it. Extra arguments go to
# `epochlog demo` (e.g. --on-truncation earliest, --duration 90, --quick).
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$EPOCHLOG_ROOT"

epochlog_ensure_java
epochlog_ensure_venv spark
epochlog_activate
exec epochlog demo "$@"
