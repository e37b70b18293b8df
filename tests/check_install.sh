#!/bin/sh
# check_install.sh — `make install` into a temporary folder, then `ppsched check` on every
# installed schedule from that folder: a schedule that names a file (csv.yaml names explicit.csv)
# must find it installed beside it. The measured profiles are installed beside the schedules, as
# in the tree: 1f1b.yaml's `profile: ../profiles/h100.yaml`, uncommented, calibrates a run made
# from another folder, and so does every other installed profile named the same way. Run by make
# test (PP_BUILD names the build folder); prints the summary line tests/run_tests.sh reads.
build=${PP_BUILD:-build}
# The schedules are checked as files, not against this machine's GPUs: hide them, so that a
# 4-device schedule passes `check` on a 1-GPU machine as it does on one without a GPU.
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES
dest=$(mktemp -d)
passed=0 failed=0
if ! make -s --no-print-directory install BUILD="$build" DESTDIR="$dest" PREFIX=/usr >/dev/null; then
    echo "  FAIL make install"
    failed=1
fi
share=$dest/usr/share/ppsched
for y in "$share"/schedules/*.yaml; do
    [ -f "$y" ] || continue
    if "$dest/usr/bin/ppsched" check "$y" >/dev/null 2>"$dest/err"; then
        passed=$((passed + 1))
    else
        echo "  FAIL installed $(basename "$y"): $(cat "$dest/err")"
        failed=$((failed + 1))
    fi
done
[ "$passed" -gt 0 ] || { echo "  FAIL no schedule installed"; failed=$((failed + 1)); }

# The profile 1f1b.yaml's comment names, and every installed one, read through the schedules'
# folder from elsewhere (/): the run says it was calibrated.
if ! grep -q '^  # profile: \.\./profiles/h100\.yaml' "$share/schedules/1f1b.yaml"; then
    echo "  FAIL the installed 1f1b.yaml no longer names ../profiles/h100.yaml"
    failed=$((failed + 1))
fi
n_profiles=0
for f in "$share"/profiles/*.yaml; do
    [ -f "$f" ] || continue
    n_profiles=$((n_profiles + 1))
    name=$(basename "$f")
    sed "s|^  # profile: \.\./profiles/h100\.yaml|  profile: ../profiles/$name|" \
        "$share/schedules/1f1b.yaml" >"$share/schedules/with-profile.yaml"
    if (cd / && "$dest/usr/bin/ppsched" --simulate "$share/schedules/with-profile.yaml") \
        >"$dest/out" 2>"$dest/err" &&
        grep -q '^# cost model: .* calibrated by the profile' "$dest/out"; then
        passed=$((passed + 1))
    else
        echo "  FAIL the installed schedules do not reach ../profiles/$name: $(cat "$dest/err")"
        failed=$((failed + 1))
    fi
done
[ -f "$share/profiles/h100.yaml" ] ||
    { echo "  FAIL profiles/h100.yaml not installed"; failed=$((failed + 1)); }
[ "$n_profiles" -gt 0 ] || { echo "  FAIL no profile installed"; failed=$((failed + 1)); }
rm -rf "$dest"
echo "check_install: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
