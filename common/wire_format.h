// The number formats gradients may travel in (issue #36, --compress=fp16|bf16): IEEE
// binary16 and bfloat16, 2 bytes a value, against float32's 4. Encoding rounds to nearest,
// ties to even, as PyTorch's tensor.to(torch.float16 / torch.bfloat16) and CUDA's
// __float2half_rn do; a value beyond binary16's range (|x| >= 65520) becomes +-inf, a
// NaN stays a NaN (quiet). Decoding is exact.
//
// Hand-written (a few shifts) rather than taken from a library: nothing in the stack
// converts on the CPU (OpenBLAS has no such call, Eigen is not a dependency), and the
// F16C instructions are not on every x86-64 CPU nor on other architectures.
#ifndef RINGSIDE_COMMON_WIRE_FORMAT_H_
#define RINGSIDE_COMMON_WIRE_FORMAT_H_

#include <cstdint>

namespace ringside {

enum class WireFormat {
  kFp32,  // As computed: 4 bytes a value.
  kFp16,  // IEEE 754 binary16: 5 exponent bits, 10 mantissa bits (max 65504).
  kBf16,  // bfloat16: float32's 8 exponent bits, 7 mantissa bits.
};

// "fp32", "fp16", "bf16".
const char* WireFormatName(WireFormat format);

// Bytes one value takes on the wire: 4 for kFp32, else 2.
int WireBytesPerValue(WireFormat format);

uint16_t FloatToHalf(float x);
float HalfToFloat(uint16_t h);
uint16_t FloatToBfloat16(float x);
float Bfloat16ToFloat(uint16_t b);

// out[i] = the 2-byte encoding of in[i] in `format` (kFp16 or kBf16), i < n.
void EncodeWire(WireFormat format, const float* in, int64_t n, uint16_t* out);
// out[i] = the value in[i] encodes, i < n.
void DecodeWire(WireFormat format, const uint16_t* in, int64_t n, float* out);
// sum[i] += the value in[i] encodes, i < n (the ring's reduce step, in float32).
void DecodeAddWire(WireFormat format, const uint16_t* in, int64_t n, float* sum);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_WIRE_FORMAT_H_
