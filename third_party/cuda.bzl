"""The CUDA build setting: `--config=cuda` (.bazelrc) turns on //third_party:cuda.

The default configuration never uses /usr/local/cuda (no CUDA library, no nvcc), so
builds and tests run where it does not exist. CUDA-only
targets are marked with cuda_only(): `bazel build //...` and `bazel test //...` skip them
by default and build them under --config=cuda.
"""

def if_cuda(if_true, if_false = []):
    """`if_true` under --config=cuda, `if_false` otherwise (a select())."""
    return select({
        "//third_party:cuda": if_true,
        "//conditions:default": if_false,
    })

def cuda_only():
    """A target_compatible_with value: the target exists only under --config=cuda."""
    return if_cuda([], ["//third_party:cuda_config_required"])

