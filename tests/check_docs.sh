#!/bin/sh
# check_docs.sh — the README against the binary that make built (PP_BUILD names its folder).
#
# Every fenced block of README.md that shows a command (a line starting "$ ") is marked on the
# line before its fence, and the mark says how it is kept true:
#   <!-- checked: make readme -->
#       re-run here. Each "$ " line is a command (with its "\" continuation lines, and its
#       here-document when it ends in <<'WORD'); the lines under it, up to the next command, are
#       what it prints on standard output (a command shows its errors with 2>&1). The commands
#       of a block run in order under sh, in a scratch folder that holds schedules/, profiles/
#       and tests/ of this tree, with ppsched from the build first on PATH, no GPU visible
#       (CUDA_VISIBLE_DEVICES=), no PPSCHED_* variable and LC_ALL=C: the same text on the CUDA
#       build and the CPU-only one, on any machine.
#   <!-- measured: DEVICE, YYYY-MM-DD, commit HASH -->
#       a GPU run's transcript, kept as it was measured; the paragraph before it must name the
#       same device, date and commit, so that a reader sees where the numbers come from.
# A block with a command and neither mark fails. So does the shipped 1f1b.yaml when the kinds
# its comment lists are not the ones the reader accepts.
#
# check_docs.sh           check: a diff for each stale block, then the summary line that
#                         tests/run_tests.sh reads ("check_docs: N passed, N failed, N skipped")
# check_docs.sh --write   (make readme) rewrite the stale blocks of README.md in place
#
# Figures that change from run to run (plan's search time) compare as wildcards, and --write
# leaves a block as it stands when nothing else in it changed.
build=${PP_BUILD:-build}
mode=check
[ "${1:-}" = --write ] && mode="write"
root=$(cd "$(dirname "$0")/.." && pwd)
readme=$root/README.md
case $build in /*) bindir=$build ;; *) bindir=$root/$build ;; esac
if [ ! -x "$bindir/ppsched" ]; then
    echo "  FAIL $bindir/ppsched is not built"
    echo "check_docs: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

# What differs from one run to the next, blanked in both texts before they are compared.
normalize() {
    sed 's/^\(# searched .* candidates in \)[0-9.]* s:/\1_ s:/' "$1"
}

# --- split README.md into its marked blocks -----------------------------------------------------
# For the i-th checked block: $tmp/b<i>.old (its lines), $tmp/b<i>.c<j>.show and .run (the j-th
# command as shown, and as sh runs it, without the "$ "), a line "i first last fence n" in
# $tmp/blocks (its line range in README.md, the fence's line, its command count). Problems with
# the marks go to $tmp/problems, one a line; measured blocks that pass count in $tmp/measured.
awk -v T="$tmp" '
function problem(msg) { print "README.md:" fence ": " msg > (T "/problems") }
function flush_checked(   k, j, l, show, run, word) {
    nb++
    for (k = 1; k <= n; k++) print L[k] > (T "/b" nb ".old")
    close(T "/b" nb ".old")
    j = 0
    for (k = 1; k <= n; k++) {
        l = L[k]
        if (substr(l, 1, 2) != "$ ") {
            if (j == 0) { problem("a checked block must start with a \"$ \" command"); return }
            continue
        }
        j++
        show = l; run = substr(l, 3)
        while (l ~ /\\$/ && k < n) { k++; l = L[k]; show = show "\n" l; run = run "\n" l }
        if (match(run, /<<\047?[A-Za-z_]+\047?[ \t]*$/)) {
            word = substr(run, RSTART + 2, RLENGTH - 2)
            gsub(/[\047 \t]/, "", word)
            while (k < n) {
                k++; l = L[k]; show = show "\n" l; run = run "\n" l
                if (l == word) break
            }
        }
        print show > (T "/b" nb ".c" j ".show"); close(T "/b" nb ".c" j ".show")
        print run > (T "/b" nb ".c" j ".run"); close(T "/b" nb ".c" j ".run")
    }
    print nb, first, NR - 1, fence, j > (T "/blocks")
}
function check_measured(   m, d, c, dev, k, before, date, hash) {
    m = mark
    date = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
    hash = "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]+"
    if (m !~ ("^<!-- measured: [^,]+, " date ", commit " hash " -->$")) {
        problem("a measured mark reads <!-- measured: DEVICE, YYYY-MM-DD, commit HASH -->")
        return
    }
    sub(/^<!-- measured: /, "", m); sub(/ -->$/, "", m)
    c = m; sub(/.*, commit /, "", c)
    d = m; sub(/, commit .*/, "", d); sub(/.*, /, "", d)
    dev = m; sub(/, [0-9-]+, commit .*/, "", dev)
    before = ""
    for (k = fence - 20; k < fence - 1; k++) if (k > 0) before = before " " P[k]
    gsub(/\n/, " ", before)
    if (index(before, dev) == 0 || index(before, d) == 0 || index(before, c) == 0)
        problem("the paragraph before a measured transcript must name its device (" dev \
                "), date (" d ") and commit (" c ")")
    else print fence > (T "/measured")
}
{ P[NR] = $0 }
!inblock && /^```/ { inblock = 1; fence = NR; first = NR + 1; n = 0; mark = P[NR - 1]; next }
inblock && /^```/ {
    inblock = 0
    has_cmd = 0
    for (k = 1; k <= n; k++) if (substr(L[k], 1, 2) == "$ ") has_cmd = 1
    if (mark ~ /^<!-- checked/) flush_checked()
    else if (mark ~ /^<!-- measured/) check_measured()
    else if (has_cmd)
        problem("a transcript needs <!-- checked: make readme --> or " \
                "<!-- measured: DEVICE, YYYY-MM-DD, commit HASH --> on the line before it")
    next
}
inblock { L[++n] = $0 }
' "$readme"

if [ -s "$tmp/problems" ]; then
    sed 's/^/  FAIL /' "$tmp/problems"
    failed=$((failed + $(wc -l <"$tmp/problems")))
fi
[ -f "$tmp/measured" ] && passed=$((passed + $(wc -l <"$tmp/measured")))

# --- run each checked block ---------------------------------------------------------------------
# The commands see what a user of this tree sees, and nothing of this machine: the scratch
# folder's schedules/, profiles/ and tests/ are this tree's; what they write stays there.
for v in $(env | sed -n 's/^\(PPSCHED_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
CUDA_VISIBLE_DEVICES=
LC_ALL=C
PATH=$bindir:$PATH
export CUDA_VISIBLE_DEVICES LC_ALL PATH

# A command that hangs fails its block after two minutes instead of holding make test.
bound=
command -v timeout >/dev/null 2>&1 && bound="timeout 120"
changed=0
[ -f "$tmp/blocks" ] || : >"$tmp/blocks"
while read -r i _first _last fence n; do
    work=$tmp/w$i
    mkdir "$work"
    for d in schedules profiles tests; do ln -s "$root/$d" "$work/$d"; done
    : >"$tmp/b$i.new"
    : >"$tmp/b$i.err"
    j=1
    while [ "$j" -le "$n" ]; do
        cat "$tmp/b$i.c$j.show" >>"$tmp/b$i.new"
        # shellcheck disable=SC2086
        (cd "$work" && $bound sh "$tmp/b$i.c$j.run") <"/dev/null" >"$tmp/out" 2>>"$tmp/b$i.err"
        cat "$tmp/out" >>"$tmp/b$i.new"
        # Output without a final newline still ends its line in the block.
        [ -s "$tmp/out" ] && [ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" != '\n' ] &&
            echo >>"$tmp/b$i.new"
        j=$((j + 1))
    done
    normalize "$tmp/b$i.old" >"$tmp/old.n"
    normalize "$tmp/b$i.new" >"$tmp/new.n"
    if cmp -s "$tmp/old.n" "$tmp/new.n"; then
        passed=$((passed + 1))
        cp "$tmp/b$i.old" "$tmp/b$i.out"
    elif [ "$mode" = write ]; then
        changed=$((changed + 1))
        echo "README.md:$fence: rewritten"
        cp "$tmp/b$i.new" "$tmp/b$i.out"
    else
        failed=$((failed + 1))
        echo "  FAIL README.md:$fence: the transcript differs from what the commands print now" \
            "(make readme rewrites it; - README, + now):"
        diff -u "$tmp/old.n" "$tmp/new.n" | sed -n '3,$p' | head -40 | sed 's/^/    /'
        [ -s "$tmp/b$i.err" ] && sed 's/^/    stderr: /' "$tmp/b$i.err" | head -10
    fi
done <"$tmp/blocks"

if [ "$mode" = write ]; then
    if [ "$changed" -gt 0 ]; then
        # Each checked block's lines replaced by $tmp/b<i>.out; every other line as it was.
        awk -v T="$tmp" '
            BEGIN { while ((getline l < (T "/blocks")) > 0) {
                        split(l, f, " "); start[f[2]] = f[1]; stop[f[1]] = f[3] } }
            FNR in start { i = start[FNR]; skip = stop[i]
                           while ((getline l < (T "/b" i ".out")) > 0) print l
                           next }
            FNR <= skip { next }
            { print }
        ' "$readme" >"$tmp/README.md" && cat "$tmp/README.md" >"$readme"
    fi
    echo "readme: $changed block(s) rewritten, $passed as they were, $failed problem(s)"
    [ "$failed" -eq 0 ]
    exit
fi

# --- the shipped schedule's comment lists every kind ---------------------------------------------
# The kinds the reader accepts, from its own refusal of an unknown one.
allowed=$("$bindir/ppsched" check "$root/schedules/1f1b.yaml" --set schedule.kind=none-such 2>&1 |
    sed -n 's/.*(allowed: \(.*\))$/\1/p' | tr -d ' ' | tr ',' '\n' | sort)
listed=$(awk '/^  kind: /{on = 1; sub(/^[^#]*# */, ""); print; next}
              on && /^ +# /{sub(/^ +# */, ""); print; next} {on = 0}' "$root/schedules/1f1b.yaml" |
    tr '|' '\n' | tr -d ' ' | grep -v '^$' | sort)
if [ -n "$allowed" ] && [ "$allowed" = "$listed" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "  FAIL schedules/1f1b.yaml's schedule.kind comment lists" \
        "$(echo "$listed" | tr '\n' ' ')but the reader accepts $(echo "$allowed" | tr '\n' ' ')"
fi

echo "check_docs: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
