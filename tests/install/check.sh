#!/usr/bin/env bash
# Install syncrep from a build directory into a temporary prefix, then build
# and run a small client program against it twice: through pkg-config and
# through CMake's find_package(syncrep).  Usage: check.sh BUILD_DIR [SANITIZERS]
# (a sanitizer build's library needs consumers built with the same sanitizers)
set -euo pipefail
BUILD=$1
SAN=${2:-}
CFLAGS_SAN=""
if [ -n "$SAN" ]; then
    CFLAGS_SAN="-fsanitize=$SAN"
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
cat > "$TMP/app.c" <<'C'
#include <string.h>
#include <syncrep/syncrep.h>
int
main(void)
{
    sr_client        *c = NULL;
    sr_client_options o = {.endpoint = "not-an-endpoint", .task_index = 0, .timeout_ms = 100};
    /* A bad endpoint is refused with a code and a detail, not a crash. */
    int rc = sr_client_open(&c, &o);
    return rc == SR_EINVAL && c == NULL && strlen(sr_errdetail()) > 0 &&
                   strcmp(sr_strerror(SR_ESTALE), "request from a stale incarnation") == 0
               ? 0
               : 1;
}
C
export PKG_CONFIG_PATH="$TMP/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc $CFLAGS_SAN -o "$TMP/app-pc" "$TMP/app.c" $(pkg-config --cflags --libs syncrep) \
    -Wl,-rpath,"$TMP/prefix/lib"
"$TMP/app-pc"
echo "pkg-config (shared): ok"
# (No `pkg-config --static` check: Debian's libzmq.pc lists private
# libraries that are not installed; the static library is checked below.)
mkdir -p "$TMP/cm"
cat > "$TMP/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(app C)
find_package(syncrep 0.1 REQUIRED)
add_executable(app-shared ../app.c)
target_link_libraries(app-shared PRIVATE syncrep::syncrep_shared)
add_executable(app-static ../app.c)
target_link_libraries(app-static PRIVATE syncrep::syncrep_static)
CM
cmake -S "$TMP/cm" -B "$TMP/cm/build" -DCMAKE_PREFIX_PATH="$TMP/prefix" \
    -DCMAKE_C_FLAGS="$CFLAGS_SAN" >/dev/null
cmake --build "$TMP/cm/build" >/dev/null
"$TMP/cm/build/app-shared"
"$TMP/cm/build/app-static"
echo "find_package(syncrep): ok"
# The Python package: importable from the prefix's site-packages, and it
# loads the library installed beside it (not a build folder's).
if [ -z "$SAN" ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    (cd "$TMP" && env -u SYNCREP_LIBRARY PYTHONPATH="$TMP/prefix/lib/python3/dist-packages" \
        /usr/bin/python3 -c '
import sys, syncrep
prefix = sys.argv[1]
assert syncrep.__file__.startswith(prefix), syncrep.__file__
assert syncrep.library_path.startswith(prefix), syncrep.library_path
try:
    syncrep.Client("not-an-endpoint", task_index=0, timeout=0.1)
except syncrep.Error as e:
    assert e.code == "SR_EINVAL", e.code
else:
    raise SystemExit("a bad endpoint was not refused")
' "$TMP/prefix")
    echo "python (installed): ok"
else
    echo "python (installed): SKIPPED (a sanitizer build, or no numpy for /usr/bin/python3)"
fi
