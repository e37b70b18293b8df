#!/bin/sh
# peer_wheels.sh DIR — download, on a machine with network, the Python wheels the Megatron-Core
# peer (bench/megatron_peer.py) needs that a plain PyTorch install lacks, for the GPU machine's
# Python (PEER_PYTHON_VERSION, default 3.12; x86-64 Linux): megatron-core itself and the two
# packages it imports at once, numpy and packaging (its METADATA's Requires-Dist past torch; the
# local spec, its schedules and its optimizer import nothing else; TransformerEngine is optional
# and not fetched). Copy DIR to the GPU machine (e.g. carry .device with DIR = .device/wheels) and
# run `PEER_WHEELS=DIR make bench-peer`.
#
# peer_wheels.sh --install DIR TARGET — on the GPU machine, no network: install into TARGET
# those of DIR's wheels whose module python3 cannot import yet (pip --no-index --no-deps
# --target, or unzipped where pip is missing), print TARGET's path when something went in, and
# exit 0; 1 when a wheel the peer needs is neither importable nor in DIR. run_peer.sh calls it
# and puts TARGET on PYTHONPATH.
set -u

# distribution requirement, its module (one line each: the one list of what the peer needs)
WHEELS="megatron-core==0.19.2 megatron.core
numpy numpy
packaging>=24.2 packaging"

usage="usage: peer_wheels.sh DIR | peer_wheels.sh --install DIR TARGET"

# The file-name stem of a distribution's wheels: megatron-core -> megatron_core.
stem() {
    echo "$1" | sed 's/[<>=!~].*//; s/[-.]/_/g'
}

# Whether python3 imports MODULE's top package already (without loading it).
have_module() {
    python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('${1%%.*}') is None)" \
        >/dev/null 2>&1
}

if [ "${1:-}" = --install ]; then
    [ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
    dir=$2
    target=$3
    [ -d "$dir" ] || { echo "peer_wheels.sh: $dir: no such folder" >&2; exit 2; }
    mkdir -p "$target" || exit 1
    installed=0
    missing=""
    # shellcheck disable=SC2086
    echo "$WHEELS" | {
        while read -r req module; do
            have_module "$module" && continue
            whl=$(ls "$dir/$(stem "$req")"-*.whl 2>/dev/null | tail -n 1)
            if [ -z "$whl" ]; then
                missing="$missing $req"
                continue
            fi
            if python3 -m pip --version >/dev/null 2>&1; then
                PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --no-index --no-deps \
                    --disable-pip-version-check --target "$target" "$whl" >&2 || exit 1
            else
                python3 -m zipfile -e "$whl" "$target" || exit 1
            fi
            echo "peer_wheels.sh: installed $(basename "$whl")" >&2
            installed=1
        done
        if [ -n "$missing" ]; then
            echo "peer_wheels.sh: not importable and no wheel in $dir:$missing" >&2
            exit 1
        fi
        [ $installed -eq 1 ] && echo "$target"
        exit 0
    }
    exit $?
fi

[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
dir=$1
mkdir -p "$dir" || exit 1
# shellcheck disable=SC2046
python3 -m pip download --no-deps --only-binary=:all: --python-version "${PEER_PYTHON_VERSION:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$dir" \
    $(echo "$WHEELS" | cut -d ' ' -f 1) || {
    echo "peer_wheels.sh: pip download failed (this needs network and pip)" >&2
    exit 1
}
echo "peer_wheels.sh: wheels in $dir; on the GPU machine: PEER_WHEELS=$dir make bench-peer"
