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
         -gencode arch=compute_90,code=compute_90
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

Device code: SASS for every architecture in CUDA_SASS_ARCHITECTURES (sm_80: A100 class, also
runs on the other 8.x GPUs; sm_90: H100/H200) and PTX for CUDA_PTX_ARCHITECTURE (compute_90),
which the driver compiles at first launch on a GPU newer than every SASS architecture (instead
of every launch failing with cudaErrorNoKernelImageForDevice). The same list names itself in
error messages: cuda_architectures_header writes it into a header that
//common/gpu:cuda_status includes, so a "no kernel image" failure says what this build holds.

Build time: two SASS targets and one PTX, about 3-6 s per small .cu file.
"""

load("@cuda//:defs.bzl", "cuda_only")

# The one list of device architectures every .cu file is compiled for (compute capability
# digits): SASS for each of these ...
CUDA_SASS_ARCHITECTURES = ["80", "90"]

# ... and PTX for this virtual architecture, JIT-compiled by the driver on newer GPUs.
CUDA_PTX_ARCHITECTURE = "90"

def _arch_flags():
    flags = []
    for arch in CUDA_SASS_ARCHITECTURES:
        flags += ["-gencode", "arch=compute_%s,code=sm_%s" % (arch, arch)]
    flags += ["-gencode", "arch=compute_%s,code=compute_%s" % (CUDA_PTX_ARCHITECTURE, CUDA_PTX_ARCHITECTURE)]
    return flags

_ARCH_FLAGS = _arch_flags()

def cuda_built_architectures():
    """What the build holds, for people: "sm_80, sm_90 and PTX compute_90"."""
    sass = ["sm_" + a for a in CUDA_SASS_ARCHITECTURES]
    return "%s and PTX compute_%s" % (", ".join(sass), CUDA_PTX_ARCHITECTURE)

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

def _cuda_architectures_header_impl(ctx):
    out = ctx.actions.declare_file(ctx.attr.out)
    ctx.actions.write(out, """// Generated by //third_party:cuda.bzl (cuda_architectures_header) from the architecture list
// nvcc compiles every .cu file for. Do not edit: change CUDA_SASS_ARCHITECTURES /
// CUDA_PTX_ARCHITECTURE there.
#ifndef RINGLEADER_CUDA_ARCHITECTURES_H_
#define RINGLEADER_CUDA_ARCHITECTURES_H_

// The device code in this build, e.g. "sm_80, sm_90 and PTX compute_90".
#define RL_CUDA_BUILT_ARCHITECTURES "%s"

#endif  // RINGLEADER_CUDA_ARCHITECTURES_H_
""" % cuda_built_architectures())
    return [DefaultInfo(files = depset([out]))]

_cuda_architectures_header = rule(
    implementation = _cuda_architectures_header_impl,
    attrs = {"out": attr.string(mandatory = True)},
)

def cuda_architectures_header(name, out, **kwargs):
    """Writes `out`, a header defining RL_CUDA_BUILT_ARCHITECTURES (cuda_built_architectures()).

    Args:
      name: the target; list it in a cc_library's srcs or hdrs.
      out: the header's file name, in this package.
      **kwargs: passed to the rule (visibility, target_compatible_with, ...).
    """
    _cuda_architectures_header(name = name, out = out, **kwargs)

def gpu_product_sources(name = "product_sources"):
    """A filegroup of the package's product sources (.cc, .cu, .h; no tests, test helpers,
    benchmarks or diagnostic probes), which //tests/build:gpu_stream_lint_test reads."""
    native.filegroup(
        name = name,
        srcs = native.glob(
            ["*.cc", "*.cu", "*.h"],
            exclude = ["*_benchmark.cc", "*_probe.cu", "*_test.cc", "*_test_util.h", "*suite_util.h", "*suite_options.h"],
        ),
    )
