#!/usr/bin/env bash
# The GPU check's test executables as the GPU machine runs them, here: a bundle of the dev
# build (bench/gpu-bundle.sh --dev) copied to a temporary directory, its tests step
# (`bench/gpu-check.sh --step tests`) run from there in a private mount namespace where the
# workspace's target/ is an empty directory, so nothing of the build machine's paths can be
# read. Every executable must pass; without a GPU its GPU tests say `skipped:` (set
# KPLACE_REQUIRE_GPU=1 to fail on those too). Needs `unshare --mount` (root, or a user
# namespace); scripts/test.sh runs it after the test suite.
#
#   bench/gpu-bundle-dry-run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/kplace-bundle-dry-run.XXXXXX")
trap 'rm -rf "$work"' EXIT

bench/gpu-bundle.sh --dev "$work/built" 2> "$work/bundle.log" \
    || { cat "$work/bundle.log" >&2; echo "gpu-bundle-dry-run: building the dev bundle failed" >&2; exit 1; }
# The bundle as it arrives on the other machine: a copy, not the files cargo wrote.
cp -r "$work/built" "$work/bundle"
rm -rf "$work/built"
mkdir -p "$work/scratch/results" "$work/scratch/logs"

# Inside the namespace: target/ hidden under an empty tmpfs, then the check's own tests step.
# shellcheck disable=SC2016
inner='mount -t tmpfs -o size=1m,mode=0555 kplace-hidden "$1/target" &&
    ! ls "$1/target/debug" > /dev/null 2>&1 &&
    exec "$1/bench/gpu-check.sh" --step tests'
status=0
(
    cd "$work/scratch"
    GC_SCRATCH="$work/scratch" GC_BUNDLE="$work/bundle" GC_KPLACE="$work/bundle/bin/kplace" \
        GC_REQUIRE_GPU="${KPLACE_REQUIRE_GPU:-0}" KPLACE_WORKSPACE="$repo" \
        KPLACE_LIB_DIR="$work/bundle/lib" KPLACE_BIN="$work/bundle/bin/kplace" \
        timeout -k 5 600 unshare --mount --propagation private bash -c "$inner" inner "$repo"
) || status=$?
results=$work/scratch/results/tests.jsonl
if [ ! -s "$results" ]; then
    echo "gpu-bundle-dry-run: the tests step ran nothing (status $status)" >&2
    exit 1
fi
failed=0
while read -r name rc; do
    log=$work/scratch/logs/test-$name.txt
    passed=$(grep -Eo 'test result: ok\. [0-9]+ passed' "$log" | grep -Eo '[0-9]+' | head -n 1 || true)
    skipped=$(grep -c 'skipped: ' "$log" || true)
    if [ "$rc" -ne 0 ] || [ -z "$passed" ] || [ "$passed" -eq 0 ]; then
        echo "gpu-bundle-dry-run: $name FAILED (rc $rc) from the copied bundle:" >&2
        tail -n 40 "$log" >&2
        failed=$((failed + 1))
    else
        echo "gpu-bundle-dry-run: $name: $passed passed ($skipped skipped for want of a GPU)"
    fi
done < <(python3 -c 'import json, sys
for line in open(sys.argv[1]): row = json.loads(line); print(row["test"], row["rc"])' "$results")
total=$(wc -l < "$results")
echo "gpu-bundle-dry-run: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
