# Sourced (after tests/test_lib.sh) by the tests of emulated nodes' CPU shares. Sets
# ROOT to the cgroup hierarchy with the cpu controller (v1 /sys/fs/cgroup/cpu[,cpuacct],
# or the v2 root), or skips the rest of the test (skip: counted as skipped) when it
# cannot create cgroups (not root, no cpu controller). ours: the cgroups ringside's CPU
# shares made (rs<pid>_<n>_n<node>).
ROOT=""
for d in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup; do
  if [ -e "$d/cpu.cfs_period_us" ] || { [ -e "$d/cgroup.controllers" ] && grep -qw cpu "$d/cgroup.controllers"; }; then ROOT=$d; break; fi
done
if [ "$(id -u)" -ne 0 ] || [ -z "$ROOT" ]; then
  skip "needs root and a cgroup cpu controller (uid $(id -u), cpu root '${ROOT}')"
fi
ours() { ls "$ROOT" | grep -E '^rs[0-9a-f]+_[0-9]+_n[0-9]+$' | sort; }
# new_since BEFORE: ours that BEFORE (an earlier `ours`) did not list (test_lib.sh's
# `added`).
new_since() { added "$1" "$(ours)"; }
