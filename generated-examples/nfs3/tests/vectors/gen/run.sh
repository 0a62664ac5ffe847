#!/usr/bin/env bash
# Cross-checks the hand-annotated NFSv3 vectors against rpcgen.
#
# 1. rpcgen turns specs/nfs3.x into C (header + XDR routines) in a
#    temporary directory; gen_vectors.c is compiled (with $CC, default cc)
#    against it and libtirpc (rpcsvc-proto, libtirpc-dev: scripts/setup).
# 2. For every vector NAME, gen_vectors prints rpcgen's encoding.
#    It must equal
#      - ../NAME.hex with its comments stripped (the hand computation), and
#      - ../rpcgen/NAME.hex (the committed oracle output).
#
# Usage: run.sh           check only; exit status 1 on any difference
#        run.sh --bless   also rewrite ../rpcgen/NAME.hex from rpcgen
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vectors="$(dirname "$here")"
repo="$(cd "$vectors/../../../.." && pwd)"
spec="$repo/specs/nfs3.x"
bless=0
[ "${1:-}" = "--bless" ] && bless=1

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cp "$spec" "$work/nfs3.x"
(cd "$work" && rpcgen -h nfs3.x -o nfs3.h && rpcgen -c nfs3.x -o nfs3_xdr.c)
"${CC:-cc}" -O0 -I/usr/include/tirpc -I"$work" -o "$work/gen_vectors" \
    "$here/gen_vectors.c" "$work/nfs3_xdr.c" -ltirpc

# Drops '#' comments and all whitespace, leaving one lowercase hex string.
strip() { sed -e 's/#.*$//' "$1" | tr -d ' \t\r\n' | tr 'A-F' 'a-f'; }

status=0
mkdir -p "$vectors/rpcgen"
for name in $("$work/gen_vectors" --list); do
    "$work/gen_vectors" "$name" >"$work/$name.hex"
    oracle="$(strip "$work/$name.hex")"
    this=0
    if [ "$(strip "$vectors/$name.hex")" != "$oracle" ]; then
        echo "MISMATCH $name: ../$name.hex differs from rpcgen" >&2
        echo "  hand:   $(strip "$vectors/$name.hex")" >&2
        echo "  rpcgen: $oracle" >&2
        this=1
    fi
    if [ "$bless" = 1 ]; then
        cp "$work/$name.hex" "$vectors/rpcgen/$name.hex"
    elif ! cmp -s "$work/$name.hex" "$vectors/rpcgen/$name.hex"; then
        echo "STALE $name: ../rpcgen/$name.hex differs from rpcgen (run with --bless)" >&2
        this=1
    fi
    if [ "$this" = 0 ]; then
        echo "ok $name ($(( ${#oracle} / 2 )) bytes)"
    else
        status=1
    fi
done
exit "$status"
