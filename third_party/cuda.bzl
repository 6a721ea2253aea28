"""cuda_library: CUDA sources (.cu) compiled by the toolkit's nvcc into a cc_library.

    load("//third_party:cuda.bzl", "cuda_library")

    cuda_library(
        name = "kernels",
        srcs = ["kernels.cu"],
        hdrs = ["kernels.h"],
        deps = ["//worker/trainer:sgd_math"],
    )

Each .cu file becomes one object file, compiled by one action:

    nvcc -std=c++17 -O2 -Xcompiler -fPIC
         -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
         -I<workspace root> -I<bin/genfiles dirs> -I<every include dir of deps> <copts>
         -c <src> -o <name>_objs/<src>.pic.o

then a cc_library named `name` carries those objects, `hdrs`, `deps` and @cuda//:cuda (cudart +
cuBLAS), so C++ code depends on it like on any cc_library.

Why a small rule rather than a bare genrule: the action needs the headers of `deps` (transitive,
e.g. worker/trainer/sgd_math.h) as inputs, which only a rule can collect (CcInfo). The CUDA
toolkit's own headers are not declared as inputs (thousands of files would slow every sandboxed
action); nvcc finds them next to itself, so nvcc is resolved to its real path first.

In the CPU-only build (no toolkit; see //third_party:repositories.bzl) both targets are
incompatible: `//...` skips them and whatever depends on them.

Build time: sm_80 and sm_90 SASS only (no PTX), about 2-5 s per small .cu file.
"""

load("@cuda//:defs.bzl", "cuda_only")

_ARCH_FLAGS = [
    "-gencode",
    "arch=compute_80,code=sm_80",
    "-gencode",
    "arch=compute_90,code=sm_90",
]

def _is_cuda_toolkit_header(f):
    # Headers of @cuda//:headers (the toolkit's include/): nvcc finds them itself. NCCL's from
    # outside the toolkit (@cuda//:nccl_headers, external/cuda/nccl/include) are inputs.
    return f.path.startswith("external/cuda/include/")

def _cuda_objects_impl(ctx):
    comp = [d[CcInfo].compilation_context for d in ctx.attr.deps if CcInfo in d]
    headers = [
        h
        for h in depset(ctx.files.hdrs, transitive = [c.headers for c in comp]).to_list()
        if not _is_cuda_toolkit_header(h)
    ]
    include_dirs = [".", ctx.bin_dir.path, ctx.genfiles_dir.path]
    defines = []
    for c in comp:
        include_dirs += c.quote_includes.to_list() + c.includes.to_list() + c.system_includes.to_list()
        defines += c.defines.to_list()
    flags = ["-std=c++17", "-O2", "-Xcompiler", "-fPIC"] + _ARCH_FLAGS
    seen = {}
    for d in include_dirs:
        # The toolkit's dirs (nvcc knows them) are left out; NCCL's outside the toolkit are not.
        toolkit = d.startswith("external/cuda") and not d.startswith("external/cuda/nccl/")
        if d not in seen and not toolkit:
            seen[d] = True
            flags.append("-I" + d)
    flags += ["-D" + d for d in defines] + ctx.attr.copts

    nvcc = ctx.file._nvcc
    outs = []
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file("%s/%s.pic.o" % (ctx.attr.name, src.basename[:-len(".cu")]))
        outs.append(out)
        ctx.actions.run_shell(
            inputs = depset([src, nvcc] + headers),
            outputs = [out],
            # nvcc locates its tools and headers relative to its real location.
            command = '"$(readlink -f "$1")" "${@:4}" -c "$2" -o "$3"',
            arguments = [nvcc.path, src.path, out.path] + flags,
            mnemonic = "NvccCompile",
            progress_message = "Compiling %s with nvcc" % src.short_path,
            use_default_shell_env = True,
        )
    return [DefaultInfo(files = depset(outs))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_nvcc": attr.label(default = "@cuda//:nvcc", allow_single_file = True),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None, **kwargs):
    """Compiles `srcs` (.cu) with nvcc; `name` is a cc_library over the objects.

    Args:
      name: the cc_library's name; the objects come from `<name>_objs`.
      srcs: .cu files, one object each.
      hdrs: headers of this library (visible to dependents and to the .cu files).
      deps: cc_library targets whose headers the .cu files include and whose code they use.
      copts: extra nvcc flags.
      visibility: of the cc_library.
      **kwargs: passed to the cc_library (testonly, tags, ...).
    """
    _cuda_objects(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        copts = copts,
        testonly = kwargs.get("testonly", False),
        visibility = ["//visibility:private"],
        target_compatible_with = cuda_only(),
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objs"],
        hdrs = hdrs,
        deps = deps + ["@cuda//:cuda"],
        visibility = visibility,
        target_compatible_with = cuda_only(),
        **kwargs
    )

def gpu_product_sources(name = "product_sources"):
    """A filegroup of the package's product sources (.cc, .cu, .h; no tests, test helpers or
    benchmarks), which //tests/build:gpu_stream_lint_test reads."""
    native.filegroup(
        name = name,
        srcs = native.glob(
            ["*.cc", "*.cu", "*.h"],
            exclude = ["*_benchmark.cc", "*_test.cc", "*_test_util.h", "*suite_util.h", "*suite_options.h"],
        ),
    )
