#include "experiments/netem/bandwidth.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(ParseBandwidthTest, BitsAndBytes) {
  EXPECT_EQ(*ParseBandwidth("1gbit"), 1.25e8);
  EXPECT_EQ(*ParseBandwidth("10Gbit/s"), 1.25e9);
  EXPECT_EQ(*ParseBandwidth("100mbit"), 1.25e7);
  EXPECT_EQ(*ParseBandwidth("25gbit"), 3.125e9);
  EXPECT_EQ(*ParseBandwidth("2.5 Gbit"), 3.125e8);
  EXPECT_EQ(*ParseBandwidth("12.5mbit"), 1562500.0);
  EXPECT_EQ(*ParseBandwidth("125MB/s"), 1.25e8);
  EXPECT_EQ(*ParseBandwidth("1MiB/s"), 1048576.0);
  // A bare number is bits per second, as tc reads it.
  EXPECT_EQ(*ParseBandwidth("1e9"), 1.25e8);
  EXPECT_EQ(*ParseBandwidth("8000"), 1000.0);
  for (const char* bad : {"", "fast", "0gbit", "-1gbit", "1 furlong", "1mb/s", "gbit", "inf"}) {
    EXPECT_EQ(ParseBandwidth(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseBandwidthTest, BpsUnitsAreRefusedAsAmbiguous) {
  for (const char* bad : {"25gbps", "100mbps", "1Gbps"}) {
    absl::StatusOr<double> b = ParseBandwidth(bad);
    ASSERT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(b.status().message(), "bytes")) << b.status();
  }
}

TEST(ParseBandwidthTest, ListsAndFormats) {
  absl::StatusOr<std::vector<double>> list = ParseBandwidthList("100mbit, 1gbit,10gbit");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<double>{1.25e7, 1.25e8, 1.25e9}));
  EXPECT_FALSE(ParseBandwidthList(" , ").ok());
  EXPECT_EQ(FormatBandwidth(1.25e8), "1 Gbit/s");
  EXPECT_EQ(FormatBandwidth(1.25e7), "100 Mbit/s");
  EXPECT_EQ(FormatBitRate(1e9), "1gbit");
  EXPECT_EQ(FormatBitRate(12.5e6), "12500kbit");
  EXPECT_EQ(FormatBitRate(7), "7bit");
  // What FormatBitRate writes parses back to the same rate.
  for (double bits : {1e9, 12.5e6, 3e3, 7.0}) {
    EXPECT_EQ(*ParseBandwidth(FormatBitRate(bits)) * 8, bits) << bits;
  }
}

}  // namespace
}  // namespace ringside
