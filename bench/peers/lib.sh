# shellcheck shell=bash
# What the peers' end-to-end checks (bench/peers/*/test.sh) share: the kplace binary, a free
# UDP port, and waiting, with a bound, until the system under test listens on it. Sourced, not
# run.

# Prints the kplace binary the checks run: $KPLACE, else the repository's release build; fails,
# saying how to build it, when it is not there.
kplace_binary() {
    local bin
    bin="${KPLACE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/release/kplace}"
    [[ -x "$bin" ]] || { echo "$bin not found: cargo build --release --workspace" >&2; return 1; }
    echo "$bin"
}

# The radar graph whose scene the peers are sent and judged by, wherever a check runs from.
# shellcheck disable=SC2034  # used by the scripts that source this file
PEER_GRAPH="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/workloads/radar/graph.yaml"

# Prints a UDP port on 127.0.0.1 that nothing holds now, asking PYTHON.
free_udp_port() { # PYTHON
    "$1" -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until something listens on UDP PORT (it appears in /proc/net/udp), for 30 s at most.
# Fails, printing LOG, if process PID exits first; fails, saying so, on the timeout.
wait_for_udp_listener() { # PORT PID LOG
    local hex_port
    hex_port="$(printf ':%04X ' "$1")"
    for _ in $(seq 1 300); do
        grep -q "$hex_port" /proc/net/udp && return 0
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; return 1; }
        sleep 0.1
    done
    echo "nothing listened on UDP port $1 within 30 s" >&2
    cat "$3" >&2
    return 1
}
