#include "experiments/cluster/dilation.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

ClusterProfile Gige() {
  ClusterProfile p;
  p.name = "gige";
  p.nic = PathProfile{125e6, 50e-6};  // 1 Gbit/s, 50 us.
  p.devices_per_node = 2;
  p.intra_node = PathProfile{10e9, 1e-6};
  return p;
}

TEST(DilationTest, LinksShapedToRateOverD) {
  // d = 240 / 80 = 3: a host step is three target steps, so the link carries a third
  // of the target's bytes per host second.
  absl::StatusOr<Dilation> d = ComputeDilation(Gige(), 0.240, 0.080, 0.4, /*can_delay=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->factor, 3);
  EXPECT_DOUBLE_EQ(d->nic.bytes_per_s, 125e6 / 3);
  EXPECT_DOUBLE_EQ(d->nic.latency_s, 150e-6);
  EXPECT_DOUBLE_EQ(d->intra_node.bytes_per_s, 10e9 / 3);
  EXPECT_FALSE(d->latency_emulated);
  // 333.333 Mbit/s, rounded down to whole kbit/s.
  EXPECT_EQ(DilatedNetworkProfile(*d), "bw=333333kbit");
  EXPECT_TRUE(absl::StrContains(DescribeDilation(Gige(), *d), "d = 3.00")) << DescribeDilation(Gige(), *d);
  EXPECT_TRUE(absl::StrContains(DescribeDilation(Gige(), *d), "not emulated"));
}

TEST(DilationTest, CommunicationOverComputeIsTheTargetsAtAnyHostSpeed) {
  // Whatever the host's step, (bytes / shaped rate) / host step = (bytes / B) / target step.
  const double bytes = 2.33e6, target = 0.080;
  for (double host : {0.05, 0.1, 0.235, 0.485, 0.97}) {
    absl::StatusOr<Dilation> d = ComputeDilation(Gige(), host, target, 0, false);
    if (!d.ok()) continue;  // Host too fast for the link at one CPU: tested below.
    EXPECT_NEAR((bytes / d->nic.bytes_per_s) / host, (bytes / 125e6) / target, 1e-12) << host;
  }
}

TEST(DilationTest, DelayWhereTheKernelCan) {
  absl::StatusOr<Dilation> d = ComputeDilation(Gige(), 0.2, 0.1, 1, /*can_delay=*/true);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->latency_emulated);
  EXPECT_EQ(DilatedNetworkProfile(*d), "bw=500mbit,delay=100us");
}

TEST(DilationTest, LinkTheShareCannotDriveIsRefused) {
  // d = 0.5 (host twice the target's speed): 2 Gbit/s on 0.4 CPU is beyond
  // kMaxShapedBytesPerSecPerCpu x 0.4.
  absl::StatusOr<Dilation> d = ComputeDilation(Gige(), 0.040, 0.080, 0.4, false);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(d.status().message(), "cluster gige cannot be emulated here")) << d.status();
  EXPECT_TRUE(absl::StrContains(d.status().message(), "more than a node of 0.40 CPU can drive"));
}

TEST(DilationTest, LinkBelowWhatTcShapesIsRefused) {
  absl::StatusOr<Dilation> d = ComputeDilation(Gige(), 1000, 0.001, 1, false);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(d.status().message(), "below what tc can shape")) << d.status();
}

TEST(DilationTest, BadStepsAreInvalid) {
  EXPECT_EQ(ComputeDilation(Gige(), 0, 0.1, 1, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeDilation(Gige(), 0.1, -1, 1, false).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
