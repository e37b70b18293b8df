#!/bin/sh
# check_include_rules.sh — mk/check_includes.sh can fail: on a tiny tree of fake sources with one
# include breaking each rule (a folder the table forbids, another folder's *_internal.h, a circle
# between folders, a "../" path) it names each, at its file and line, and nothing else; on the
# same tree with those lines removed it passes; a folder missing from the table fails; a usage
# error exits 2. Prints the summary line tests/run_tests.sh reads.
C=$(cd "$(dirname "$0")/.." && pwd)/mk/check_includes.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0 failed=0

ok() { passed=$((passed + 1)); }
no() { failed=$((failed + 1)); echo "  FAIL $*"; sed 's/^/    /' "$tmp/out"; }

# put FILE LINE...: a fake source file, one include per argument.
put() {
    f=$tmp/tree/$1
    shift
    mkdir -p "$(dirname "$f")"
    : >"$f"
    for l in "$@"; do echo "$l" >>"$f"; done
}

# has PATTERN WHAT: the last run's output holds a line matching PATTERN (fixed string).
has() {
    if grep -qF -- "$1" "$tmp/out"; then ok; else no "$2: no line ~ $1"; fi
}

# The tree: every include allowed but the four marked.
put common/a.h '#include <stdio.h>'
put model/m.h '#include "common/a.h"' '#include "plan/p.h"'          # rule 1, and rule 3
put plan/p.h '#include "model/m.h"' '#include "common/a.h"'
put plan/x_internal.h '#include "p.h"'
put plan/p.c '#include "x_internal.h"' '#include "plan/x_internal.h"'
put sim/s.c '#include "plan/p.h"' '#include "plan/x_internal.h"'     # rule 2
put kernels/k.cu '#include "model/m.h"' '#include "../common/a.h"'   # rule 4
put cli/main.c '#include "sim/s.h"' '#include "kernels/k.cuh"' '#include <cuda/std/cstdint>'
put tests/t.c '#include "cli/main.h"' '#include "support.h"'
put build/gen.c '#include "../cli/main.h"'                           # not a source folder

sh "$C" "$tmp/tree" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then ok; else no "a tree with four faults exits $rc, not 1"; fi
has 'model/m.h:2: #include "plan/p.h": rule 1 (folder table): model/ may not include from plan/' "rule 1"
has 'model/m.h:2: #include "plan/p.h": rule 3 (folder cycle): the folders include each other in a circle: model -> plan -> model' "rule 3"
has 'sim/s.c:2: #include "plan/x_internal.h": rule 2 (private header)' "rule 2"
has 'kernels/k.cu:2: #include "../common/a.h": rule 4 (relative path)' "rule 4"
has 'check_includes: 0 passed, 4 failed, 0 skipped' "the summary"
n=$(grep -c ': rule [0-9] (' "$tmp/out")
if [ "$n" -eq 4 ]; then ok; else no "$n failures reported, not the 4 made"; fi

# The same tree without the four lines passes.
put model/m.h '#include "common/a.h"'
put sim/s.c '#include "plan/p.h"'
put kernels/k.cu '#include "model/m.h"' '#include "common/a.h"'
sh "$C" "$tmp/tree" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then ok; else no "the clean tree exits $rc, not 0"; fi
has 'check_includes: 4 passed, 0 failed, 0 skipped' "the clean summary"

# A folder the table does not name fails, even with nothing to include.
put extra/e.c '#include <stdlib.h>'
sh "$C" "$tmp/tree" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then ok; else no "a folder outside the table exits $rc, not 1"; fi
has 'extra/e.c:1: its folder: rule 1 (folder table): extra/ is not in the include table' "the unknown folder"

# Usage: a missing folder or two arguments exit 2.
sh "$C" "$tmp/nosuch" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then ok; else no "a missing folder exits $rc, not 2"; fi
sh "$C" "$tmp/tree" "$tmp/tree" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then ok; else no "two arguments exit $rc, not 2"; fi

echo "check_include_rules: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
