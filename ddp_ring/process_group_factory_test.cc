// The backend factory: Gloo by name, unknown names refused, and NCCL refused with a
// rebuild hint exactly when the build has no CUDA. RINGSIDE_CUDA comes from the
// test's own local_defines (the build setting), not from the code under test.
#include "ddp_ring/process_group_factory.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "ddp_ring/store.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

ProcessGroupOptions WorldOfOne() {
  ProcessGroupOptions options;
  options.timeout = absl::Seconds(10);
  return options;
}

TEST(ProcessGroupFactoryTest, BuildSettingIsReported) {
  EXPECT_EQ(ProcessGroupBuiltWithCuda(), RINGSIDE_CUDA != 0);
}

TEST(ProcessGroupFactoryTest, GlooByName) {
  ASSERT_TRUE(CheckProcessGroupBackend("gloo").ok());
  std::unique_ptr<Store> store = NewInMemoryStore();
  absl::StatusOr<std::unique_ptr<ProcessGroup>> pg =
      NewProcessGroup("gloo", store.get(), WorldOfOne());
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_EQ((*pg)->backend(), "gloo");
  float x = 3.5f;
  ASSERT_TRUE((*pg)->AllReduce(&x, 1, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(x, 3.5f);
}

TEST(ProcessGroupFactoryTest, UnknownBackendIsInvalidArgument) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  for (const char* name : {"mpi", "", "Gloo"}) {
    const absl::Status s = NewProcessGroup(name, store.get(), WorldOfOne()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << ": " << s;
    EXPECT_NE(s.message().find(std::string("--backend=") + name + " is not"),
              std::string::npos)
        << s;
    EXPECT_EQ(CheckProcessGroupBackend(name), s);
  }
}

TEST(ProcessGroupFactoryTest, NcclNeedsTheCudaBuild) {
  const absl::Status check = CheckProcessGroupBackend("nccl");
  if (RINGSIDE_CUDA) {
    // Built with CUDA: the name is accepted; whether a group comes up depends on the GPU
    // (nccl_process_group_test covers that).
    EXPECT_TRUE(check.ok()) << check;
    return;
  }
  EXPECT_EQ(check.code(), absl::StatusCode::kFailedPrecondition) << check;
  EXPECT_NE(check.message().find("built without CUDA"), std::string::npos) << check;
  EXPECT_NE(check.message().find("--config=cuda"), std::string::npos) << check;
  std::unique_ptr<Store> store = NewInMemoryStore();
  EXPECT_EQ(NewProcessGroup("nccl", store.get(), WorldOfOne()).status(), check);
}

}  // namespace
}  // namespace ringside
