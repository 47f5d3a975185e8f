# Shared setup for scripts/test.sh and scripts/demo.sh; source it, do not run it.
#
# Makes a fresh Debian machine (Python 3.11, pip, root in CI) ready: the Debian
# packages the tests drive (kcat, iperf3, ZooKeeper, chromium, iproute2 and iptables
# for `epochlog chaos`) and a .venv with epochlog installed editable.
# Every step checks first, so a second run costs well under a second.

EPOCHLOG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EPOCHLOG_VENV="${EPOCHLOG_VENV:-$EPOCHLOG_ROOT/.venv}"
# Debian packages the tests run as real components: command -> package.
# "what to check:package" — a command name, or an absolute path that must exist.
EPOCHLOG_DEBIAN_TOOLS=(
    "kcat:kcat"
    "iperf3:iperf3"
    "java:default-jre-headless"
    "/usr/share/java/zookeeper.jar:zookeeper"
    # The console's browser tests: headless chromium driven through chromedriver.
    "chromium:chromium"
    "chromedriver:chromium-driver"
    # epochlog chaos (tests/chaos): namespaces and veths, queues, partitions.
    "ip:iproute2"
    "tc:iproute2"
    "iptables:iptables"
)

epochlog_log() {
    echo "[setup] $*" >&2
}

# Install the Debian packages whose commands are missing (only as root).
epochlog_ensure_debian_tools() {
    local missing=() entry
    for entry in "${EPOCHLOG_DEBIAN_TOOLS[@]}"; do
        local check="${entry%%:*}"
        if [[ "$check" == /* ]]; then
            [ -e "$check" ] || missing+=("${entry#*:}")
        else
            command -v "$check" >/dev/null 2>&1 || missing+=("${entry#*:}")
        fi
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        epochlog_log "missing Debian packages: ${missing[*]}"
        epochlog_log "install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
        return 1
    fi
    epochlog_log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# A Java runtime for PySpark (`epochlog demo`): Debian's default-jre-headless, as root.
epochlog_ensure_java() {
    command -v java >/dev/null 2>&1 && return 0
    if [ "$(id -u)" -ne 0 ]; then
        epochlog_log "PySpark needs Java: sudo apt-get update && sudo apt-get install -y default-jre-headless"
        return 1
    fi
    epochlog_log "installing default-jre-headless (Java for PySpark)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null
}

# The interpreter the .venv is made from: $EPOCHLOG_PYTHON if set; else Debian's own
# /usr/bin/python3 when it is 3.11+ (built with PGO and LTO: Python calls run ~1.65x
# faster than a plain source build such as pyenv's); else the python3 on PATH.
epochlog_python() {
    if [ -n "${EPOCHLOG_PYTHON:-}" ]; then
        echo "$EPOCHLOG_PYTHON"
    elif [ -x /usr/bin/python3 ] \
        && /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo /usr/bin/python3
    else
        echo python3
    fi
}

# Create .venv and install epochlog editable with the given extras ("", "spark" or "test").
# A stamp holding a hash of pyproject.toml and the extras skips pip when nothing changed.
epochlog_ensure_venv() {
    local extras="${1:-}" stamp want spec python
    spec=".${extras:+[$extras]}"
    if [ ! -x "$EPOCHLOG_VENV/bin/python" ]; then
        python="$(epochlog_python)"
        epochlog_log "creating $EPOCHLOG_VENV from $python"
        if ! "$python" -m venv "$EPOCHLOG_VENV"; then
            if [ "$(id -u)" -eq 0 ]; then
                DEBIAN_FRONTEND=noninteractive apt-get update -qq
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
                rm -rf "$EPOCHLOG_VENV"
                "$python" -m venv "$EPOCHLOG_VENV"
            else
                epochlog_log "$python -m venv failed: install python3-venv"
                return 1
            fi
        fi
    fi
    want="$(sha256sum <"$EPOCHLOG_ROOT/pyproject.toml" | cut -d' ' -f1)"
    stamp="$EPOCHLOG_VENV/.epochlog-setup-${extras:-base}"
    if "$EPOCHLOG_VENV/bin/python" -c "import epochlog" 2>/dev/null; then
        [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
        # The test extras hold everything the demo needs: their stamp serves it too.
        [ "$extras" != test ] && [ -f "$EPOCHLOG_VENV/.epochlog-setup-test" ] \
            && [ "$(cat "$EPOCHLOG_VENV/.epochlog-setup-test")" = "$want" ] && return 0
    fi
    epochlog_log "pip install -e '$spec' into $EPOCHLOG_VENV"
    "$EPOCHLOG_VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$EPOCHLOG_ROOT${extras:+[$extras]}"
    echo "$want" >"$stamp"
}

# Put the venv first on PATH so `epochlog`, `pytest` and `ruff` are the project's.
epochlog_activate() {
    export VIRTUAL_ENV="$EPOCHLOG_VENV"
    export PATH="$EPOCHLOG_VENV/bin:$PATH"
}
