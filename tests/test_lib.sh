# shellcheck shell=bash
# What every shell test of tests/ shares, defined once: failing a check, skipping a test
# whose precondition is missing, a free port, clocks and a bounded wait, the error
# contract of a failing ringside process, and the device the training tests run on. Sourced (tests/proc_util.sh sources it too);
# a test lists it in its BUILD target (deps = [":test_lib"] or [":proc_util"]).
#
# Skipped is never passed: a test that cannot run here prints one line starting with
# SKIPPED_MARKER and exits 0, and scripts/test.sh (scripts/test_summary.sh) counts the
# target as skipped. docs/testing.md lists which test needs what.

# The marker scripts/test_summary.sh looks for at the start of a line of a test.log.
SKIPPED_MARKER="SKIPPED: "

# fail MESSAGE...: one "FAIL: MESSAGE" line, counted in `failures` (each test ends with
# "N failure(s)" and exit status 1 when it is not 0). A test whose later checks need the
# earlier ones (FAIL_FAST=1) ends at the first failure instead, with exit status 1.
failures=${failures:-0}
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  if [ "${FAIL_FAST:-0}" = 1 ]; then exit 1; fi
  return 0
}

# skip REASON: the whole test cannot run here (a missing package, not root, ...): says so
# in one line and ends the test with exit status 0; counted as skipped, not passed.
# REASON names what is missing and how to get it.
skip() {
  echo "${SKIPPED_MARKER}$*"
  exit 0
}

# skip_part REASON: one part of the test cannot run here; the rest goes on. The target
# still counts as skipped (not passed) when everything else passes: what it checks was
# not all checked.
skip_part() {
  echo "${SKIPPED_MARKER}$*"
}

# free_port [NETNS]: a TCP port that was free a moment ago on every address (of network
# namespace NETNS if given). Drawn at random below the kernel's ephemeral range, which
# binds to port 0 and outgoing connections take from: between this pick and the test's
# server listening, only another explicit pick could take it (the launchers hold theirs:
# ReserveFreePort). Port 0's pick where that range leaves too little room below it.
free_port() {
  ${1:+ip netns exec "$1"} /usr/bin/python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200 if low > 12000 else 0):
    port = random.randrange(10000, low)
    s = socket.socket()
    try:
        s.bind(("", port)); print(port); break
    except OSError:
        pass
    finally:
        s.close()
else:
    s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# netns_ours: the network namespaces ringside's emulated nodes made (rs<pid>_...).
# added BEFORE NOW: the lines of NOW that BEFORE (an earlier listing) did not hold. Tests
# of leftovers compare with it, not with equality: a run removes the leftovers of a
# launcher that died earlier (another test's), which is not this test's doing.
netns_ours() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rs[0-9a-f]+_' | sort; }
added() { comm -13 <(printf '%s\n' "$1" | sed '/^$/d' | sort) <(printf '%s\n' "$2" | sed '/^$/d' | sort); }

# now: seconds since the epoch, with nanoseconds; elapsed_since T0: seconds since T0.
now() { date +%s.%N; }
elapsed_since() { echo "$(now) - $1" | bc; }

# bounded_wait PID SECONDS: waits for PID (a background process of this shell) for at
# most SECONDS; then stops it (TERM; to a timeout(1) wrapper, which passes it on) and
# returns 254. Else the process's exit status, as soon as it ends. The bound is kept by
# a watchdog (sh) that ends by itself once the wait is over: killing a freshly forked
# child of this shell could run the test's EXIT trap in it (bash's signal handlers stay
# until the child execs).
bounded_wait() {
  local pid=$1 live rc
  live=$(mktemp)
  sh -c 'end=$(( $(date +%s%N) + $2 * 1000000000 ))
         while [ -e "$1" ]; do
           if [ "$(date +%s%N)" -ge "$end" ]; then : >"$1.fired"; kill "$3" 2>/dev/null; exit 0; fi
           sleep 0.1
         done' watchdog "$live" "$2" "$pid" &
  wait "$pid"; rc=$?
  rm -f "$live"
  if [ -e "$live.fired" ]; then rm -f "$live.fired"; return 254; fi
  return "$rc"
}

# Parts of a test that run at once: for parts that mostly wait (a time-out of a few
# seconds, a process stopped on purpose), several at a time take the wall time of the
# slowest instead of the sum. part_start NAME CMD...: runs CMD... in a background
# subshell with its own failure count, its output to a file; parts_wait: waits for
# every part started (each must bound its own waits), prints each part's output in the
# order they started and adds its failures to `failures`. A part's subshell has no EXIT
# trap but PART_TRAP's (a command; the shell resets the test's own in a subshell), so a
# part that stops processes kills them there.
PARTS=()
part_start() {
  local name=$1 out
  shift
  out=$(mktemp "${TEST_TMPDIR:-/tmp}/part.XXXXXX")
  # shellcheck disable=SC2016  # expanded in the subshell
  ( failures=0; trap "${PART_TRAP:-}" EXIT; "$@"; exit "$failures" ) >"$out" 2>&1 &
  PARTS+=("$!" "$out" "$name")
}
parts_wait() {
  local i rc
  for ((i = 0; i < ${#PARTS[@]}; i += 3)); do
    wait "${PARTS[i]}"; rc=$?
    cat "${PARTS[i + 1]}"
    rm -f "${PARTS[i + 1]}"
    if [ "$rc" -ge 128 ]; then
      fail "${PARTS[i + 2]}: the part ended by signal $((rc - 128))"
    else
      failures=$((failures + rc))
    fi
  done
  PARTS=()
}

# [WANT=STATUS] expect_error NAME PID LOG REGEX [SECONDS]: the error contract of a
# ringside process that must fail. PID (started in the background, its output in LOG)
# ends within SECONDS (default 30; else it is stopped) with exit status STATUS or,
# without WANT, with a failure that is neither timeout(1)'s 124 nor SIGKILL's 137; LOG
# has exactly one line mentioning an error (in any case), and it is the last line,
# "ringside: error: ...", matching REGEX. Prints "ok   NAME (exit S): LINE", or fails
# NAME once, saying which part did not hold.
expect_error() {
  local name=$1 pid=$2 log=$3 regex=$4 seconds=${5:-30} rc last
  bounded_wait "$pid" "$seconds"; rc=$?
  if [ "$rc" -eq 254 ]; then
    fail "$name: still running after ${seconds}s (stopped): $(tail -n 1 "$log")"; return
  fi
  if [ -n "${WANT:-}" ]; then
    if [ "$rc" -ne "$WANT" ]; then fail "$name: exit status $rc, expected $WANT"; tail -n 3 "$log"; return; fi
  elif [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "$name: exit status $rc"; tail -n 3 "$log"; return
  fi
  [ "$(grep -ci 'error' "$log")" -eq 1 ] || { fail "$name: not exactly one error line"; cat "$log"; return; }
  last=$(tail -n 1 "$log")
  [[ "$last" == "ringside: error: "* ]] || { fail "$name: the error is not the last line: $last"; return; }
  grep -qE -- "$regex" <<<"$last" || { fail "$name: /$regex/ not in: $last"; return; }
  echo "ok   $name (exit $rc): $last"
}

# The device and backend the training tests run on, read here and nowhere else:
# RINGSIDE_TEST_DEVICE=cpu|cuda and RINGSIDE_TEST_BACKEND=gloo|nccl (scripts/gpu_check.sh
# sets them: cuda/nccl on a GPU, cpu/gloo in its stand-in mode); RINGSIDE_TEST_GPUS, the
# GPUs there (ranks beyond them share one: emulated); RINGSIDE_TEST_PYTHON, a python3
# with numpy for the comparison scripts. Unset, the suite runs as it always did: no
# --device or --backend flag (the CPU and Gloo), /usr/bin/python3.
# DEVICE_ARGS and BACKEND_ARGS go into every training command line (BACKEND_ARGS into
# DDP's only).
TEST_DEVICE=${RINGSIDE_TEST_DEVICE:-cpu}
TEST_BACKEND=${RINGSIDE_TEST_BACKEND:-gloo}
# shellcheck disable=SC2034  # for the tests that source this
TEST_PYTHON=${RINGSIDE_TEST_PYTHON:-/usr/bin/python3}
case "$TEST_DEVICE/$TEST_BACKEND" in
  cpu/gloo | cuda/nccl) ;;
  *) echo "test_lib: RINGSIDE_TEST_DEVICE=$TEST_DEVICE RINGSIDE_TEST_BACKEND=$TEST_BACKEND:" \
          "want cpu/gloo or cuda/nccl"; exit 2 ;;
esac
# shellcheck disable=SC2034,SC2206  # for the tests; no spaces to split
DEVICE_ARGS=(${RINGSIDE_TEST_DEVICE:+--device="$TEST_DEVICE"})
# shellcheck disable=SC2034,SC2206  # for the tests; no spaces to split
BACKEND_ARGS=(${RINGSIDE_TEST_BACKEND:+--backend="$TEST_BACKEND"})

# The PS transport the tests' PS jobs run on, read here and nowhere else:
# RINGSIDE_TEST_PS_TRANSPORT=grpc|tcp (tests/BUILD runs the PS fault, hang, elastic,
# security and kill-and-resume tests once per transport). Set, RINGSIDE (the binary
# under test, set by the test before it sources this) becomes a wrapper that adds
# --ps_transport to every command that plays a PS role (train --strategy=ps,
# ps-server, ps-worker) and runs the binary itself in its place (exec: the processes
# are the binary's, as the tests find them). Unset: nothing changes.
if [ -n "${RINGSIDE_TEST_PS_TRANSPORT:-}" ] && [ -n "${RINGSIDE:-}" ]; then
  case "$RINGSIDE_TEST_PS_TRANSPORT" in
    grpc | tcp) ;;
    *) echo "test_lib: RINGSIDE_TEST_PS_TRANSPORT=$RINGSIDE_TEST_PS_TRANSPORT: want grpc or tcp"
       exit 2 ;;
  esac
  ps_wrapper="$(mktemp -d)/ringside"
  {
    echo '#!/usr/bin/env bash'
    echo 'case " $* " in'
    echo "  *\" --strategy=ps \"* | \" ps-server \"* | \" ps-worker \"*)"
    echo "    exec '$(realpath "$RINGSIDE")' \"\$@\" --ps_transport=$RINGSIDE_TEST_PS_TRANSPORT ;;"
    echo 'esac'
    echo "exec '$(realpath "$RINGSIDE")' \"\$@\""
  } >"$ps_wrapper"
  chmod +x "$ps_wrapper"
  RINGSIDE=$ps_wrapper
fi

# not_ps_part NAME: true where a twin's part that starts no PS job (a DDP or single
# job: the transport changes nothing in it) runs. It runs once, in NAME_test (gRPC, or
# no transport set); NAME_tcp_test says in one line that it left it to its twin.
not_ps_part() {
  [ "${RINGSIDE_TEST_PS_TRANSPORT:-grpc}" = grpc ] && return 0
  echo "--   $1: no PS job in it; run by the gRPC twin"
  return 1
}

# device_records RANKS: the pattern every step record of a job of RANKS ranks matches:
# the CPU, not emulated; or a GPU, emulated where the ranks outnumber the GPUs.
device_records() {
  if [ "$TEST_DEVICE" = cpu ]; then
    echo '"device":"cpu".*"emulated":false'
  elif [ "$1" -gt "${RINGSIDE_TEST_GPUS:-1}" ]; then
    echo '"device":"cuda[^"]*".*"emulated":true'
  else
    echo '"device":"cuda[^"]*".*"emulated":false'
  fi
}

# device_timeout SECONDS: a --timeout_s for a fault test: SECONDS on the CPU; at least
# 10 on a GPU, where NCCL's set-up between ranks sharing a GPU (sockets) takes seconds.
device_timeout() {
  if [ "$TEST_DEVICE" = cpu ] || [ "$1" -ge 10 ]; then echo "$1"; else echo 10; fi
}
