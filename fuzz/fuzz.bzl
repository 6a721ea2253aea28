"""ringleader_fuzzer: one fuzz target, in both builds.

For `name = "foo_fuzzer"` over `srcs` (defining LLVMFuzzerTestOneInput) it defines:
  :foo_fuzzer_lib              the target's code (a plain library: compiled by gcc in `//...`)
  :foo_fuzzer                  the libFuzzer binary; only in the fuzz build (.bazelrc
                               `--config=fuzz`: clang-14, ASan, UBSan), incompatible (skipped by
                               `//...`) elsewhere
  :foo_fuzzer_regression_test  the target run once on every file of corpus/foo/ by
                               replay_main.cc, in every build
"""

def ringleader_fuzzer(name, srcs, deps = []):
    corpus = "corpus/" + name[:-len("_fuzzer")]
    native.cc_library(
        name = name + "_lib",
        srcs = srcs,
        deps = deps + [":fuzz_util"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        deps = [":" + name + "_lib"],
        linkopts = select({
            ":fuzz_build": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        target_compatible_with = select({
            ":fuzz_build": [],
            "//conditions:default": [":libfuzzer_build"],
        }),
    )
    native.cc_test(
        name = name + "_regression_test",
        size = "small",
        deps = [
            ":" + name + "_lib",
            ":replay_main",
        ],
        data = native.glob([corpus + "/**"]),
        args = ["fuzz/" + corpus],
    )
