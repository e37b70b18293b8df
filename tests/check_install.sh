#!/bin/sh
# check_install.sh — `make install` into a temporary folder, then `ppsched check` on every
# installed schedule from that folder: a schedule that names a file (csv.yaml names explicit.csv)
# must find it installed beside it. Run by make test (PP_BUILD names the build folder); prints
# the summary line tests/run_tests.sh reads.
build=${PP_BUILD:-build}
dest=$(mktemp -d)
passed=0 failed=0
if ! make -s --no-print-directory install BUILD="$build" DESTDIR="$dest" PREFIX=/usr >/dev/null; then
    echo "  FAIL make install"
    failed=1
fi
for y in "$dest"/usr/share/ppsched/schedules/*.yaml; do
    [ -f "$y" ] || continue
    if "$dest/usr/bin/ppsched" check "$y" >/dev/null 2>"$dest/err"; then
        passed=$((passed + 1))
    else
        echo "  FAIL installed $(basename "$y"): $(cat "$dest/err")"
        failed=$((failed + 1))
    fi
done
[ "$passed" -gt 0 ] || { echo "  FAIL no schedule installed"; failed=$((failed + 1)); }
rm -rf "$dest"
echo "check_install: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
