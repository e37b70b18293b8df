#!/bin/sh
# check_includes.sh [ROOT] — the include rules of docs/architecture.md, checked on every source
# file (.c, .h, .cu, .cuh) under ROOT (default: the repository root). In a git checkout that is
# every file git tracks or would track (untracked but not ignored: the Makefile's wildcards build
# those too); elsewhere every such file `find` sees outside build*/ and hidden folders.
#
# A line fails one of four rules:
#   1. a folder includes from a folder the table below does not allow it (or a source folder is
#      missing from the table);
#   2. a header named *_internal.h is included from another folder: it is private to its own;
#   3. an include closes a circle between folders in the actual include graph (the circle is
#      printed: a -> b -> ... -> a);
#   4. an include is written as a relative path with "../" (include by the path from the root,
#      "model/cost.h"; a same-folder include may be bare).
# Each failure is one line: file:line: the include: the rule and why. The last line is the summary
# tests/run_tests.sh reads, one check per rule ("check_includes: 4 passed, 0 failed, 0 skipped").
# Exit status: 0 clean, 1 on any failure, 2 for a usage error. `make check-includes` and
# `make test` run it. POSIX sh and awk only.

# The include table: each folder may include its own files and those of the folders listed after
# the colon ("*": every folder). The order is the order data flows (docs/architecture.md): a
# folder lists only folders above it, so the table itself has no circle. The executor takes the
# resolved job (model/job.h), never the user's config, so exec/ does not list config/.
PP_INCLUDE_RULES='
common:
model:    common
plan:     common model
sim:      common model plan
schedule: common model plan sim
config:   common model plan sim schedule
report:   common model plan sim schedule
run:      common model plan sim schedule config report
kernels:  common model
stages:   common model kernels
exec:     common model plan sim schedule report run kernels stages
cli:      *
tests:    *
bench:    *
'
export PP_INCLUDE_RULES

usage() {
    echo "usage: sh mk/check_includes.sh [ROOT]" >&2
    exit 2
}
[ $# -le 1 ] || usage
root=${1:-$(dirname "$0")/..}
[ -d "$root" ] || { echo "check_includes: $root: not a folder" >&2; exit 2; }
cd "$root" || exit 2

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# The files: git's list where ROOT is the top of a checkout (less those deleted but not yet
# committed), else find's; never those under a hidden folder (.git, a tool's own copies).
if [ -e .git ] && git rev-parse --show-toplevel >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' '*.cuh' | sort -u |
        grep -v '^\.' | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done >"$tmp/files"
else
    find . \( -name '.?*' -o -name 'build*' \) -prune -o -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print |
        sed 's|^\./||' | sort >"$tmp/files"
fi
if [ ! -s "$tmp/files" ]; then
    echo "check_includes: no source files under $root" >&2
    exit 2
fi

# Every #include line as file:line:text (/dev/null keeps grep naming the file when it gets one).
xargs grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' /dev/null <"$tmp/files" >"$tmp/includes"

awk -v files="$tmp/files" -v counts="$tmp/counts" '
# The folder a path lies in: its first component ("" for a file at the root).
function folder_of(path) { return index(path, "/") ? substr(path, 1, index(path, "/") - 1) : "" }

# A path with "." and "a/.." collapsed; ".." at its front where it leaves the root.
function normalize(path,    n, part, i, out, depth, stack) {
    n = split(path, part, "/")
    depth = 0
    for (i = 1; i <= n; i++) {
        if (part[i] == "" || part[i] == ".") continue
        if (part[i] == ".." && depth > 0 && stack[depth] != "..") { depth--; continue }
        stack[++depth] = part[i]
    }
    out = ""
    for (i = 1; i <= depth; i++) out = out (i > 1 ? "/" : "") stack[i]
    return out
}

function fail(rule, where, what, why) {
    printf "%s: %s: rule %d (%s): %s\n", where, what, rule, rulename[rule], why
    failures[rule]++
}

# The shortest path of folders from a to b in the include graph, "a -> ... -> b"; "" if none.
# Neighbours are visited in sorted order, so the path printed is the same on every run.
function path_between(a, b,    head, tail, queue, prev, seen, cur, i, nxt, out) {
    head = 1; tail = 1; queue[1] = a; seen[a] = 1
    while (head <= tail) {
        cur = queue[head++]
        for (i = 1; i <= nnodes; i++) {
            nxt = node[i]
            if (!((cur, nxt) in edge) || (nxt in seen)) continue
            seen[nxt] = 1; prev[nxt] = cur; queue[++tail] = nxt
            if (nxt == b) {
                out = b
                while (nxt != a) { nxt = prev[nxt]; out = nxt " -> " out }
                return out
            }
        }
    }
    return ""
}

function add_node(f,    i) {
    if (f in isnode) return
    isnode[f] = 1
    node[++nnodes] = f
    for (i = nnodes; i > 1 && node[i - 1] > node[i]; i--) { t = node[i]; node[i] = node[i - 1]; node[i - 1] = t }
}

BEGIN {
    rulename[1] = "folder table"; rulename[2] = "private header"
    rulename[3] = "folder cycle"; rulename[4] = "relative path"
    n = split(ENVIRON["PP_INCLUDE_RULES"], line, "\n")
    for (i = 1; i <= n; i++) {
        if (line[i] !~ /^[a-z_]+:/) continue
        f = substr(line[i], 1, index(line[i], ":") - 1)
        intable[f] = 1
        m = split(substr(line[i], index(line[i], ":") + 1), allowed, " ")
        list[f] = ""
        for (j = 1; j <= m; j++) {
            if (allowed[j] == "*") everything[f] = 1
            else { allow[f, allowed[j]] = 1; list[f] = list[f] " " allowed[j] "/" }
        }
    }
    # The source folders: every folder holding a source file. One not in the table fails once.
    while ((getline path < files) > 0) {
        f = folder_of(path)
        if (f == "" || !(f in srcfolder)) {
            srcfolder[f] = 1
            if (!(f in intable))
                fail(1, path ":1", "its folder", (f == "" ? "a source file at the root" : f "/") \
                     " is not in the include table (mk/check_includes.sh)")
        }
    }
}

{
    # file:line:text
    file = $0; sub(/:.*/, "", file)
    rest = substr($0, length(file) + 2)
    ln = rest; sub(/:.*/, "", ln)
    text = substr(rest, length(ln) + 2)
    where = file ":" ln
    if (match(text, /"[^"]*"/)) { quoted = 1; inc = substr(text, RSTART + 1, RLENGTH - 2) }
    else if (match(text, /<[^>]*>/)) { quoted = 0; inc = substr(text, RSTART + 1, RLENGTH - 2) }
    else next
    what = "#include " (quoted ? "\"" inc "\"" : "<" inc ">")
    from = folder_of(file)
    dir = file; if (!sub(/\/[^\/]*$/, "", dir)) dir = ""

    # Where the include points: "../" from the folder of the file, a bare name in it, else the root.
    if (inc ~ /(^|\/)\.\.\//) {
        fail(4, where, what, "include by the path from the repository root, never \"../\"")
        target = normalize((dir == "" ? "" : dir "/") inc)
        if (target ~ /^\.\.(\/|$)/) next
    } else if (quoted && index(inc, "/") == 0) {
        target = (dir == "" ? "" : dir "/") inc
    } else {
        target = normalize(inc)
    }
    to = folder_of(target)
    if (!(to in srcfolder)) next          # a system or library header

    base = target; sub(/.*\//, "", base)
    if (base ~ /_internal\.h$/ && to != from)
        fail(2, where, what, base " is private to " to "/; include the public header of " to "/")

    if (to == from) next
    if ((from in intable) && !(from in everything) && !((from, to) in allow))
        fail(1, where, what, from "/ may not include from " to "/ (it may include" \
             (list[from] == "" ? " no other folder" : list[from]) ")")

    add_node(from); add_node(to)
    edge[from, to] = 1
    nocc[from, to]++
    occ[from, to, nocc[from, to]] = where SUBSEP what
}

# The first step of a circle that the table forbids (the include to remove), else its first step.
function step_to_fix(c, n,    k, a, b) {
    for (k = 1; k < n; k++) {
        a = c[k]; b = c[k + 1]
        if ((a in intable) && !(a in everything) && !((a, b) in allow)) return k
    }
    return 1
}

END {
    # Rule 3: an edge a -> b lies on a circle when b reaches a back. Each circle is printed once
    # (its folders rotated to start at the least), at the first include of the step to fix.
    for (i = 1; i <= nnodes; i++) for (j = 1; j <= nnodes; j++) {
        a = node[i]; b = node[j]
        if (!((a, b) in edge)) continue
        back = path_between(b, a)
        if (back == "") continue
        n = split(a " -> " back, c, " -> ")
        least = 1
        for (k = 2; k < n; k++) if (c[k] < c[least]) least = k
        key = ""
        for (k = 0; k < n; k++) { r[k + 1] = c[(least - 1 + k) % (n - 1) + 1]; key = key (k ? " -> " : "") r[k + 1] }
        if (key in circle) continue
        circle[key] = 1
        k = step_to_fix(r, n)
        split(occ[r[k], r[k + 1], 1], o, SUBSEP)
        more = nocc[r[k], r[k + 1]] - 1
        fail(3, o[1], o[2], "the folders include each other in a circle: " key \
             (more ? " (" more " more include(s) from " r[k] "/ to " r[k + 1] "/)" : ""))
    }
    for (q = 1; q <= 4; q++) printf "#%d %d\n", q, failures[q] + 0 > counts
}
' "$tmp/includes" >"$tmp/failures" || exit 1

# The failures in file and line order, then a count per rule and the summary line.
sort -t: -k1,1 -k2,2n "$tmp/failures"
passed=0 failed=0
for r in 1 2 3 4; do
    n=$(sed -n "s/^#$r //p" "$tmp/counts")
    if [ "${n:-0}" -eq 0 ]; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "check_includes: rule $r: $n failure(s)"
    fi
done
echo "check_includes: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
