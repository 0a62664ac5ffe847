#!/usr/bin/env bash
# Checks every corrected spec with rpcgen (Debian rpcsvc-proto) and compiles the C it
# generates against libtirpc, so C-level defects (use before definition, duplicate union
# members) fail too. Exit status: 0 if every spec passes.
#
# Usage: specs/check-with-rpcgen.sh [SPEC.x[+MORE.x] ...]   (default: every spec below;
#        files joined by `+` are one unit, e.g. ietf-07/common.x+ietf-07/baseops.x)
# The raw extracted files in specs/raw/ are expected to FAIL; `--raw` shows how.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CC="${CC:-cc}"
TIRPC_CFLAGS="$(pkg-config --cflags libtirpc 2>/dev/null || echo -I/usr/include/tirpc)"

command -v rpcgen >/dev/null || { echo "rpcgen not found: run scripts/setup" >&2; exit 2; }

# Each unit is "name:file1[+file2...]": files of one unit are concatenated (one namespace),
# as xdrgen compiles them together (baseops.x uses the types of common.x).
default_units=(
  "rpcrdma-v1:rpcrdma-v1.x"
  "rpcrdma-2004:rpcrdma-2004.x"
  "rpcrdma-v2:rpcrdma-v2.x"
  "common:common.x"
  "common-baseops:common.x+baseops.x"
  # The working group's revision -07 of the version 2 draft (specs/ietf-07/, ERRATA I7-*).
  "ietf-07-common-baseops:ietf-07/common.x+ietf-07/baseops.x"
  "rpc_msg:rpc_msg.x"
  "nfs3:nfs3.x"
  "mount3:mount3.x"
  "nfs4:nfs4.x"
  # pmap.x is left out: its C names (mapping, pmaplist, xdr_pmaplist_ptr) are those of
  # libtirpc's own <rpc/pmap_prot.h>, which every rpcgen output includes.
)

raw=0
units=()
for a in "$@"; do
  case "$a" in
    --raw) raw=1 ;;
    *) units+=("$(basename "${a%.x}"):$a") ;;
  esac
done
if [ ${#units[@]} -eq 0 ]; then
  units=("${default_units[@]}")
  [ $raw -eq 1 ] && units=("rpcrdma-v1:raw/rpcrdma-v1.x" "rpcrdma-2004:raw/rpcrdma-2004.x"
                           "rpcrdma-v2:raw/rpcrdma-v2.x"
                           "ietf-07-common-baseops:raw/ietf-07/common.x+raw/ietf-07/baseops.x")
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# rpc_msg.x defines the same names as libtirpc's <rpc/rpc_msg.h> and <rpc/auth.h>; for it the
# generated code sees only the XDR primitives (a shadow <rpc/rpc.h>). nfs4.x defines
# authsys_parms (RFC 5531 appendix A), which <rpc/auth_unix.h> defines too: its shadow has the
# client and service declarations its programs need, without that header.
mkdir -p "$work/shadow/rpc" "$work/shadow-nfs4/rpc"
printf '#include <rpc/types.h>\n#include <rpc/xdr.h>\n' > "$work/shadow/rpc/rpc.h"
printf '#include <rpc/types.h>\n#include <rpc/xdr.h>\n#include <rpc/auth.h>\n#include <rpc/clnt.h>\n#include <rpc/svc.h>\n' \
  > "$work/shadow-nfs4/rpc/rpc.h"

failed=0
for unit in "${units[@]}"; do
  # rpcgen derives the header guard from the file name: keep it a C identifier.
  name="$(printf '%s' "${unit%%:*}" | tr -c 'A-Za-z0-9_' '_')"
  files="${unit#*:}"
  : > "$work/$name.x"
  IFS='+' read -ra parts <<< "$files"
  for p in "${parts[@]}"; do
    # A path as given (absolute or from the current directory), else relative to specs/.
    if [ -f "$p" ]; then src="$p"; else src="$here/$p"; fi
    cat "$src" >> "$work/$name.x"
  done
  extra=()
  case "$name" in
    rpc_msg) extra=(-I"$work/shadow") ;;
    nfs4) extra=(-I"$work/shadow-nfs4") ;;
  esac
  if (cd "$work" \
      && rpcgen -h -o "$name.h" "$name.x" \
      && rpcgen -c -o "${name}_xdr.c" "$name.x" \
      && "$CC" -std=gnu99 -Wall -Werror -Wno-unused-variable -c "${extra[@]}" $TIRPC_CFLAGS \
           -o "${name}_xdr.o" "${name}_xdr.c") > "$work/$name.log" 2>&1; then
    echo "ok    $files"
  else
    echo "FAIL  $files"
    sed 's/^/      /' "$work/$name.log"
    failed=1
  fi
done
exit $failed
