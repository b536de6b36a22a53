#include "common/ops_factory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cpu_ops.h"
#if RINGSIDE_CUDA
#include "common/cuda_ops.h"
#endif

namespace ringside {

bool BuiltWithCuda() { return RINGSIDE_CUDA != 0; }

absl::StatusOr<std::unique_ptr<Ops>> NewOps(absl::string_view kind, int device, int threads,
                                            GemmPrecision precision) {
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 0, got ", threads));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device index must be >= 0, got ", device));
  }
  if (kind == "cpu") {
    if (device != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the cpu ops backend has one device (0), asked for ", device));
    }
    return NewCpuOps(threads);
  }
  if (kind == "cuda") {
    if (absl::Status s = CheckDeviceBuilt(DeviceKind::kCuda); !s.ok()) return s;
#if RINGSIDE_CUDA
    return NewCudaOps(device, precision);
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ops backend '", kind, "' (expected cpu or cuda)"));
}

absl::Status CheckDeviceBuilt(DeviceKind kind) {
  if (kind == DeviceKind::kCpu || BuiltWithCuda()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "--device=cuda: this ringside was built without CUDA; rebuild with --config=cuda "
      "(docs/build.md)");
}

absl::StatusOr<DeviceSpec> ParseDevice(absl::string_view text) {
  DeviceSpec spec;
  if (text.empty() || text == "cpu") return spec;
  if (text == "cuda") {
    spec.kind = DeviceKind::kCuda;
    return spec;
  }
  int index = -1;
  if (absl::ConsumePrefix(&text, "cuda:") && absl::SimpleAtoi(text, &index) && index >= 0) {
    spec.kind = DeviceKind::kCuda;
    spec.index = index;
    return spec;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--device must be cpu, cuda or cuda:K (K >= 0), got '", text, "'"));
}

int CudaDeviceFor(int requested_index, int local_rank, int gpus) {
  if (requested_index >= 0) return requested_index;
  if (gpus < 1 || local_rank < 0) return 0;
  return local_rank % gpus;
}

bool RanksShareGpu(int requested_index, int local_world_size, int gpus) {
  const int spread_over = requested_index >= 0 ? 1 : std::max(gpus, 1);
  return local_world_size > spread_over;
}

std::string DeviceName(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::kCpu) return "cpu";
  return spec.index < 0 ? "cuda" : absl::StrCat("cuda:", spec.index);
}

absl::StatusOr<GemmPrecision> ParseGemmPrecision(absl::string_view text) {
  if (text.empty() || text == "fp32") return GemmPrecision::kFp32;
  if (text == "tf32") return GemmPrecision::kTf32;
  if (text == "bf16") return GemmPrecision::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("--precision must be fp32, tf32 or bf16, got '", text, "'"));
}

const char* GemmPrecisionName(GemmPrecision precision) {
  switch (precision) {
    case GemmPrecision::kFp32:
      return "fp32";
    case GemmPrecision::kTf32:
      return "tf32";
    case GemmPrecision::kBf16:
      return "bf16";
  }
  return "fp32";
}

}  // namespace ringside
