#include "common/wire_format.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ringside {
namespace {

uint32_t BitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float FloatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// float32 bit patterns at binary16's edges.
constexpr uint32_t kFloatInf = 0x7f800000;
constexpr uint32_t kHalfOverflow = 0x477ff000;   // 65520: the tie above 65504 rounds to inf.
constexpr uint32_t kHalfMinNormal = 0x38800000;  // 2^-14.

}  // namespace

const char* WireFormatName(WireFormat format) {
  switch (format) {
    case WireFormat::kFp16:
      return "fp16";
    case WireFormat::kBf16:
      return "bf16";
    case WireFormat::kFp32:
      break;
  }
  return "fp32";
}

int WireBytesPerValue(WireFormat format) { return format == WireFormat::kFp32 ? 4 : 2; }

uint16_t FloatToHalf(float x) {
  const uint32_t f = BitsOf(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  uint32_t abs = f & 0x7fffffff;
  if (abs >= kFloatInf) return sign | (abs > kFloatInf ? 0x7e00 : 0x7c00);  // NaN (quiet), inf.
  if (abs >= kHalfOverflow) return sign | 0x7c00;
  if (abs < kHalfMinNormal) {
    // Subnormal (or zero): a multiple of 2^-24, rounded to nearest even by the default
    // rounding mode; 1024 (x just below 2^-14 rounding up) is the smallest normal's code.
    return sign | static_cast<uint16_t>(std::nearbyint(FloatOf(abs) * 16777216.0f));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to
  // nearest even; a carry out of the mantissa moves into the exponent, as it should.
  abs += 0xc8000fff + ((abs >> 13) & 1);
  return sign | static_cast<uint16_t>(abs >> 13);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {  // Zero or subnormal: mantissa x 2^-24, exact in float32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return FloatOf(sign | kFloatInf | (mantissa << 13));
  return FloatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToBfloat16(float x) {
  const uint32_t f = BitsOf(x);
  const uint32_t rounded = (f + 0x7fff + ((f >> 16) & 1)) >> 16;  // Low 16 bits to nearest even.
  // Branch-free, so that the bulk loops vectorize.
  return static_cast<uint16_t>((f & 0x7fffffff) > kFloatInf ? (f >> 16) | 0x40 : rounded);  // NaN: quiet.
}

float Bfloat16ToFloat(uint16_t b) { return FloatOf(static_cast<uint32_t>(b) << 16); }

namespace {

// Bulk conversions. binary16: x86-64's F16C instructions (8 values an instruction, IEEE
// round-to-nearest-even, the same codes as FloatToHalf but for NaN payloads) where the
// CPU has them, checked once; the scalar code for the rest and elsewhere. On the
// loopback ring the scalar loops took longer than the bytes they saved.
#if defined(__x86_64__)
// CPUID leaf 1, ECX: AVX (bit 28) and F16C (bit 29); clang's __builtin_cpu_supports
// knows no "f16c".
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_AVX) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}

__attribute__((target("avx,f16c"))) int64_t EncodeHalfF16c(const float* in, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  return i;
}

// sum[i] = (add ? sum[i] : 0) + the value of in[i], 8 at a time; returns how many.
__attribute__((target("avx,f16c"))) int64_t DecodeHalfF16c(const uint16_t* in, int64_t n, float* sum, bool add) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(sum + i), v);
    _mm256_storeu_ps(sum + i, v);
  }
  return i;
}

// bfloat16 in bulk with AVX2 (8 values at a time, the scalar code's arithmetic).
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

__attribute__((target("avx2"))) int64_t EncodeBfloat16Avx2(const float* in, int64_t n, uint16_t* out) {
  const __m256i round_bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(static_cast<int>(kFloatInf));
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i f = _mm256_castps_si256(_mm256_loadu_ps(in + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(f, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(f, round_bias), lsb), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(f, abs_mask), inf);
    const __m256i code = _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_srli_epi32(f, 16), quiet), nan);
    // 8 x 32 -> 8 x 16 bits: packus works within 128-bit lanes; put the lanes in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(code, code), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  return i;
}

__attribute__((target("avx2"))) int64_t DecodeBfloat16Avx2(const uint16_t* in, int64_t n, float* sum, bool add) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(sum + i), v);
    _mm256_storeu_ps(sum + i, v);
  }
  return i;
}
#else
bool HasF16c() { return false; }
bool HasAvx2() { return false; }
int64_t EncodeHalfF16c(const float*, int64_t, uint16_t*) { return 0; }
int64_t DecodeHalfF16c(const uint16_t*, int64_t, float*, bool) { return 0; }
int64_t EncodeBfloat16Avx2(const float*, int64_t, uint16_t*) { return 0; }
int64_t DecodeBfloat16Avx2(const uint16_t*, int64_t, float*, bool) { return 0; }
#endif

}  // namespace

void EncodeWire(WireFormat format, const float* in, int64_t n, uint16_t* out) {
  if (format == WireFormat::kBf16) {
    for (int64_t i = HasAvx2() ? EncodeBfloat16Avx2(in, n, out) : 0; i < n; ++i) out[i] = FloatToBfloat16(in[i]);
    return;
  }
  for (int64_t i = HasF16c() ? EncodeHalfF16c(in, n, out) : 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

void DecodeWire(WireFormat format, const uint16_t* in, int64_t n, float* out) {
  if (format == WireFormat::kBf16) {
    for (int64_t i = HasAvx2() ? DecodeBfloat16Avx2(in, n, out, false) : 0; i < n; ++i) out[i] = Bfloat16ToFloat(in[i]);
    return;
  }
  for (int64_t i = HasF16c() ? DecodeHalfF16c(in, n, out, false) : 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

void DecodeAddWire(WireFormat format, const uint16_t* in, int64_t n, float* sum) {
  if (format == WireFormat::kBf16) {
    for (int64_t i = HasAvx2() ? DecodeBfloat16Avx2(in, n, sum, true) : 0; i < n; ++i) sum[i] += Bfloat16ToFloat(in[i]);
    return;
  }
  for (int64_t i = HasF16c() ? DecodeHalfF16c(in, n, sum, true) : 0; i < n; ++i) sum[i] += HalfToFloat(in[i]);
}

}  // namespace ringside
