// The CPU backend of the ops interface: GEMM on OpenBLAS, the rest as plain loops
// written for the compiler's auto-vectoriser.
#ifndef RINGSIDE_COMMON_CPU_OPS_H_
#define RINGSIDE_COMMON_CPU_OPS_H_

#include <memory>
#include <string>

#include "common/ops.h"

namespace ringside {

// Creates the CPU backend. `blas_threads` > 0 sets OpenBLAS's thread count (a setting
// of the OpenBLAS library, shared by every CpuOps in the process); 0 leaves it alone.
std::unique_ptr<Ops> NewCpuOps(int blas_threads);

// The GEMM kernels OpenBLAS chose for this CPU, as "OpenBLAS <core>" (e.g. "OpenBLAS
// Zen"). OPENBLAS_CORETYPE overrides its choice, and a step's time can differ 2x
// between two choices on one CPU (docs/cluster.md), so measurements of compute say it.
std::string CpuBlasKernels();

}  // namespace ringside

#endif  // RINGSIDE_COMMON_CPU_OPS_H_
