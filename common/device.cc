#include "common/device.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace ringside {

DeviceInfo DetectDevices() {
  DeviceInfo info;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    info.detail = "no CUDA driver (libcuda.so.1 not found)";
    return info;
  }
  // Driver API entry points; CUresult is an int-sized enum, 0 = CUDA_SUCCESS.
  using CuInit = int (*)(unsigned int);
  using CuDeviceGetCount = int (*)(int*);
  using CuDriverGetVersion = int (*)(int*);
  auto cu_init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto cu_count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto cu_version = reinterpret_cast<CuDriverGetVersion>(dlsym(lib, "cuDriverGetVersion"));
  if (cu_init == nullptr || cu_count == nullptr) {
    info.detail = "CUDA driver lacks cuInit/cuDeviceGetCount";
  } else if (int rc = cu_init(0); rc != 0) {
    info.detail = absl::StrCat("cuInit failed with CUresult ", rc);
  } else {
    int count = 0;
    if (int rc2 = cu_count(&count); rc2 != 0) {
      info.detail = absl::StrCat("cuDeviceGetCount failed with CUresult ", rc2);
    } else {
      info.gpu_count = count;
      int version = 0;
      if (cu_version != nullptr) cu_version(&version);
      info.detail = count > 0 ? absl::StrCat("CUDA driver ", version / 1000, ".",
                                             (version % 1000) / 10)
                              : "CUDA driver present but no devices";
    }
  }
  // The driver stays loaded: unloading libcuda after cuInit is unsafe.
  return info;
}

}  // namespace ringside
