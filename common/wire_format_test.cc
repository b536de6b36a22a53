#include "common/wire_format.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ringside {
namespace {

TEST(WireFormatTest, HalfClosedForms) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);             // The largest finite value.
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);             // Below the tie: down.
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);             // The tie: to even, which is inf.
  EXPECT_EQ(FloatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // The smallest normal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // The smallest subnormal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // Tie: to even (zero).
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: to even (2).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);       // Tie: to even.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);       // Tie: to even.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // Above: up.
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(HalfToFloat(nan)));
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(WireFormatTest, Bfloat16ClosedForms) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // Tie: to even.
  EXPECT_EQ(FloatToBfloat16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // Tie: to even.
  EXPECT_EQ(FloatToBfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // Rounds to inf.
  EXPECT_EQ(FloatToBfloat16(1e30f), 0x714a);  // 0x7149f2ca rounded up: no overflow.
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(Bfloat16ToFloat(0x3f80), 1.0f);
}

// Every code that is not a NaN decodes to a float that encodes back to it.
TEST(WireFormatTest, EveryCodeRoundTrips) {
  for (uint32_t code = 0; code < 0x10000; ++code) {
    const uint16_t c = static_cast<uint16_t>(code);
    const float h = HalfToFloat(c);
    if (std::isnan(h)) {
      EXPECT_TRUE((c & 0x7c00) == 0x7c00 && (c & 0x3ff) != 0) << std::hex << code;
    } else {
      EXPECT_EQ(FloatToHalf(h), c) << std::hex << code;
    }
    const float b = Bfloat16ToFloat(c);
    if (!std::isnan(b)) {
      EXPECT_EQ(FloatToBfloat16(b), c) << std::hex << code;
    }
  }
}

// Round to nearest: no neighbouring code is closer to x than the one chosen.
TEST(WireFormatTest, EncodingIsTheNearestCode) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-26.0f, 16.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng));
    const uint16_t h = FloatToHalf(x);
    if ((h & 0x7fff) >= 0x7c00) continue;  // Overflowed to inf.
    const double err = std::fabs(double(x) - HalfToFloat(h));
    for (int d : {-1, 1}) {
      const uint16_t other = static_cast<uint16_t>(h + d);
      if ((other & 0x7fff) >= 0x7c00 || ((other ^ h) & 0x8000)) continue;
      EXPECT_LE(err, std::fabs(double(x) - HalfToFloat(other))) << x;
    }
    const uint16_t b = FloatToBfloat16(x);
    const double berr = std::fabs(double(x) - Bfloat16ToFloat(b));
    for (int d : {-1, 1}) {
      const uint16_t other = static_cast<uint16_t>(b + d);
      if ((other ^ b) & 0x8000) continue;
      EXPECT_LE(berr, std::fabs(double(x) - Bfloat16ToFloat(other))) << x;
    }
  }
}

// The bulk calls (F16C's instructions on x86-64 CPUs that have them) give the scalar
// codes on values of every kind, tails included.
TEST(WireFormatTest, BulkCodesEqualTheScalarCodes) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-30.0f, 18.0f);
  std::vector<float> in(10007);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (i % 3 ? 1.0f : -1.0f) * std::exp2(exponent(rng));
  in[0] = 0.0f;
  in[1] = -0.0f;
  in[2] = std::numeric_limits<float>::infinity();
  in[3] = 65520.0f;
  in[4] = std::ldexp(3.0f, -25);
  in[5] = std::numeric_limits<float>::quiet_NaN();
  const int64_t n = static_cast<int64_t>(in.size());
  for (WireFormat f : {WireFormat::kFp16, WireFormat::kBf16}) {
    std::vector<uint16_t> wire(in.size());
    EncodeWire(f, in.data(), n, wire.data());
    std::vector<float> back(in.size()), sum(in.size(), 0.5f);
    DecodeWire(f, wire.data(), n, back.data());
    DecodeAddWire(f, wire.data(), n, sum.data());
    for (size_t i = 0; i < in.size(); ++i) {
      if (std::isnan(in[i]) && f == WireFormat::kFp16) {  // F16C keeps the payload's top bits.
        EXPECT_TRUE(std::isnan(back[i]));
        continue;
      }
      const uint16_t want = f == WireFormat::kFp16 ? FloatToHalf(in[i]) : FloatToBfloat16(in[i]);
      ASSERT_EQ(wire[i], want) << WireFormatName(f) << " " << in[i];
      const float value = f == WireFormat::kFp16 ? HalfToFloat(want) : Bfloat16ToFloat(want);
      if (std::isnan(value)) {
        EXPECT_TRUE(std::isnan(back[i]) && std::isnan(sum[i]));
        continue;
      }
      ASSERT_EQ(back[i], value) << i;
      ASSERT_EQ(sum[i], 0.5f + value) << i;
    }
  }
}

TEST(WireFormatTest, BulkCallsMatchTheScalarOnes) {
  const std::vector<float> in = {1.0f, -3.5f, 1e-6f, 70000.0f, 0.1f};
  for (WireFormat f : {WireFormat::kFp16, WireFormat::kBf16}) {
    std::vector<uint16_t> wire(in.size());
    EncodeWire(f, in.data(), static_cast<int64_t>(in.size()), wire.data());
    std::vector<float> out(in.size());
    DecodeWire(f, wire.data(), static_cast<int64_t>(in.size()), out.data());
    std::vector<float> sum(in.size(), 1.0f);
    DecodeAddWire(f, wire.data(), static_cast<int64_t>(in.size()), sum.data());
    for (size_t i = 0; i < in.size(); ++i) {
      const float one = f == WireFormat::kFp16 ? HalfToFloat(FloatToHalf(in[i]))
                                                : Bfloat16ToFloat(FloatToBfloat16(in[i]));
      EXPECT_EQ(out[i], one);
      EXPECT_EQ(sum[i], 1.0f + one);
    }
  }
  EXPECT_EQ(WireBytesPerValue(WireFormat::kFp32), 4);
  EXPECT_EQ(WireBytesPerValue(WireFormat::kFp16), 2);
  EXPECT_STREQ(WireFormatName(WireFormat::kBf16), "bf16");
}

}  // namespace
}  // namespace ringside
