// Device detection: decides between the CPU and a CUDA GPU without linking the CUDA
// driver, so the same binary runs on machines with and without one.
#ifndef RINGSIDE_COMMON_DEVICE_H_
#define RINGSIDE_COMMON_DEVICE_H_

#include <string>

namespace ringside {

struct DeviceInfo {
  int gpu_count = 0;   // Usable CUDA devices; 0 means "use the CPU".
  std::string detail;  // Why there is no GPU, or the driver's version.
};

// Loads the CUDA driver (libcuda.so.1) at run time and counts devices. A missing
// driver, a failing cuInit or zero devices all give gpu_count = 0 with the reason in
// `detail`; never aborts. Thread-safe.
DeviceInfo DetectDevices();

}  // namespace ringside

#endif  // RINGSIDE_COMMON_DEVICE_H_
