#include "experiments/bench/raw_tcp_bench.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// Messages cross the loopback connection whole: the rate is the message over its
// median time, and it is a rate a loopback socket can have (above 1 MB/s).
TEST(RawTcpBench, MovesTheMessagesAndRatesThem) {
  RawTcpBenchOptions o;
  o.bytes = 1 << 20;
  o.iters = 3;
  absl::StatusOr<RawTcpResult> r = MeasureRawTcp(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->median_s, 0);
  EXPECT_DOUBLE_EQ(r->bytes_per_s, static_cast<double>(o.bytes) / r->median_s);
  EXPECT_GT(r->bytes_per_s, 1e6);
}

TEST(RawTcpBench, RefusesEmptyMessagesAndNoIterations) {
  RawTcpBenchOptions o;
  o.bytes = 0;
  EXPECT_EQ(MeasureRawTcp(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.bytes = 4;
  o.iters = 0;
  EXPECT_EQ(MeasureRawTcp(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside
