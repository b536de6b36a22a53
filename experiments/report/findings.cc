#include "experiments/report/findings.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "experiments/matrix/summary.h"

namespace ringside {
namespace {

using PointsByLabel = std::map<std::string, std::vector<const ReportPoint*>>;

// "1 worker", "4 workers".
std::string Workers(int n) { return absl::StrCat(n, n == 1 ? " worker" : " workers"); }

// "**label**", with the emulation said where the point is one:
// "**ddp-nccl** (emulated: 2 ranks share one GPU, NCCL over sockets)".
std::string Name(const ReportPoint& p) {
  if (!p.emulated) return absl::StrCat("**", p.label, "**");
  return absl::StrCat("**", p.label, "** (", EmulationNote(p.kind, p.workers, p.gpus), ")");
}

bool OnGpu(const ReportPoint& p) { return absl::StartsWith(p.device, "cuda"); }

// The busiest node's measured bytes per step (the larger direction) over its emulated
// link, in ms: a PS shard's over the master's link, a ring rank's over its own; 0 on
// loopback or without byte counts.
double WireMs(const ReportPoint& p, const FindingsContext& c) {
  const double link = p.kind == "ps" && c.master_link_bytes_per_s > 0 ? c.master_link_bytes_per_s
                                                                     : c.link_bytes_per_s;
  const double bytes = std::max(p.busiest_bytes_in, p.busiest_bytes_out);
  return link > 0 ? 1e3 * bytes / link : 0;
}

// Why the step takes what it takes at `w`'s worker count: compute against
// communication, the textbook traffic on the emulated link, and what dominates.
std::string Why(const ReportPoint& w, const FindingsContext& c, bool scales) {
  const double model_bytes = 4.0 * c.num_params;
  const double comm = w.comm_ms + w.wait_ms;
  const int n = w.workers;
  std::string out = absl::StrFormat("Per step, **%s** at %d workers computes for %.2f ms (forward and backward",
                                    w.label, n, w.compute_ms);
  if (w.data_ms > 0) absl::StrAppendFormat(&out, "; preparing the batch takes %.2f ms more", w.data_ms);
  absl::StrAppendFormat(&out, ") and communicates or waits for %.2f ms", comm);
  if (c.link_bytes_per_s > 0 && model_bytes > 0) {
    const double master = c.master_link_bytes_per_s > 0 ? c.master_link_bytes_per_s : c.link_bytes_per_s;
    absl::StrAppendFormat(&out,
                          "; moving the gradient (M = %.2f MB) over the emulated links takes N x M / B = "
                          "%.2f ms through a single master's link and 2(N-1)/N x M / B = %.2f ms per ring "
                          "rank (N = %d, B = %.3g Gbit/s)",
                          model_bytes / 1e6, 1e3 * n * model_bytes / master,
                          1e3 * 2.0 * (n - 1) / n * model_bytes / c.link_bytes_per_s, n,
                          c.link_bytes_per_s * 8 / 1e9);
  } else {
    absl::StrAppend(&out, "; the runs used loopback (no emulated link), so no link speed B sets the "
                          "textbook figures N x M / B (a master) and 2(N-1)/N x M / B (a ring rank): the "
                          "measured communication stands in for them");
  }
  if (c.dilation > 0) {
    absl::StrAppendFormat(&out, " (the links are cluster %s's NIC slowed by d = %.2f, so these times are "
                          "the cluster's scaled by d)", c.cluster, c.dilation);
  }
  absl::StrAppend(&out, ". ");
  const double wire = WireMs(w, c);
  if (comm > w.compute_ms && wire > 0 && wire < 0.5 * comm) {
    absl::StrAppendFormat(&out, "Communication and waiting outweigh compute %.1fx, but the link is not what "
                          "bounds them: the busiest node's bytes need %.2f ms on the wire against %.2f ms "
                          "measured, so the node's CPU share could not drive its link (give the nodes more "
                          "CPU or emulate a slower link).\n\n",
                          comm / std::max(w.compute_ms, 1e-9), wire, comm);
  } else if (comm > w.compute_ms) {
    absl::StrAppendFormat(&out, "Communication outweighs compute %.1fx, ", comm / std::max(w.compute_ms, 1e-9));
    absl::StrAppend(&out, scales ? "which is what keeps the speedup below the worker count.\n\n"
                                 : "so each added worker costs more time than it saves: that is why "
                                   "nothing scales.\n\n");
  } else if (c.cores > 0 && n > c.cores) {
    absl::StrAppendFormat(&out, "Compute dominates, and the %d workers share this machine's %d cores, so "
                          "together they compute no faster than %d would%s.\n\n",
                          n, c.cores, c.cores, scales ? "" : ": that is why nothing scales");
  } else {
    absl::StrAppend(&out, scales ? "Compute dominates the step.\n\n"
                                 : "Compute dominates the step, yet the workers run slower than one "
                                   "process: per-worker overheads (the shards' or the reducer's work, "
                                   "cache and memory contention) take what the split saves.\n\n");
  }
  return out;
}

// The first paragraph: who wins at the largest shared worker count, by how much,
// whether anything scales, and why (Why).
std::string Verdict(const std::vector<std::string>& order, const PointsByLabel& by_label,
                    const FindingsContext& c) {
  std::map<int, int> labels_at;  // Worker count -> strategies that reached it.
  int top_any = 0;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      ++labels_at[p->workers];
      top_any = std::max(top_any, p->workers);
    }
  }
  int top = top_any;
  for (const auto& [workers, count] : labels_at) {
    if (count >= 2) top = workers;  // Largest count several strategies reached.
  }
  std::vector<const ReportPoint*> at_top;
  const ReportPoint* best = nullptr;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      if (p->workers == top) at_top.push_back(p);
      if (best == nullptr || p->speedup > best->speedup) best = p;
    }
  }
  std::stable_sort(at_top.begin(), at_top.end(), [](const ReportPoint* a, const ReportPoint* b) {
    return a->samples_per_sec > b->samples_per_sec;
  });
  const ReportPoint& winner = *at_top[0];
  std::string out;
  if (at_top.size() >= 2) {
    absl::StrAppendFormat(&out, "At %d workers %s is the fastest: %.0f samples/s, ", top, Name(winner),
                          winner.samples_per_sec);
    for (size_t i = 1; i < at_top.size(); ++i) {
      absl::StrAppendFormat(&out, "%s%.2fx **%s**'s", i > 1 ? ", " : "",
                            winner.samples_per_sec / std::max(at_top[i]->samples_per_sec, 1e-9),
                            at_top[i]->label);
      if (at_top[i]->emulated) absl::StrAppend(&out, " (emulated)");
    }
    absl::StrAppend(&out, ". ");
  } else {
    absl::StrAppendFormat(&out, "Only %s ran at %d workers: %.0f samples/s. ", Name(winner), top,
                          winner.samples_per_sec);
  }
  const bool scales = best->speedup > 1.0;
  if (scales) {
    absl::StrAppendFormat(&out, "**%s** scales best: %.2fx the single process's throughput at %d workers "
                          "(efficiency %.0f%%, %s scaling). ",
                          best->label, best->speedup, best->workers, 100 * best->efficiency,
                          c.strong_scaling ? "strong" : "weak");
  } else {
    absl::StrAppendFormat(&out, "No configuration scales: the best, **%s** at %s, reaches %.2fx the "
                          "single process's throughput (%s scaling). ",
                          best->label, Workers(best->workers), best->speedup, c.strong_scaling ? "strong" : "weak");
  }
  absl::StrAppend(&out, Why(winner, c, scales));
  // Emulated points, said once more where the verdict ends (its "\n\n").
  std::vector<std::string> emulated;
  for (const std::string& label : order) {
    std::vector<std::string> counts;
    for (const ReportPoint* p : by_label.at(label)) {
      if (p->emulated) counts.push_back(absl::StrCat(p->workers));
    }
    if (!counts.empty()) {
      emulated.push_back(absl::StrCat("**", label, "** at ", absl::StrJoin(counts, ", "), " workers"));
    }
  }
  if (!emulated.empty()) {
    out.resize(out.size() - 2);
    absl::StrAppend(&out, " Emulated: ", absl::StrJoin(emulated, "; "),
                    ": the ranks share one GPU (time-sliced) and NCCL connects them over sockets, so "
                    "those times are the emulation's, not those of one GPU per rank; compare them only "
                    "with each other.\n\n");
  }
  return out;
}

// One strategy: its speedup at its largest N, its peak, and what dominates there.
std::string StrategyParagraph(const std::vector<const ReportPoint*>& v, const FindingsContext& c) {
  const double model_bytes = 4.0 * c.num_params;
  const ReportPoint* best = v[0];
  for (const ReportPoint* p : v) {
    if (p->speedup > best->speedup) best = p;
  }
  const ReportPoint* last = v.back();
  std::string out = Name(*last);
  if (OnGpu(*last)) {
    absl::StrAppend(&out, " on ", last->device, last->kind == "ps" ? " (workers; the shards on the CPU)" : "");
  }
  absl::StrAppendFormat(&out, ": speedup %.2fx at %s (efficiency %.0f%%)", last->speedup,
                        Workers(last->workers), 100 * last->efficiency);
  if (best != last) {
    absl::StrAppendFormat(&out, "; it peaks at %.2fx with %d and then falls by %.0f%%", best->speedup,
                          best->workers, 100 * (1 - last->speedup / best->speedup));
  }
  const double comm = last->comm_ms + last->wait_ms;
  const double share = last->step_ms > 0 ? comm / last->step_ms : 0;
  absl::StrAppendFormat(&out, ". At %d workers communication and waiting take %.0f%% of the step (%.2f of %.2f ms)",
                        last->workers, 100 * share, comm, last->step_ms);
  if (model_bytes > 0 && last->busiest_bytes_in > 0) {
    const double ratio = (last->busiest_bytes_in + last->busiest_bytes_out) / 2 / model_bytes;
    if (last->kind == "ps") {
      // N x M / S: with S fixed it grows with N; with a shard per worker (S = N) it is
      // about M, flat in N, as a ring rank's.
      const bool shard_per_worker = last->workers > 1 && ratio < 1.5;
      absl::StrAppendFormat(&out, "; its busiest shard moves %.2f x M each way per step (N x M / S: %s)",
                            ratio, shard_per_worker ? "a shard per worker keeps it flat in N"
                                                    : "with S fixed it grows with N");
      // On emulated links: is that node's link what the step waits for? Its wire time
      // against the communication the worker saw.
      const double master = c.master_link_bytes_per_s > 0 ? c.master_link_bytes_per_s : c.link_bytes_per_s;
      const double bytes = std::max(last->busiest_bytes_in, last->busiest_bytes_out);
      const double wire_ms = master > 0 ? 1e3 * bytes / master : 0;
      // Named only where it matters: most of the communication and 30% of the step.
      if (wire_ms > 0 && comm > 0 && wire_ms >= 0.5 * comm && wire_ms >= 0.3 * last->step_ms) {
        const bool one_master = ratio >= last->workers - 0.5 && last->workers > 1;
        absl::StrAppendFormat(&out, ". **Its bottleneck is %s**: %.2f MB each way per step take %.0f ms at "
                              "%.3g Gbit/s, %.0f%% of the step%s",
                              one_master ? "the master's link" : "the link of its busiest shard's node",
                              bytes / 1e6, wire_ms, master * 8 / 1e9, 100 * wire_ms / last->step_ms,
                              one_master ? "; more shards (or a faster master link) relieve it" : "");
      }
      // Pattern against transport: the busiest link's bytes at its rate is what the
      // pattern costs on these links whatever carries it; the rest of the step's
      // communication is the transport's and the schedule's.
      if (wire_ms > 0 && comm > 0) {
        const double pattern = std::min(wire_ms, comm);
        absl::StrAppendFormat(&out, ". Of its %.0f ms of communication and waiting the pattern explains %.0f ms "
                              "(%.0f%%: its busiest link's bytes at the link's rate); the other %.0f ms are the "
                              "%s data plane's and the schedule's (per-call latency, the last chunk's reply, "
                              "the CPU the transfers take)",
                              comm, pattern, 100 * pattern / comm, comm - pattern,
                              last->ps_transport == "tcp" ? "TCP" : "gRPC");
      }
    } else {
      // The bytes tell which all-reduce ran: `auto` runs recursive doubling for buckets
      // under kAutoRecursiveDoublingBelowBytes (ddp_ring/allreduce_algorithm.h).
      if (!last->wire_format.empty() && last->wire_format != "fp32") {
        // --compress: the compressed ring, 2-byte values.
        const double ring = 2.0 * (last->workers - 1) / last->workers;
        absl::StrAppendFormat(&out, "; each rank moves %.2f x M per step (a ring's 2(N-1)/N = %.2f x M's values, "
                              "in %s: 2 bytes each, %.2f x M's float32 bytes)",
                              ratio, ring, last->wire_format, ring / 2);
      } else {
        absl::StrAppendFormat(&out, "; each rank moves %.2f x M per step (a ring's 2(N-1)/N = %.2f, almost flat "
                              "in N; recursive doubling's lg N = %.2f, which `auto` runs for buckets under "
                              "%d MiB)",
                              ratio, 2.0 * (last->workers - 1) / last->workers, std::log2(last->workers),
                              static_cast<int>(kAutoRecursiveDoublingBelowBytes >> 20));
      }
    }
  }
  absl::StrAppend(&out, ".\n\n");
  return out;
}

// "rank 3", "workers 1 and 2", "ranks 0, 1 and 3".
std::string WhoLate(const ReportPoint& p) {
  const std::string noun = p.kind == "ps" ? "worker" : "rank";
  if (p.late_ranks.size() == 1) return absl::StrCat(noun, " ", p.late_ranks[0]);
  std::vector<std::string> ids;
  for (int r : p.late_ranks) ids.push_back(absl::StrCat(r));
  const std::string last = ids.back();
  ids.pop_back();
  return absl::StrCat(noun, "s ", absl::StrJoin(ids, ", "), " and ", last);
}

// One line per point whose repeats named late ranks (ReportPoint.late_*), e.g. "**ddp**
// x4: rank 3 was last in 96% of steps; the others waited a median 41.0 ms per step for
// it (28% of the step)."; "" when none did.
std::string LateParagraph(const std::vector<std::string>& order, const PointsByLabel& by_label) {
  std::vector<std::string> lines;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      if (p->late_ranks.empty()) continue;
      const bool one = p->late_ranks.size() == 1;
      std::string sync;
      if (p->kind == "ps" && !p->ps_sync.empty()) {
        sync = absl::StrCat(" (", absl::AsciiStrToUpper(p->ps_sync), ")");
      }
      lines.push_back(absl::StrFormat(
          "- %s x%d%s: %s %s last in %.0f%% of steps; the others waited a median %.1f ms per "
          "step for %s (%.0f%% of the step).",
          Name(*p), p->workers, sync, WhoLate(*p), one ? "was" : "were", 100 * p->late_share,
          p->late_wait_ms, one ? "it" : "them", 100 * p->late_wait_fraction));
    }
  }
  if (lines.empty()) return "";
  return absl::StrCat(
      "Late ranks (the others waited for them; DDP: the rank that finished backward last "
      "waits least in the all-reduce; PS: the worker whose push reached the shards last):\n\n",
      absl::StrJoin(lines, "\n"), "\n\n");
}

// The single process's point (the baseline every compute time is compared with), or
// null.
const ReportPoint* SinglePoint(const std::vector<ReportPoint>& points) {
  for (const ReportPoint& p : points) {
    if (p.kind == "single" && p.ok_repeats > 0) return &p;
  }
  return nullptr;
}

// Points computing kComputeSlowdownFraction or more slower than the single process: the
// ring's or the pushes' transfers run on the node's CPU share too. "" when none.
std::string ComputeSlowdownParagraph(const std::vector<std::string>& order, const PointsByLabel& by_label,
                                     const ReportPoint* single) {
  if (single == nullptr || single->compute_ms <= 0) return "";
  std::vector<std::string> lines;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      const double compute = ComputeAtSinglePace(*p);
      if (p->workers < 2 || OnGpu(*p) || compute <= 0) continue;
      const double slower = compute / single->compute_ms - 1;
      if (slower < kComputeSlowdownFraction) continue;
      std::string model;
      if (p->predicted_comm_cpu_ms > 0) {
        // The calibrated CPU cost of the transfers against what was measured: a larger
        // slowdown is the host's (its other work, the kernel's network path outside the
        // node's share), not the cluster's.
        const double extra = compute - single->compute_ms;
        if (p->predicted_comm_cpu_ms > extra) {
          // More CPU than the compute lost: the rest ran while the step waited on its
          // peers (the pushes' replies, the ring's last bucket), not inside compute.
          model = absl::StrFormat(
              "; the transfers' calibrated CPU cost, %.1f ms a step, is more than the %.1f ms compute lost: the "
              "rest of it ran while the step waited",
              p->predicted_comm_cpu_ms, extra);
        } else {
          model = absl::StrFormat("; the transfers' calibrated CPU cost accounts for %.1f ms of the %.1f%s",
                                  p->predicted_comm_cpu_ms, extra,
                                  extra > 2 * p->predicted_comm_cpu_ms
                                      ? ", the rest is the host's (other work, the kernel's network path outside "
                                        "the node's share)"
                                      : "");
        }
      }
      lines.push_back(absl::StrFormat(
          "- %s x%d: compute %.0f%% slower than the single process's (%.2f against %.2f ms per step%s): %s%s",
          Name(*p), p->workers, 100 * slower, compute, single->compute_ms,
          p->paced_compute_ms > 0 ? ", at the single's pace" : "",
          p->kind == "ps" ? "its pushes and pulls (and any shard on its node) share the node's CPU"
                          : "the ring's transfers share the node's CPU",
          model));
    }
  }
  if (lines.empty()) return "";
  return absl::StrCat("Compute beside communication (communication's CPU cost, part of each step):\n\n",
                      absl::StrJoin(lines, "\n"), "\n\n");
}

// Points whose prediction misses by more than kPredictionMissFraction, with the likely
// cause where the numbers name one. "" when none (or no predictions).
std::string PredictionMissParagraph(const std::vector<std::string>& order, const PointsByLabel& by_label,
                                    const ReportPoint* single, const FindingsContext& c) {
  std::vector<std::string> lines;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      const double measured = StepForModel(*p);
      if (p->predicted_step_ms <= 0 || measured <= 0) continue;
      const double error = (p->predicted_step_ms - measured) / measured;
      if (std::fabs(error) <= kPredictionMissFraction) continue;
      std::vector<std::string> causes;
      const double comm = p->comm_ms + p->wait_ms;
      const double wire = WireMs(*p, c);
      if (wire > 0 && comm > 2 * wire) {
        causes.push_back(absl::StrFormat("the node share could not drive its link (communication %.1f ms "
                                         "against %.1f ms on the wire)", comm, wire));
      } else if (wire > 0 && comm > (1 + kPredictionMissFraction) * (wire + p->predicted_join_ms)) {
        // The model moves the busiest link's bytes at the link's rate (plus, on emulated
        // nodes with a calibrated join, the wait for the slowest worker's stream); the
        // streams ran slower. Where the transfers' CPU fills a good part of the node's
        // share over that time, the share's quota (whole periods, netem/cpu_share.h) runs
        // the senders in bursts; under BSP each PS chunk also waits for the slowest
        // worker's push of it (docs/benchmarks.md, issue #35).
        const double join = p->predicted_join_ms;
        std::string cause =
            join > 0 ? absl::StrFormat("communication %.2fx its wire time and the calibrated wait for the slowest "
                                       "worker's stream (%.1f against %.1f + %.1f ms): the streams ran below the "
                                       "link's rate beyond that wait",
                                       comm / (wire + join), comm, wire, join)
                     : absl::StrFormat("communication %.2fx its wire time (%.1f against %.1f ms): the "
                                       "streams ran below the link's rate",
                                       comm / wire, comm, wire);
        // Only BSP's shards hold a chunk's reply for every worker's push of it.
        if (p->kind == "ps" && (p->ps_sync.empty() || p->ps_sync == "bsp") && join <= 0) {
          absl::StrAppend(&cause, ", each chunk waiting for the slowest worker's push");
        }
        if (p->predicted_comm_cpu_ms > 0) {
          absl::StrAppendFormat(&cause,
                                ", their calibrated CPU filling %.0f%% of the node's share over that "
                                "wire time (its quota runs the senders in bursts)",
                                100 * p->predicted_comm_cpu_ms / wire);
        }
        causes.push_back(cause);
      }
      if (single != nullptr && single->compute_ms > 0 &&
          ComputeAtSinglePace(*p) > (1 + kComputeSlowdownFraction) * single->compute_ms) {
        causes.push_back(absl::StrFormat("compute %.0f%% slower than the single process's (the transfers "
                                         "share the node's CPU)",
                                         100 * (ComputeAtSinglePace(*p) / single->compute_ms - 1)));
      }
      if (p->kind == "ps" && p->ranks_per_node > 1) {
        causes.push_back("a shard's aggregation and SGD run beside its worker on one node's CPU share");
      }
      lines.push_back(absl::StrFormat("- %s x%d: predicted %.1f ms, measured %.1f ms (%+.0f%%)%s", Name(*p),
                                      p->workers, p->predicted_step_ms, measured, 100 * error,
                                      causes.empty() ? std::string("; no cause the numbers name")
                                                     : absl::StrCat(": likely ", absl::StrJoin(causes, "; "))));
    }
  }
  if (lines.empty()) return "";
  return absl::StrFormat("Predictions that miss by more than %.0f%% (marked ! in the table):\n\n%s\n\n",
                         100 * kPredictionMissFraction, absl::StrJoin(lines, "\n"));
}

// PS points with two or more shards whose traffic is uneven (the hottest shard above
// kHotShardFactor x an even share) or whose placement deals whole tensors: the hottest
// shard and its share of the servers' bytes. "" when none.
std::string HotShardParagraph(const std::vector<std::string>& order, const PointsByLabel& by_label) {
  std::vector<std::string> lines;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      if (p->kind != "ps" || p->shard_bytes.size() < 2) continue;
      const HottestShard hot = FindHottestShard(*p);
      const double even = 1.0 / p->shard_bytes.size();
      const bool placed = !p->ps_placement.empty() && p->ps_placement != "balanced";
      if (hot.shard < 0 || (!placed && hot.share <= kHotShardFactor * even)) continue;
      lines.push_back(absl::StrFormat(
          "- %s x%d (placement %s): shard %d carries %.0f%% of the servers' traffic (%.2f MB per step in and "
          "out; an even cut would give each %.0f%%)%s",
          Name(*p), p->workers, p->ps_placement.empty() ? "balanced" : p->ps_placement, hot.shard, 100 * hot.share,
          p->shard_bytes[hot.shard] / 1e6, 100 * even,
          hot.share > kHotShardFactor * even ? ": its link and its aggregation bound the step, whatever the shard count"
                                             : ""));
    }
  }
  if (lines.empty()) return "";
  return absl::StrCat("Where the parameter server's traffic lands:\n\n", absl::StrJoin(lines, "\n"), "\n\n");
}

// Summation servers (BytePS) beside a ring at the same worker count: the communication
// and waiting per step of each (in the cluster's time where both ran on a dilation:
// each cell's links were shaped for its own d), their ratio, and what the pattern
// predicts from bytes alone: k dedicated servers move max(1, n/k) x M / B through the
// busiest link, the ring 2(n-1)/n x M / B. "" without such a pair.
std::string SummationParagraph(const std::vector<std::string>& order, const PointsByLabel& by_label) {
  std::vector<std::string> lines;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label.at(label)) {
      if (p->kind != "ps" || p->ps_mode != "summation" || p->shard_bytes.empty()) continue;
      const int n = p->workers;
      const int k = static_cast<int>(p->shard_bytes.size());
      for (const std::string& other : order) {
        for (const ReportPoint* r : by_label.at(other)) {
          if (r->kind != "ddp" || r->workers != n || n < 2) continue;
          const bool cluster = p->cluster_comm_ms > 0 && r->cluster_comm_ms > 0;
          const double mine = cluster ? p->cluster_comm_ms : p->comm_ms + p->wait_ms;
          const double ring = cluster ? r->cluster_comm_ms : r->comm_ms + r->wait_ms;
          if (!(ring > 0)) continue;
          const double pattern = std::max(1.0, double(n) / k) / (2.0 * (n - 1) / n);
          lines.push_back(absl::StrFormat(
              "- %s x%d (k = %d summation servers) communicates and waits %.1f ms per step%s, %.2f of %s's %.1f ms "
              "(%.0f%% less); the bytes alone predict %.2f (max(1, n/k) x M through the busiest link against the "
              "ring's 2(n-1)/n x M)",
              Name(*p), n, k, mine, cluster ? " in the cluster's time" : "", mine / ring, Name(*r), ring,
              100 * (1 - mine / ring), pattern));
        }
      }
    }
  }
  if (lines.empty()) return "";
  return absl::StrCat("Summation servers against the ring (BytePS: the servers only sum; every worker runs SGD):\n\n",
                      absl::StrJoin(lines, "\n"), "\n\n");
}

}  // namespace

std::string Findings(const std::vector<ReportPoint>& points, const FindingsContext& context) {
  PointsByLabel by_label;
  std::vector<std::string> order;
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0 || p.kind == "single") continue;
    if (by_label[p.label].empty()) order.push_back(p.label);
    by_label[p.label].push_back(&p);
  }
  if (order.empty()) return "No multi-worker cell finished.\n";
  std::string out = Verdict(order, by_label, context);
  for (const std::string& label : order) {
    absl::StrAppend(&out, StrategyParagraph(by_label[label], context));
  }
  absl::StrAppend(&out, LateParagraph(order, by_label));
  absl::StrAppend(&out, HotShardParagraph(order, by_label));
  absl::StrAppend(&out, SummationParagraph(order, by_label));
  const ReportPoint* single = SinglePoint(points);
  absl::StrAppend(&out, ComputeSlowdownParagraph(order, by_label, single));
  absl::StrAppend(&out, PredictionMissParagraph(order, by_label, single, context));
  return out;
}

}  // namespace ringside
