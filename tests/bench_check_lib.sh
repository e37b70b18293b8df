# bench_check_lib.sh — sourced by the checks of the benchmark scripts (tests/check_bench_*.sh):
# `build` (PP_BUILD, absolute) and `root`, a scratch folder `tmp` removed on exit, the counters
# the summary line reports, and expect. The sourcing script prints its own summary line.
build=${PP_BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build=$root/$build ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0 failed=0 skipped=0

# expect WHAT CONDITION...: the condition (a command) holds.
expect() {
    what=$1
    shift
    if "$@"; then passed=$((passed + 1)); else
        echo "  FAIL $what"
        failed=$((failed + 1))
    fi
}
