#!/usr/bin/env bash
# libsyncrep.so exports the public API and nothing else: every symbol
# `nm -D --defined-only` lists is a function the public headers mark SR_API,
# and every such function is exported (symbols starting with _, the
# toolchain's and sanitizers', aside).  Usage: exports.sh LIBSYNCREP.so SOURCE_DIR
# Exit 77 (ctest: skipped) without nm.
set -euo pipefail
LIB=$1
SRC=$2
command -v nm >/dev/null || { echo "exports check skipped: no nm"; exit 77; }
have=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^_/ {print $3}' | sort -u)
want=$(grep -ho 'SR_API [^(]*\bsr_[a-z0-9_]*(' "$SRC"/include/syncrep/*.h |
       grep -o 'sr_[a-z0-9_]*($' | tr -d '(' | sort -u)
extra=$(comm -23 <(printf '%s\n' "$have") <(printf '%s\n' "$want"))
missing=$(comm -13 <(printf '%s\n' "$have") <(printf '%s\n' "$want"))
if [ -n "$extra" ] || [ -n "$missing" ]; then
    [ -z "$extra" ] || printf 'exported but not public API:\n%s\n' "$extra"
    [ -z "$missing" ] || printf 'public API (SR_API) not exported:\n%s\n' "$missing"
    exit 1
fi
echo "libsyncrep.so exports the $(printf '%s\n' "$want" | wc -l) functions of the public API, nothing else"
