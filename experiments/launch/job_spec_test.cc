// The typed job description and its wire form: each typed field written into a
// RunConfig comes back from the readers at the edges where a configuration arrives.
#include "experiments/launch/job_spec.h"

#include "gtest/gtest.h"
#include "ps_server/server_role.h"

namespace ringside {
namespace {

TEST(JobSpecTest, StrategiesParseByTheirNames) {
  for (JobStrategy s : {JobStrategy::kSingle, JobStrategy::kDp, JobStrategy::kPs, JobStrategy::kDdp}) {
    absl::StatusOr<JobStrategy> parsed = ParseJobStrategy(JobStrategyName(s));
    ASSERT_TRUE(parsed.ok()) << JobStrategyName(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(ParseJobStrategy("foo").status().message(),
            "unknown strategy 'foo' (expected single, dp, ps or ddp)");
  EXPECT_TRUE(IsMultiProcess(JobStrategy::kPs));
  EXPECT_TRUE(IsMultiProcess(JobStrategy::kDdp));
  EXPECT_FALSE(IsMultiProcess(JobStrategy::kDp));
  EXPECT_FALSE(IsMultiProcess(JobStrategy::kSingle));
}

TEST(JobSpecTest, BackendsByTheirNames) {
  for (Backend b : {Backend::kGloo, Backend::kNccl}) {
    ASSERT_TRUE(BackendNamed(BackendName(b)).has_value());
    EXPECT_EQ(*BackendNamed(BackendName(b)), b);
  }
  EXPECT_FALSE(BackendNamed("mpi").has_value());
}

TEST(JobSpecTest, PsFieldsRoundTripThroughTheRunConfig) {
  for (SyncPolicy sync : {SyncPolicy{SyncMode::kBsp, 0}, SyncPolicy{SyncMode::kSsp, 3},
                          SyncPolicy{SyncMode::kSsp, 0}, SyncPolicy{SyncMode::kAsp, 0}}) {
    JobSpec spec;
    spec.strategy = JobStrategy::kPs;
    spec.ps = PsLayout(/*shards=*/2, /*workers=*/3, /*colocated=*/true);
    spec.sync = sync;
    RunConfig config;
    WriteTypedFields(spec, &config);
    EXPECT_EQ(config.strategy(), "ps");
    EXPECT_EQ(config.world_size(), 3);
    EXPECT_EQ(PsLayout::Of(config), spec.ps);
    absl::StatusOr<SyncPolicy> back = SyncPolicyOf(config);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->mode, sync.mode);
    EXPECT_EQ(back->staleness, sync.staleness);
    EXPECT_EQ(SyncPolicyText(*back), SyncPolicyText(sync));
  }
}

TEST(JobSpecTest, SyncPolicyOfRefusesWhatNoFlagCouldGive) {
  RunConfig config;
  config.set_ps_sync("ssp");
  config.set_ps_staleness(-1);
  EXPECT_EQ(SyncPolicyOf(config).status().message(),
            "--ps_sync must be bsp, ssp:K (K >= 0) or asp, got 'ssp:-1'");
  config.set_ps_sync("bulk");
  EXPECT_FALSE(SyncPolicyOf(config).ok());
}

TEST(JobSpecTest, OtherStrategiesWriteTheirOwnFieldsOnly) {
  JobSpec spec;
  spec.strategy = JobStrategy::kDp;
  spec.workers = 4;
  RunConfig config;
  WriteTypedFields(spec, &config);
  EXPECT_EQ(config.strategy(), "dp");
  EXPECT_EQ(config.world_size(), 4);
  EXPECT_EQ(config.ps_shards(), 0);
  spec.strategy = JobStrategy::kSingle;
  RunConfig single;
  WriteTypedFields(spec, &single);
  EXPECT_EQ(single.strategy(), "single");
  EXPECT_EQ(single.world_size(), 0);
}

TEST(JobSpecTest, EmulationParsesEachFlagAndRemembersWhichWereGiven) {
  absl::StatusOr<EmulationSpec> none = ParseEmulationSpec("", "", 1, "");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->requested());
  EXPECT_FALSE(none->network.enabled);
  EXPECT_FALSE(none->node_cpus.enabled);
  EXPECT_FALSE(none->slow_node.enabled);

  absl::StatusOr<EmulationSpec> e = ParseEmulationSpec("bw=1gbit", "0.5", 2, "1:0.5");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->requested());
  EXPECT_TRUE(e->network.enabled);
  EXPECT_DOUBLE_EQ(e->network.link.bits_per_sec, 1e9);
  EXPECT_TRUE(e->node_cpus.enabled);
  EXPECT_DOUBLE_EQ(e->node_cpus.cpus, 0.5);
  EXPECT_EQ(e->ranks_per_node, 2);
  EXPECT_TRUE(e->slow_node.enabled);
  EXPECT_EQ(e->slow_node.rank, 1);

  // "none" emulates nothing, but was given.
  absl::StatusOr<EmulationSpec> named = ParseEmulationSpec("none", "none", 1, "none");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_FALSE(named->network.enabled);
  EXPECT_TRUE(named->network_given && named->node_cpus_given && named->slow_node_given);
  EXPECT_TRUE(named->requested());
  EXPECT_TRUE(ParseEmulationSpec("", "", 3, "")->requested());

  // Bad values: the netem parsers' errors, the slow node's first.
  EXPECT_EQ(ParseEmulationSpec("bw=fast", "lots", 1, "one").status().message(),
            ParseSlowNode("one").status().message());
  EXPECT_EQ(ParseEmulationSpec("bw=fast", "lots", 1, "").status().message(),
            ParseNetworkProfile("bw=fast").status().message());
  EXPECT_EQ(ParseEmulationSpec("", "lots", 1, "").status().message(),
            ParseNodeCpus("lots").status().message());
}

}  // namespace
}  // namespace ringside
