// Helpers of the Shard's tests (shard_test.cc and the parts' tests that drive a
// Shard): workers are threads (or plain calls) that build ps::Chunk messages the way
// the service does, and every parameter they get back is checked against the
// closed-form SGD answer. Test-only.
#ifndef RINGSIDE_PS_SERVER_SHARD_TEST_UTIL_H_
#define RINGSIDE_PS_SERVER_SHARD_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/run_config.h"
#include "ps_server/ps.pb.h"
#include "ps_server/shard.h"

namespace ringside {
namespace shard_test {

inline constexpr char kModel[] = "mlp:8-4";
// The shard under test is shard 1 of 2 over 21 floats: slice [10, 21), 11 floats, cut
// by 16-byte chunks into chunks of 3, 4 and 4 floats (the grid is aligned on the
// slice's end, so chunk 0 is the short one).
inline constexpr int64_t kNumParams = 21;
inline constexpr int kNumShards = 2;
inline constexpr int kShard = 1;
inline constexpr int64_t kSliceOffset = 10;
inline constexpr int64_t kSliceSize = 11;
inline constexpr int64_t kChunkBytes = 16;
inline constexpr int64_t kChunkFloats = 4;
inline constexpr int64_t kNumChunks = 3;
// Short timeout for the fault tests; the prompt bound for "returns at once".
inline constexpr absl::Duration kShortTimeout = absl::Milliseconds(200);
inline constexpr absl::Duration kPrompt = absl::Seconds(5);
inline constexpr double kTol = 1e-5;

// The configuration the shard and its workers run.
RunConfig JobConfig();
PsShardOptions Options(int num_workers, SyncPolicy sync, SgdHyper hyper);
SyncPolicy Bsp();
SyncPolicy Asp();
SyncPolicy Ssp(int k);
SgdHyper Hyper(float lr, float momentum = 0, float weight_decay = 0);
ps::RegisterRequest Registration(int worker, int num_workers, int64_t num_params = kNumParams);

// Creates the shard and registers all of its workers.
std::unique_ptr<Shard> NewShard(const PsShardOptions& options, int64_t num_params = kNumParams);

ps::Chunk MakeChunk(int worker, int64_t step, ps::TensorKind kind, int64_t offset,
                    const float* data, int64_t n);
// Accepts chunk k of `slice_values` (the whole slice) from `worker`, as the service
// does: the wire size is the serialised chunk's. Adds it to *wire_bytes if given.
absl::Status PushChunk(Shard& shard, int worker, int64_t step, ps::TensorKind kind, int64_t k,
                       const std::vector<float>& slice_values, int64_t* wire_bytes = nullptr);
// Accepts every chunk of the slice, last chunk first (as ShardClient::PushPull sends).
absl::Status PushSlice(Shard& shard, int worker, int64_t step, ps::TensorKind kind,
                       const std::vector<float>& slice_values, int64_t* wire_bytes = nullptr);
// Serves (blocking) every chunk of `kind` for `worker` about to run `step` and
// assembles the slice. With `served_bytes` each chunk is also counted as sent, as the
// service does after writing it.
absl::StatusOr<std::vector<float>> ServeSlice(Shard& shard, int worker, int64_t step,
                                              ps::TensorKind kind = ps::PARAMS,
                                              int64_t* served_bytes = nullptr);
// Whether chunk k of PARAMS for `worker` at `step` can be served now.
bool Ready(Shard& shard, int worker, int64_t step, int64_t k);
// Whether a pull of chunk k of PARAMS for `worker` at `step` is refused at once (a step
// the worker cannot be about to run).
bool Refused(Shard& shard, int worker, int64_t step, int64_t k);

// Deterministic, distinct test values: the initial parameters, and worker w's
// gradient of step s (already scaled by 1/N as workers do; any values work).
std::vector<float> InitialParams(int64_t size);
std::vector<float> Gradient(int64_t size, int worker, int64_t step);
// The closed form of one torch.optim.SGD step (dampening 0) in double precision.
// `carried` is the optimizer state ringside keeps: momentum * PyTorch's momentum_buffer.
void SgdStep(const SgdHyper& h, const std::vector<double>& grad, std::vector<double>* params,
             std::vector<double>* carried);
std::vector<double> ToDouble(const std::vector<float>& v);
// Sum over workers of their step-s gradients, times `scale`.
std::vector<double> SumOfGradients(int64_t size, const std::vector<int>& workers, int64_t step,
                                   double scale = 1.0);
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double tol = kTol);
// Worker 0 initialises the slice with InitialParams at `step`.
void Initialise(Shard& shard, int64_t step = 0);

}  // namespace shard_test
}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_SHARD_TEST_UTIL_H_
