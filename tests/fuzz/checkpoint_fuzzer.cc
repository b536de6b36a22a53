// Fuzz entry point for the checkpoint reader, through its public function only
// (common/checkpoint.h: absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string&
// path)): the input is written to a scratch file and read back. A read that succeeds
// must agree with its own header.
#include <cstdint>
#include <string>

#include "common/checkpoint.h"
#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs (invalid UTF-8 in a string field, ...) are expected here: not on stderr.
  static google::protobuf::LogHandler* const unused = google::protobuf::SetLogHandler(nullptr);
  (void)unused;
  static const std::string path = ringside::fuzz::ScratchDir() + "/checkpoint";
  ringside::fuzz::WriteFileOrDie(path, data, size);
  absl::StatusOr<ringside::Checkpoint> ckpt = ringside::ReadCheckpoint(path);
  if (ckpt.ok()) {
    ringside::fuzz::Require(
        static_cast<int64_t>(ckpt->params.size()) == ckpt->header.num_params() &&
            static_cast<int64_t>(ckpt->optimizer_state.size()) ==
                ckpt->header.num_optimizer_state(),
        "sizes agree with the header");
  }
  return 0;
}
