#!/bin/sh
# probe.sh OUT.mk — find the CUDA toolkit, cuBLAS, NCCL and libyaml by compiling a tiny program
# against each, print what was found, and write the make variables to OUT.mk.
#
# MPI is optional: where `mpicc` is found (MPI_HOME=/path/to/mpi names one, MPI=off turns it off)
# ppsched is built to run under mpirun, each process driving its share of the pipeline devices;
# as root with apt-get, a missing MPI is installed (libopenmpi-dev, openmpi-bin) as libyaml is.
# Honours CUDA_HOME and NCCL_HOME, and CUDA=off (build the CPU-only ppsched even where CUDA is
# installed). Without nvcc the build goes on CPU-only: simulate, show, check, compare and plan
# work, the GPU commands say ppsched was built without CUDA. With nvcc, cuBLAS and NCCL are
# required.
# libyaml-dev is installed with apt-get when it is missing and we run as root; otherwise the script
# stops with the command to run. Exit 0 when everything needed is there, 1 otherwise (with the
# reason on stderr).
set -u
out=${1:?usage: probe.sh OUT.mk}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CC=${CC:-cc}

die() {
    echo "ppsched: $*" >&2
    exit 1
}

try_link() { # try_link NAME CFLAGS LIBS  (source in $tmp/NAME.c)
    $CC $2 "$tmp/$1.c" -o "$tmp/$1" $3 >"$tmp/$1.log" 2>&1
}

# --- CUDA toolkit, cuBLAS, NCCL ----------------------------------------------------------------
probe_cuda() {
    cuda_home=${CUDA_HOME:-}
    if [ -z "$cuda_home" ]; then
        if command -v nvcc >/dev/null 2>&1; then
            cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
        elif [ -x /usr/local/cuda/bin/nvcc ]; then
            cuda_home=/usr/local/cuda
        fi
    fi
    [ -n "$cuda_home" ] && [ -x "$cuda_home/bin/nvcc" ] ||
        die "nvcc not found. Install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads, or 'apt-get install nvidia-cuda-toolkit') or set CUDA_HOME=/path/to/cuda."
    nvcc="$cuda_home/bin/nvcc"
    nvcc_ver=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    cuda_inc="$cuda_home/include"
    cuda_lib="$cuda_home/lib64"
    [ -d "$cuda_lib" ] || cuda_lib="$cuda_home/lib"

    cat >"$tmp/cublas.c" <<'EOF'
#include <cublas_v2.h>
#include <cuda_runtime.h>
int main(void) { int v = 0; cublasGetProperty(MAJOR_VERSION, &v); return v < 0; }
EOF
    try_link cublas "-I$cuda_inc" "-L$cuda_lib -lcublas -lcudart" ||
        die "cuBLAS not found under $cuda_home (see $tmp/cublas.log). Install the CUDA toolkit's cuBLAS (apt-get install libcublas-dev-<version>) or set CUDA_HOME."

    # NCCL
    cat >"$tmp/nccl.c" <<'EOF'
#include <nccl.h>
#include <stdio.h>
int main(void) { int v = 0; ncclGetVersion(&v); printf("%d\n", v); return 0; }
EOF
    nccl_inc=""
    nccl_lib=""
    for home in ${NCCL_HOME:-} "$cuda_home" /usr; do
        [ -n "$home" ] || continue
        inc="$home/include"
        for lib in "$home/lib64" "$home/lib" "$home/lib/x86_64-linux-gnu" /usr/lib/x86_64-linux-gnu; do
            if [ -f "$inc/nccl.h" ] && try_link nccl "-I$inc -I$cuda_inc" "-L$lib -lnccl -L$cuda_lib -lcudart"; then
                nccl_inc=$inc
                nccl_lib=$lib
                break 2
            fi
        done
    done
    [ -n "$nccl_inc" ] ||
        die "NCCL not found (looked in \$NCCL_HOME, $cuda_home, /usr). Install it (apt-get install libnccl-dev) or set NCCL_HOME=/path/to/nccl."
    nccl_ver=$(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$nccl_inc/nccl.h" | awk '{printf "%s%s", sep, $3; sep="."}')
}

cuda=on
if [ "${CUDA:-}" = off ]; then
    cuda=off
    cuda_why="CUDA=off"
elif [ -z "${CUDA_HOME:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    cuda=off
    cuda_why="CUDA was not found (no nvcc on the PATH or in /usr/local/cuda; set CUDA_HOME to use one)"
fi
[ "$cuda" = off ] || probe_cuda

# --- libyaml -----------------------------------------------------------------------------------
cat >"$tmp/yaml.c" <<'EOF'
#include <yaml.h>
int main(void) { yaml_parser_t p; if (!yaml_parser_initialize(&p)) return 1; yaml_parser_delete(&p); return 0; }
EOF
yaml_cflags=$(pkg-config --cflags yaml-0.1 2>/dev/null || true)
yaml_libs=$(pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml)
if ! try_link yaml "$yaml_cflags" "$yaml_libs"; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "ppsched: libyaml not found; installing libyaml-dev with apt-get" >&2
        { apt-get install -y -q libyaml-dev || { apt-get update -q && apt-get install -y -q libyaml-dev; }; } >"$tmp/apt.log" 2>&1 ||
            { cat "$tmp/apt.log" >&2; die "apt-get install libyaml-dev failed (log above)."; }
        yaml_libs=-lyaml
        try_link yaml "" "$yaml_libs" || die "libyaml still not usable after installing libyaml-dev."
    else
        die "libyaml not found. Install it: sudo apt-get install libyaml-dev (Debian/Ubuntu), sudo dnf install libyaml-devel (Fedora), brew install libyaml (macOS)."
    fi
fi
yaml_ver=$(pkg-config --modversion yaml-0.1 2>/dev/null || echo "found")

# --- MPI (optional) ----------------------------------------------------------------------------
# mpicc --showme (OpenMPI) or -show (MPICH) gives the flags; a test program must link with them.
mpi_flags() { # mpi_flags MPICC compile|link
    "$1" --showme:"$2" 2>/dev/null && return 0
    "$1" -show 2>/dev/null | tr ' ' '\n' |
        if [ "$2" = compile ]; then grep '^-I'; else grep -E '^-(L|l|Wl)'; fi | tr '\n' ' '
}
find_mpicc() {
    if [ -n "${MPI_HOME:-}" ]; then
        [ -x "$MPI_HOME/bin/mpicc" ] && echo "$MPI_HOME/bin/mpicc"
    else
        command -v mpicc 2>/dev/null
    fi
}
cat >"$tmp/mpi.c" <<'EOF'
#include <mpi.h>
int main(void) { int v = 0, s = 0; MPI_Get_version(&v, &s); return v < 1; }
EOF
mpi=off
mpi_why=""
if [ "${MPI:-}" = off ]; then
    mpi_why="MPI=off"
else
    mpicc=$(find_mpicc)
    if [ -z "$mpicc" ] && [ -z "${MPI_HOME:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "ppsched: mpicc not found; installing libopenmpi-dev and openmpi-bin with apt-get" >&2
        { apt-get install -y -q libopenmpi-dev openmpi-bin ||
            { apt-get update -q && apt-get install -y -q libopenmpi-dev openmpi-bin; }; } >"$tmp/apt-mpi.log" 2>&1 ||
            echo "ppsched: apt-get install libopenmpi-dev openmpi-bin failed; building without MPI" >&2
        mpicc=$(find_mpicc)
    fi
    if [ -z "$mpicc" ]; then
        mpi_why="mpicc not found (install libopenmpi-dev and openmpi-bin, or set MPI_HOME=/path/to/mpi)"
    else
        mpi_cflags=$(mpi_flags "$mpicc" compile)
        mpi_libs=$(mpi_flags "$mpicc" link)
        if try_link mpi "$mpi_cflags" "$mpi_libs"; then
            mpi=on
            mpi_run=$(dirname "$mpicc")/mpirun
            [ -x "$mpi_run" ] || mpi_run=$(command -v mpirun 2>/dev/null || echo "")
            mpi_ver=$("$mpi_run" --version 2>/dev/null | head -n 1)
        else
            mpi_why="$mpicc does not link a test program"
            mpi_cflags=""
            mpi_libs=""
        fi
    fi
fi

echo "ppsched build configuration"
if [ "$cuda" = on ]; then
    printf '  %-8s %s (CUDA %s)\n' nvcc "$nvcc" "$nvcc_ver"
    printf '  %-8s %s\n' cuBLAS "$cuda_lib"
    printf '  %-8s %s, %s (%s)\n' NCCL "$nccl_inc" "$nccl_lib" "$nccl_ver"
else
    printf '  %-8s off: %s\n' CUDA "$cuda_why"
    echo "  building the CPU-only ppsched (simulate, show, check, compare, plan; no GPU runs)"
fi
printf '  %-8s %s\n' libyaml "$yaml_ver $yaml_libs"
if [ "$mpi" = on ]; then
    printf '  %-8s %s (%s): runs under mpirun, one process per share of the devices\n' MPI \
        "$mpicc" "${mpi_ver:-version unknown}"
else
    printf '  %-8s off: %s; ppsched runs as one process\n' MPI "$mpi_why"
fi

mkdir -p "$(dirname "$out")"
cat >"$out" <<EOF
# written by mk/probe.sh; delete it (or run make distclean) to probe again
CUDA := $cuda
CUDA_HOME := ${cuda_home:-}
NVCC := ${nvcc:-}
CUDA_INC := ${cuda_inc:-}
CUDA_LIB := ${cuda_lib:-}
NCCL_INC := ${nccl_inc:-}
NCCL_LIB := ${nccl_lib:-}
YAML_CFLAGS := $yaml_cflags
YAML_LIBS := $yaml_libs
MPI := $mpi
MPI_CFLAGS := ${mpi_cflags:-}
MPI_LIBS := ${mpi_libs:-}
MPIRUN := ${mpi_run:-}
EOF
