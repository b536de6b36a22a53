# shellcheck shell=bash
# Helpers for the multi-process tests that inject faults from outside the processes
# under test (no test hooks in production code): find a launched process by its rank,
# wait for a training step, stop and continue a process. Sourced; every wait is bounded.
# Brings tests/test_lib.sh with it (fail, skip, free_port, now, bounded_wait,
# expect_error): a test that sources this needs only deps = [":proc_util"].
# shellcheck source=tests/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

# descendants PID: every descendant of PID, one per line.
descendants() {
  local c
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}

# pid_of_rank ROOT RANK: the descendant of ROOT whose environment holds RANK=<RANK>
# (what the launcher gives each process it starts). Returns 1 when there is none yet.
pid_of_rank() {
  local p
  for p in $(descendants "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# wait_for_step LOG MIN [SECONDS]: waits (default up to 60 s) until LOG shows a trainer
# progress line ("step N/...") with N >= MIN. Returns 1 on time-out.
wait_for_step() {
  local log=$1 min=$2 deadline n
  deadline=$(($(date +%s) + ${3:-60}))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    n=$(grep -oE 'step [0-9]+/' "$log" 2>/dev/null | tail -n 1 | grep -oE '[0-9]+')
    if [ -n "$n" ] && [ "$n" -ge "$min" ]; then return 0; fi
    sleep 0.1
  done
  return 1
}

# wait_for_rank ROOT RANK: prints the pid of rank RANK under ROOT once it exists (up to
# 60 s). Returns 1 on time-out or when ROOT ended first.
wait_for_rank() {
  local deadline
  deadline=$(($(date +%s) + 60))
  until pid_of_rank "$1" "$2"; do
    kill -0 "$1" 2>/dev/null || return 1
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.02
  done
}

# throttle PID: makes process PID slow by stopping it for 40 ms of every 50 ms
# (SIGSTOP / SIGCONT) until it exits, and never leaves it stopped (also when this is
# stopped by TERM). Run it in the background (a subshell). Exit status 0 once it has
# slowed the process (stopped it 3 times or more, 120 ms); 1 if the process ended (or
# was never there) before that: a run that proves nothing about a slow process.
throttle() {
  local pid=$1 stops=0
  trap 'kill -CONT "$pid" 2>/dev/null; exit 1' TERM INT
  while kill -STOP "$pid" 2>/dev/null; do
    stops=$((stops + 1))
    sleep 0.04
    kill -CONT "$pid" 2>/dev/null || break
    sleep 0.01
  done
  kill -CONT "$pid" 2>/dev/null
  [ "$stops" -ge 3 ]
}
