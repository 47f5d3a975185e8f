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

# Create .venv and install epochlog editable with the given extras ("", "spark" or "test").
# A stamp holding a hash of pyproject.toml and the extras skips pip when nothing changed.
epochlog_ensure_venv() {
    local extras="${1:-}" stamp want spec
    spec=".${extras:+[$extras]}"
    if [ ! -x "$EPOCHLOG_VENV/bin/python" ]; then
        epochlog_log "creating $EPOCHLOG_VENV"
        if ! python3 -m venv "$EPOCHLOG_VENV"; then
            if [ "$(id -u)" -eq 0 ]; then
                DEBIAN_FRONTEND=noninteractive apt-get update -qq
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
                rm -rf "$EPOCHLOG_VENV"
                python3 -m venv "$EPOCHLOG_VENV"
            else
                epochlog_log "python3 -m venv failed: install python3-venv"
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
