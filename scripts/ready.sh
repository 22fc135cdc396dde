# shellcheck shell=bash
# wait_ready FILE PID: waits (at most 60 s) until `kplace run --ready-file FILE`, running as
# PID, says it takes packets; fails at once if PID exits first. Sourced by the scripts that
# start a receiver and then its sender.
wait_ready() {
    local file=$1 pid=$2
    for _ in $(seq 600); do
        [ -f "$file" ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -f "$file" ] || { echo "the receiver (pid $pid) did not become ready" >&2; return 1; }
}
