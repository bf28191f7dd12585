#!/usr/bin/env bash
# Exact mode on another architecture: the local stand-in for an arm64 CI runner.
#
# Builds the C kernels (onemodel/_kernels/csrc) with the kernel harness tools/kernel_digest.c
# twice: natively for x86-64 (scalar, SSE2, AVX2 and AVX-512 paths) and with Debian's aarch64
# cross compiler (scalar and, where csrc has *_neon.c files, NEON). Runs the first natively and
# the second under qemu-aarch64, each on every path it has at 1 and 3 threads, and checks that
# every digest is the x86-64 scalar one. Same flags as setup.py: -O3, contraction off, OpenMP.
#
#   tools/check_aarch64.sh            # installs gcc-aarch64-linux-gnu and qemu-user if missing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
csrc="$root/onemodel/_kernels/csrc"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v aarch64-linux-gnu-gcc > /dev/null || ! command -v qemu-aarch64 > /dev/null; then
    packages="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
    if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
        echo "check_aarch64: missing the cross compiler or qemu; install: $packages" >&2
        exit 2
    fi
    echo "== installing $packages"
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages > /dev/null
fi

flags=(-O3 -ffp-contract=off -fno-fast-math -fno-math-errno -std=c11 -fopenmp
       -DOM_HAVE_OPENMP=1 -I"$csrc")

# build <compiler> <output> <path>... : every baseline file plus the files of the given paths.
build() {
    local cc=$1 out=$2 objdir
    shift 2
    objdir="$work/obj-$(basename "$out")"
    mkdir -p "$objdir"
    local defines=() pids=() isa pid
    for isa in "$@"; do defines+=("-DOM_BUILD_${isa^^}=1"); done
    for src in "$csrc"/*.c "$root/tools/kernel_digest.c"; do
        isa=$(basename "$src" .c)
        isa=${isa##*_}
        case "$isa" in
            sse2) isa_flags=(-msse2) ;;
            avx2) isa_flags=(-mavx2 -mfma -mf16c) ;;
            avx512) isa_flags=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c) ;;
            avx512bf16) isa_flags=() ;;   # built only when listed: the digest leaves it out
            neon) isa_flags=() ;;
            *) isa_flags=(); isa="" ;;
        esac
        if [ -n "$isa" ] && [[ " $* " != *" $isa "* ]]; then
            continue
        fi
        "$cc" "${flags[@]}" "${defines[@]}" "${isa_flags[@]}" -c "$src" \
            -o "$objdir/$(basename "$src" .c).o" &
        pids+=($!)
        if [ ${#pids[@]} -eq 2 ]; then  # two compilations at a time
            for pid in "${pids[@]}"; do wait "$pid"; done
            pids=()
        fi
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    "$cc" -fopenmp "$objdir"/*.o -lm -o "$out"
}

start=$SECONDS
# As setup.py: NEON is built once every kernel family has its *_neon.c.
neon=(neon)
missing=()
for scalar in "$csrc"/*_scalar.c; do
    family=$(basename "$scalar" _scalar.c)
    [ -e "$csrc/${family}_neon.c" ] || missing+=("$family")
done
if [ ${#missing[@]} -gt 0 ]; then
    neon=()
    echo "== NEON not built: no *_neon.c for ${missing[*]}"
fi
echo "== building (x86-64: scalar sse2 avx2 avx512; aarch64: scalar ${neon[*]:-})"
build gcc "$work/digest-x86_64" sse2 avx2 avx512
build aarch64-linux-gnu-gcc "$work/digest-aarch64" ${neon[@]+"${neon[@]}"}
built=$SECONDS

echo "== x86-64, native"
"$work/digest-x86_64" | tee "$work/x86_64.txt"
x86_rc=${PIPESTATUS[0]}
echo "== aarch64, qemu-aarch64"
qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/digest-aarch64" | tee "$work/aarch64.txt"
arm_rc=${PIPESTATUS[0]}
echo "== build $((built - start))s, runs $((SECONDS - built))s"

x86=$(sed -n 's/^digest //p' "$work/x86_64.txt")
arm=$(sed -n 's/^digest //p' "$work/aarch64.txt")
if [ "$x86_rc" != 0 ] || [ "$arm_rc" != 0 ]; then
    echo "check_aarch64: paths or thread counts differ within one architecture (see MISMATCH)" >&2
    exit 1
fi
if [ "$x86" != "$arm" ]; then
    echo "check_aarch64: aarch64 digest $arm != x86-64 digest $x86; kernels that differ:" >&2
    diff <(grep '^  ' "$work/x86_64.txt") <(grep '^  ' "$work/aarch64.txt") >&2 || true
    exit 1
fi
echo "check_aarch64: aarch64 and x86-64 give digest $x86"
