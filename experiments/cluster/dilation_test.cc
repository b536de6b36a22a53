#include "experiments/cluster/dilation.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include <string>
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
  // The host's kernels, when known, sit beside its step.
  EXPECT_FALSE(absl::StrContains(DescribeDilation(Gige(), *d), "OpenBLAS"));
  Dilation named = *d;
  named.host_kernels = "OpenBLAS Zen";
  EXPECT_TRUE(absl::StrContains(DescribeDilation(Gige(), named), "CPU, OpenBLAS Zen / target"))
      << DescribeDilation(Gige(), named);
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

TEST(DilationTest, SeveralDevicesShareANodesNicAndLoopback) {
  // 2 devices on a node of 1 CPU: the host step was measured on 0.5 CPU; d = 3. The
  // NIC is the node's (B / d); the loopback carries both devices' intra-node paths,
  // 2 x 1 Gbit/s / 3 = 666.666 Mbit/s, under what 1 CPU drives (400 MB/s = 3.2 Gbit/s).
  ClusterProfile p = Gige();
  p.intra_node = PathProfile{125e6, 1e-6};
  absl::StatusOr<Dilation> d = ComputeDilation(p, 0.240, 0.080, 1.0, /*can_delay=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->devices_per_node, 2);
  EXPECT_DOUBLE_EQ(d->device_cpus, 0.5);
  EXPECT_DOUBLE_EQ(d->intra_node.bytes_per_s, 125e6 / 3);
  EXPECT_TRUE(d->intra_node_emulated);
  EXPECT_DOUBLE_EQ(d->loopback_bytes_per_s, 2 * 125e6 / 3);
  EXPECT_EQ(DilatedNetworkProfile(*d), "bw=333333kbit,lo.bw=666666kbit");
  const std::string line = DescribeDilation(p, *d);
  EXPECT_TRUE(absl::StrContains(line, "on 0.50 CPU, one of 2 devices of a node of 1.00 CPU")) << line;
  EXPECT_TRUE(absl::StrContains(line, "shared by the node's 2 ranks")) << line;
  EXPECT_TRUE(absl::StrContains(line, "333.333 Mbit/s per device, 2 x that = 666.667 Mbit/s shaped on each node's loopback")) << line;
}

TEST(DilationTest, ALoopbackTheShareCannotDriveIsLeftUnshapedAndSaid) {
  // 10 GB/s x 2 / 3 = 53 Gbit/s, far above what 0.4 CPU drives (1.28 Gbit/s): the NIC
  // is still shaped, the loopback is not, and the line says so.
  absl::StatusOr<Dilation> d = ComputeDilation(Gige(), 0.240, 0.080, 0.4, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->device_cpus, 0.2);
  EXPECT_FALSE(d->intra_node_emulated);
  EXPECT_EQ(d->loopback_bytes_per_s, 0);
  EXPECT_EQ(DilatedNetworkProfile(*d), "bw=333333kbit");
  const std::string line = DescribeDilation(Gige(), *d);
  EXPECT_TRUE(absl::StrContains(line, "intra-node path not emulated: loopback is slower than 2 x 80 Gbit/s / d = "
                                      "53.3333 Gbit/s, more than a node of 0.40 CPU can drive (1.28 Gbit/s)"))
      << line;
}

TEST(DilationTest, OneDevicePerNodeHasNoIntraNodePath) {
  ClusterProfile p = Gige();
  p.devices_per_node = 1;
  absl::StatusOr<Dilation> d = ComputeDilation(p, 0.240, 0.080, 0.4, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->device_cpus, 0.4);
  EXPECT_FALSE(d->intra_node_emulated);
  EXPECT_EQ(DilatedNetworkProfile(*d), "bw=333333kbit");
  EXPECT_FALSE(absl::StrContains(DescribeDilation(p, *d), "intra-node"));
  EXPECT_TRUE(absl::StrContains(DescribeDilation(p, *d), "(host step 240.0 ms on 0.40 CPU / target 80.0 ms)"));
}

TEST(DilationTest, BadStepsAreInvalid) {
  EXPECT_EQ(ComputeDilation(Gige(), 0, 0.1, 1, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeDilation(Gige(), 0.1, -1, 1, false).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
