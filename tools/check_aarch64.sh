#!/usr/bin/env bash
# Exact mode on another architecture: the local stand-in for an arm64 CI runner.
#
# Builds the C kernels (onemodel/_kernels/csrc) with the kernel harness tools/kernel_digest.c
# twice: natively for x86-64 (scalar, SSE2, AVX2 and AVX-512 paths) and with Debian's aarch64
# cross compiler (scalar and, where every family written per path has its *_neon.c, NEON); as
# setup.py, each *_paths.c once per path with -DOM_PATH=<path>. Runs the first natively and
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

# The flags of a path.
isa_flags() {
    case "$1" in
        sse2) echo -msse2 ;;
        avx2) echo -mavx2 -mfma -mf16c ;;
        avx512) echo -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c ;;
    esac
}

# build <compiler> <output> <path>... : every baseline file plus the files of the given paths;
# each *_paths.c once for scalar and once for each given path.
build() {
    local cc=$1 out=$2 objdir
    shift 2
    objdir="$work/obj-$(basename "$out")"
    mkdir -p "$objdir"
    local defines=() pids=() jobs=() isa pid src name job
    for isa in "$@"; do defines+=("-DOM_BUILD_${isa^^}=1"); done
    for src in "$csrc"/*.c "$root/tools/kernel_digest.c"; do
        name=$(basename "$src" .c)
        case "$name" in
            *_paths) for isa in scalar "$@"; do jobs+=("$src $isa"); done; continue ;;
        esac
        isa=${name##*_}
        case "$isa" in
            sse2 | avx2 | avx512 | neon) ;;
            avx512bf16) ;;   # built only when listed: the digest leaves it out
            *) isa="" ;;
        esac
        if [ -n "$isa" ] && [[ " $* " != *" $isa "* ]]; then
            continue
        fi
        jobs+=("$src -")
    done
    for job in "${jobs[@]}"; do
        src=${job% *}
        isa=${job##* }
        name=$(basename "$src" .c)
        if [ "$isa" = - ]; then  # a file of one path: its suffix names it
            # shellcheck disable=SC2046
            "$cc" "${flags[@]}" "${defines[@]}" $(isa_flags "${name##*_}") -c "$src" \
                -o "$objdir/$name.o" &
        else
            # shellcheck disable=SC2046
            "$cc" "${flags[@]}" "${defines[@]}" $(isa_flags "$isa") -DOM_PATH="$isa" -c "$src" \
                -o "$objdir/$name.$isa.o" &
        fi
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
# As setup.py: NEON is built once every family written per path (a <family>_<isa>.c) has its
# <family>_neon.c.
neon=(neon)
missing=()
for src in "$csrc"/*_sse2.c "$csrc"/*_avx2.c "$csrc"/*_avx512.c "$csrc"/*_avx512bf16.c; do
    [ -e "$src" ] || continue
    family=$(basename "$src" .c)
    family=${family%_*}
    [ -e "$csrc/${family}_neon.c" ] || [[ " ${missing[*]} " == *" $family "* ]] \
        || missing+=("$family")
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
