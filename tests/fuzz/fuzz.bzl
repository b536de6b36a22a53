"""ringside_fuzz_target: one libFuzzer entry point, built two ways.

For a target `x` with srcs ["x_fuzzer.cc"] (which defines LLVMFuzzerTestOneInput):
  :x_fuzzer          under --config=fuzz (.bazelrc: clang, libFuzzer, ASan, UBSan) the
                     fuzzer itself; in the default build the same entry point behind
                     replay_main.cc (a program that feeds it files), so it always builds.
  :x_regression_test a cc_test in every build (gcc by default): feeds every file of
                     corpus/x/ (the seeds) and regressions/x/ (inputs that once crashed,
                     kept forever) to the entry point; a crash fails the test.
"""

def ringside_fuzz_target(name, deps):
    srcs = [name + "_fuzzer.cc", "fuzz_util.h"]
    native.cc_binary(
        name = name + "_fuzzer",
        srcs = srcs,
        deps = deps + select({
            ":fuzz": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":fuzz": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_regression_test",
        size = "small",
        srcs = srcs,
        args = [
            "tests/fuzz/corpus/" + name,
            "tests/fuzz/regressions/" + name,
        ],
        data = native.glob([
            "corpus/" + name + "/*",
            "regressions/" + name + "/*",
        ]),
        deps = deps + [":replay_main"],
    )
