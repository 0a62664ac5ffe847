# shellcheck shell=bash
# `tests/vm/run nfs4`, sourced by tests/vm/guest.sh (which gives R, ADDR, VM_KDIR, note,
# until_listening and failures): the Linux kernel's NFSv4.1 client against our nfs4-server over
# RPC-over-RDMA on rxe0 (the verbs provider), then a read delegation of the kernel's recalled
# over the session's backchannel when nfs4-client, a second client over TCP, opens the file
# for writing. Every command's output is in results/nfs4.log, the server's `--log` in
# results/nfs4-server.log, the kernel's NFSv4 delegation tracepoints in results/nfs4-trace.log.

# Not 20049 and 2049: in `all` knfsd (started by `nfs`) holds both on every address.
NFS4_RDMA_PORT=20055
NFS4_TCP_PORT=2055
NFS4_MNT=/tmp/mnt-nfs4
NFS4_TRACE=/sys/kernel/tracing
NFS4_MOUNT_OPTS="vers=4.1,proto=rdma,port=$NFS4_RDMA_PORT,soft,timeo=150,retrans=2"

# n4 DESC SECS CMD...: one checked step. Its output goes to nfs4.log; prints
# `TEST nfs4: DESC: ok`, or FAILED with the exit status and the command's last lines.
n4() {
  local desc="$1" secs="$2" out rc
  shift 2
  echo "== $desc: $*" >>"$R/nfs4.log"
  out="$(timeout "$secs" "$@" 2>&1)"
  rc=$?
  [ -z "$out" ] || printf '%s\n' "$out" >>"$R/nfs4.log"
  if [ "$rc" -eq 0 ]; then
    echo "TEST nfs4: $desc: ok"
    return 0
  fi
  local why="exit $rc"
  [ "$rc" -ne 124 ] || why="timed out after $secs s"
  echo "TEST nfs4: $desc: FAILED ($why)"
  printf '%s\n' "$out" | tail -n 10 | sed 's/^/  | /'
  NFS4_FAILED=$((NFS4_FAILED + 1))
  return "$rc"
}

# n4_fail WHY: a failed check that is not a command.
n4_fail() {
  echo "TEST nfs4: FAILED: $*"
  NFS4_FAILED=$((NFS4_FAILED + 1))
}

n4_mount() {
  mount -t nfs -o "$NFS4_MOUNT_OPTS" "$ADDR:/" "$NFS4_MNT"
}

# The kernel's tracepoints of delegations and callbacks (nfs4_set_delegation, nfs4_cb_recall,
# nfs4_delegreturn, nfs4_delegreturn_exit, ...), the kernel's own word that it got a delegation,
# was called back and returned it; and xprtrdma's backward calls received and replies sent
# (xprtrdma_cb_call, xprtrdma_cb_reply). Not sunrpc's svc_authenticate: on Linux 6.1 that
# tracepoint oopses in the callback thread on a backchannel request (seen here: "RIP:
# trace_event_raw_event_svc_authenticate" in nfs41_callback_svc, and umount then hangs).
n4_trace_on() {
  mountpoint -q "$NFS4_TRACE" || mount -t tracefs tracefs "$NFS4_TRACE" || return 1
  local e n=0 ev="$NFS4_TRACE/events"
  for e in "$ev"/nfs4/*deleg* "$ev"/nfs4/nfs4_cb_* "$ev"/rpcrdma/xprtrdma_cb_*; do
    [ -f "$e/enable" ] && echo 1 >"$e/enable" && n=$((n + 1))
  done
  : >"$NFS4_TRACE/trace"
  [ "$n" -gt 0 ]
}

n4_trace() { cat "$NFS4_TRACE/trace" 2>/dev/null | grep -v '^#'; }

# The session on the mount: ls -l, 64 MiB written by dd and read back after a fresh mount,
# compared; mkdir, rename, rm; ls -l again.
n4_session() {
  local mnt="$NFS4_MNT" t0 ms
  n4 "ls -l (empty root)" 60 ls -l "$mnt"
  head -c 67108864 /dev/urandom >/tmp/nfs4-src64
  t0=$(date +%s%N)
  if n4 "dd 64 MiB of=big bs=1M conv=fsync" 600 dd if=/tmp/nfs4-src64 of="$mnt/big" bs=1M conv=fsync; then
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "TEST nfs4:   write took $ms ms"
  fi
  # A fresh mount: the read comes from the server, not the page cache.
  n4 "umount; mount again" 120 sh -c "umount '$mnt' && mount -t nfs -o '$NFS4_MOUNT_OPTS' '$ADDR:/' '$mnt'"
  t0=$(date +%s%N)
  if n4 "dd 64 MiB if=big bs=1M" 600 dd if="$mnt/big" of=/tmp/nfs4-back64 bs=1M; then
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "TEST nfs4:   read took $ms ms"
    n4 "cmp (the 64 MiB read back are the bytes written)" 120 cmp /tmp/nfs4-src64 /tmp/nfs4-back64
  fi
  rm -f /tmp/nfs4-src64 /tmp/nfs4-back64
  n4 "mkdir d; echo > d/a d/b; mv d/a d/c; rm d/b; mv d e; rm -r e" 120 bash -c "
    set -e
    cd '$mnt'
    mkdir d
    echo a >d/a
    echo b >d/b
    mv d/a d/c
    rm d/b
    [ \"\$(ls d)\" = c ] || { echo \"d holds: \$(ls d)\"; exit 1; }
    [ \"\$(cat d/c)\" = a ] || { echo \"d/c holds: \$(cat d/c)\"; exit 1; }
    mv d e
    [ ! -e d ] || { echo 'd is still there after mv d e'; exit 1; }
    [ \"\$(ls e)\" = c ] || { echo \"e holds: \$(ls e)\"; exit 1; }
    rm -r e
    [ ! -e e ] || { echo 'e is still there after rm -r'; exit 1; }"
  n4 "ls -l (big: 64 MiB, uid 0)" 60 bash -c "
    ls -l '$mnt' && ls -ln '$mnt' | awk '\$NF == \"big\" { found = 1; if (\$3 != 0 || \$5 != 67108864) { print \"big: uid\", \$3, \"size\", \$5; exit 1 } } END { if (!found) { print \"no big\"; exit 1 } }'"
  ls -l "$mnt" 2>&1 | sed 's/^/TEST nfs4:   /'
}

# The recall: the kernel has deleg.txt open for reading (and a read delegation for it); our
# nfs4-client opens it for writing over TCP. The server recalls the kernel's delegation over the
# RPC-over-RDMA backchannel (CB_RECALL) and answers nfs4-client's OPEN NFS4ERR_DELAY until the
# kernel's DELEGRETURN; then the OPEN succeeds, the write lands, and the kernel sees it on
# reopen.
n4_recall() {
  local mnt="$NFS4_MNT" f="$NFS4_MNT/deleg.txt" reader i
  printf 'original contents\n' >"$f" || { n4_fail "cannot write deleg.txt"; return; }
  # A fresh mount, so that the kernel's OPEN for reading below is its first of the file.
  n4 "umount; mount again (before the recall)" 120 sh -c "umount '$mnt' && mount -t nfs -o '$NFS4_MOUNT_OPTS' '$ADDR:/' '$mnt'" || return
  : >"$NFS4_TRACE/trace" 2>/dev/null
  # The reader: a process holding deleg.txt open for reading (its OPEN is the kernel's, with
  # the delegation), kept until after the second client wrote.
  (exec sleep 600) <"$f" &
  reader=$!
  for i in $(seq 100); do
    [ "$(readlink "/proc/$reader/fd/0" 2>/dev/null)" = "$f" ] && break
    sleep 0.2
  done
  if [ "$(readlink "/proc/$reader/fd/0" 2>/dev/null)" != "$f" ]; then
    n4_fail "the reader could not open deleg.txt"
    kill "$reader" 2>/dev/null
    return
  fi
  n4 "cat deleg.txt (kernel, open for reading)" 60 grep -qx 'original contents' "$f"
  local granted
  granted="$(n4_trace | grep -c 'nfs4_set_delegation')"
  echo "TEST nfs4:   kernel tracepoint nfs4_set_delegation: $granted line(s)"
  n4_trace | grep 'nfs4_set_delegation' | head -n 2 | sed 's/^ *//; s/^/TEST nfs4:   | /'
  # The second client: nfs4-client over TCP, no backchannel; it prints every NFS4ERR_DELAY.
  # Meanwhile sunrpc's server dispatch logs to dmesg (RPCDBG_SVCDSP): the callback service's
  # view of the CB_COMPOUND.
  echo 512 >/proc/sys/sunrpc/rpc_debug 2>/dev/null
  n4 "nfs4-client --tcp: write deleg.txt --offset 0 --data RECALLED" 240 \
    "$VM_NFS4_CLIENT" --server "$ADDR:$NFS4_TCP_PORT" --tcp write deleg.txt --offset 0 --data RECALLED
  echo 0 >/proc/sys/sunrpc/rpc_debug 2>/dev/null
  sed -n '/^== nfs4-client --tcp: write/,$p' "$R/nfs4.log" | grep -E '^(OPEN|WRITE|CLOSE|FAILED)' |
    sed 's/^/TEST nfs4:   nfs4-client| /'
  local delays
  delays="$(sed -n '/^== nfs4-client --tcp: write/,$p' "$R/nfs4.log" |
    sed -n 's/^OPEN deleg.txt (write): ok after \([0-9]*\) NFS4ERR_DELAY.*/\1/p')"
  if [ -z "$delays" ]; then
    n4_fail "nfs4-client's OPEN for writing did not succeed"
  elif [ "$delays" -lt 1 ]; then
    n4_fail "nfs4-client's OPEN for writing was not delayed: no delegation was in the way (was one granted? see nfs4-trace.log)"
  else
    echo "TEST nfs4: OPEN for writing delayed $delays time(s) while the kernel's delegation was recalled, then ok"
  fi
  # The kernel's side: CB_RECALL received, DELEGRETURN sent and answered.
  n4_trace >"$R/nfs4-trace.log"
  local cb ret
  cb="$(grep -c 'nfs4_cb_recall' "$R/nfs4-trace.log")"
  ret="$(grep -c 'nfs4_delegreturn_exit' "$R/nfs4-trace.log")"
  grep -E 'nfs4_cb_recall|nfs4_delegreturn' "$R/nfs4-trace.log" | head -n 4 | sed 's/^ *//; s/^/TEST nfs4:   trace| /'
  if [ "$cb" -ge 1 ] && grep 'nfs4_delegreturn_exit' "$R/nfs4-trace.log" | grep -q 'error=0 '; then
    echo "TEST nfs4: the kernel got CB_RECALL ($cb) and returned the delegation (DELEGRETURN answered NFS4_OK)"
  else
    n4_fail "the kernel's tracepoints show $cb CB_RECALL(s) and $ret DELEGRETURN(s) (none answered NFS4_OK); the callback's way in:"
    grep -E 'xprtrdma_cb' "$R/nfs4-trace.log" | head -n 4 | sed 's/^ *//; s/^/  | /'
    # The callback service's own account (sunrpc's dprintk, RPCDBG_SVCDSP, during the recall).
    dmesg | grep -E '^\[[ 0-9.]*\] svc: ' | tail -n 6 | sed 's/^/  | dmesg: /'
  fi
  # The server's side: the TCP client's OPENs answered NFS4ERR_DELAY, and what the kernel's
  # connection sent meanwhile (its DELEGRETURN among it), from the server's --log.
  awk '
    / Nfs4errDelay\]$/ && !peer { peer = $1 }
    peer && $1 != peer { n++; if (n <= 4) print "TEST nfs4:   server| (kernel) " $0 }
    peer && $1 == peer && / Nfs4errDelay\]$/ { d++ }
    peer && $1 == peer && /COMPOUND Nfs4Ok/ && !done { done = 1; print "TEST nfs4:   server| (nfs4-client, after " d " NFS4ERR_DELAY) " $0; exit }
  ' "$R/nfs4-server.log"
  kill "$reader" 2>/dev/null
  wait "$reader" 2>/dev/null
  # Reopened by the kernel: the second client's bytes.
  n4 "cat deleg.txt after reopen: RECALLED contents" 60 bash -c "
    got=\"\$(cat '$f')\"; [ \"\$got\" = 'RECALLED contents' ] || { echo \"deleg.txt holds: \$got\"; exit 1; }"
  # The example's other commands: a read over RPC-over-RDMA (with a backchannel), and ls.
  n4 "nfs4-client --rdma: read deleg.txt" 120 \
    "$VM_NFS4_CLIENT" --server "$ADDR:$NFS4_RDMA_PORT" --rdma --provider verbs read deleg.txt
  grep -q '^DATA RECALLED contents' "$R/nfs4.log" || n4_fail "nfs4-client read did not see 'RECALLED contents'"
  n4 "nfs4-client --tcp: ls" 120 "$VM_NFS4_CLIENT" --server "$ADDR:$NFS4_TCP_PORT" --tcp ls
  n4 "rm big deleg.txt" 60 rm "$mnt/big" "$f"
}

nfs4() {
  if [ -z "${VM_NFS4_SERVER:-}" ] || [ -z "${VM_NFS4_CLIENT:-}" ]; then
    echo "FAIL nfs4: nfs4-server or nfs4-client was not built"
    failures=$((failures + 1))
    return
  fi
  local start=$SECONDS m spid
  NFS4_FAILED=0
  : >"$R/nfs4.log"
  for m in rpcrdma nfsv4; do
    modprobe -d "$VM_KDIR" "$m" || note "modprobe $m failed"
  done
  n4_trace_on || note "nfs4: no tracefs or no nfs4 delegation tracepoints"
  "$VM_NFS4_SERVER" --provider verbs --listen "$ADDR" --rdma-port "$NFS4_RDMA_PORT" \
    --tcp-port "$NFS4_TCP_PORT" --log >"$R/nfs4-server.log" 2>&1 &
  spid=$!
  until_listening "$R/nfs4-server.log" "$spid"
  if ! grep -q '^listening' "$R/nfs4-server.log"; then
    n4_fail "nfs4-server did not listen"
  else
    sed -n 's/^listening/TEST nfs4: server listening/p' "$R/nfs4-server.log"
    mkdir -p "$NFS4_MNT"
    if n4 "mount -t nfs -o $NFS4_MOUNT_OPTS $ADDR:/" 120 mount -t nfs -o "$NFS4_MOUNT_OPTS" "$ADDR:/" "$NFS4_MNT"; then
      grep " $NFS4_MNT " /proc/mounts | sed 's/^/TEST nfs4:   /'
      n4_session
      n4_recall
      n4 "umount" 60 umount "$NFS4_MNT"
    fi
  fi
  mountpoint -q "$NFS4_MNT" && umount -f -l "$NFS4_MNT" 2>/dev/null
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  grep -E '^stopped' "$R/nfs4-server.log" | sed 's/^/TEST nfs4: server /'
  dmesg >"$R/nfs4-dmesg.log"
  if [ "$NFS4_FAILED" -eq 0 ]; then
    echo "PASS nfs4 ($((SECONDS - start)) s)"
  else
    echo "FAIL nfs4 ($NFS4_FAILED step(s) failed, after $((SECONDS - start)) s); the server log's last lines, then dmesg's:"
    tail -n 25 "$R/nfs4-server.log" | sed 's/^/  S| /'
    dmesg | grep -iE 'nfs|rpc|rdma|rxe' | tail -n 15 | sed 's/^/  | /'
    failures=$((failures + 1))
  fi
}
