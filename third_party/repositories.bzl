"""Repository rules that let Bazel 4.2.3 build offline against Debian's system libraries.

Three kinds of glue:
  * stand-ins for repositories Bazel would otherwise download (`rules_cc`,
    `remote_coverage_tools`);
  * `system_library`: a cc_library whose flags come from `pkg-config`, or are given
    directly for libraries without a .pc file (gloo);
  * `cuda_repository`: headers and libraries of the CUDA toolkit and of NCCL, or, where the
    toolkit is absent, a CPU-only build (`@cuda//:defs.bzl`: CUDA_AVAILABLE, if_cuda, cuda_only).

How @cuda finds CUDA and NCCL (the search itself is //third_party:find_cuda.sh, which
//third_party:find_cuda_test drives with fake trees):
  * the toolkit: bin/nvcc and include/cuda_runtime.h under $RINGLEADER_CUDA_PATH, default
    /usr/local/cuda. RINGLEADER_CUDA_PATH=none (`--config=cpu_only`) is a deliberate CPU-only
    build and searches nothing; no toolkit at the path is a CPU-only build too.
  * NCCL, separately, where nccl.h and libnccl.so are both found, first match wins:
    $RINGLEADER_NCCL_PATH (include/ and lib/ or lib64/; when set, nothing else is searched),
    then the toolkit's include/ and lib64/, then the system's /usr/include and
    /usr/lib/<machine>-linux-gnu, /usr/lib64, /usr/lib (NVIDIA's libnccl-dev, NGC images).
    @cuda//:nccl exports the headers from that include dir and links libnccl.so from that
    library dir (with an rpath, except for a system dir the loader searches anyway).
  * nvcc found but no NCCL STOPS THE BUILD with what was searched and the fixes (install
    libnccl-dev, set RINGLEADER_NCCL_PATH, or `--config=cpu_only` for a CPU-only build on
    purpose). It is not a CPU-only build with a warning: a toolkit says the machine is meant to
    build the GPU worker, a CPU-only worker there fails only later, at a job's first nccl rank,
    and a repository rule's warning is printed once, when @cuda is fetched, and never again on
    the cached builds after it. Machines with no use for NCCL (CI without it) say so with
    `--config=cpu_only`, which builds as before.
"""

def _rules_cc_stand_in_impl(ctx):
    ctx.file("WORKSPACE", "workspace(name = \"rules_cc\")\n")
    ctx.file("BUILD", "")
    ctx.file("cc/BUILD", "")
    rules = ["cc_binary", "cc_import", "cc_library", "cc_proto_library", "cc_test", "cc_toolchain", "cc_toolchain_suite", "objc_library", "fdo_profile", "fdo_prefetch_hints"]
    body = "\n".join([
        "def {r}(**kwargs):\n    native.{r}(**kwargs)\n".format(r = r)
        for r in rules
    ])
    ctx.file("cc/defs.bzl", '"""Forwards each rule to its native form."""\n\n' + body)

rules_cc_stand_in = repository_rule(implementation = _rules_cc_stand_in_impl)

def _coverage_tools_stand_in_impl(ctx):
    ctx.file("WORKSPACE", "workspace(name = \"remote_coverage_tools\")\n")
    ctx.file("dummy.sh", "#!/bin/sh\necho 'coverage is not available in the offline build' >&2\nexit 1\n", executable = True)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
sh_binary(name = "coverage_report_generator", srcs = ["dummy.sh"])
sh_binary(name = "lcov_merger", srcs = ["dummy.sh"])
""")

coverage_tools_stand_in = repository_rule(implementation = _coverage_tools_stand_in_impl)

def _pkg_config(ctx, flag, modules):
    res = ctx.execute(["pkg-config", flag] + modules)
    if res.return_code != 0:
        fail("pkg-config %s %s failed (run the set-up script first): %s" %
             (flag, " ".join(modules), res.stderr))
    return [f for f in res.stdout.strip().split(" ") if f]

def _system_library_impl(ctx):
    linkopts = list(ctx.attr.linkopts)
    copts = []
    defines = []
    if ctx.attr.modules:
        linkopts = _pkg_config(ctx, "--libs", ctx.attr.modules) + linkopts
        copts = [f for f in _pkg_config(ctx, "--cflags", ctx.attr.modules) if not f.startswith("-I/usr/include")]
    if ctx.attr.export_defines:
        # The library's headers change with these macros (cpp-httplib's class layouts follow
        # CPPHTTPLIB_OPENSSL_SUPPORT, ...): every dependent must see the ones it was built with.
        defines = [f[len("-D"):] for f in copts if f.startswith("-D")]
        copts = [f for f in copts if not f.startswith("-D")]
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "lib",
    copts = {copts},
    defines = {defines},
    linkopts = {linkopts},
)
""".format(copts = repr(copts), defines = repr(defines), linkopts = repr(linkopts)))

system_library = repository_rule(
    implementation = _system_library_impl,
    attrs = {
        "modules": attr.string_list(doc = "pkg-config module names"),
        "linkopts": attr.string_list(doc = "extra link flags (for libraries without a .pc file)"),
        "export_defines": attr.bool(
            default = False,
            doc = "pkg-config's -D flags become `defines`, seen by every dependent (not only the " +
                  "library's own sources)",
        ),
    },
    local = True,
)

# The toolkit's root: $RINGLEADER_CUDA_PATH, else the rule's `path` (/usr/local/cuda). "none"
# (what `--config=cpu_only` passes) or a path without the toolkit gives the CPU-only build.
_CUDA_PATH_ENV = "RINGLEADER_CUDA_PATH"

# An NCCL prefix searched before the toolkit and the system dirs (see the top of this file).
_NCCL_PATH_ENV = "RINGLEADER_NCCL_PATH"

_CUDA_DEFS = """\"\"\"Generated by //third_party:repositories.bzl: whether this build has the CUDA toolkit and NCCL.\"\"\"

# What //third_party:find_cuda.sh decided: "cuda", "cpu_only" (asked for) or "no_toolkit".
CUDA_DETECTION = {detection}

# The toolkit root that was found, or "" in the CPU-only build.
CUDA_PATH = {path}

# Where NCCL's headers and libnccl.so were found ("" in the CPU-only build), and by which rule:
# "RINGLEADER_NCCL_PATH", "toolkit" or "system".
NCCL_INCLUDE_DIR = {nccl_include_dir}
NCCL_LIB_DIR = {nccl_lib_dir}
NCCL_FOUND_IN = {nccl_found_in}

CUDA_AVAILABLE = {available}

def if_cuda(if_true, if_false = []):
    \"\"\"`if_true` where the toolkit was found, else `if_false` (a list, or a select value).\"\"\"
    return if_true if CUDA_AVAILABLE else if_false

def cuda_only():
    \"\"\"target_compatible_with for targets that need the toolkit: skipped by `//...` patterns
    in the CPU-only build, and a clear "incompatible" error when named explicitly.\"\"\"
    return [] if CUDA_AVAILABLE else ["@cuda//:cuda_toolkit_present"]
"""

def _find_cuda(ctx, root):
    """Runs //third_party:find_cuda.sh: (a dict of its KEY=VALUE lines, its stderr)."""
    bash = ctx.which("bash")
    if not bash:
        fail("@cuda: bash is needed to run //third_party:find_cuda.sh")
    args = [bash, ctx.path(Label("//third_party:find_cuda.sh")), "--cuda_path=" + root]
    nccl_path = ctx.os.environ.get(_NCCL_PATH_ENV, "")
    if nccl_path:
        args.append("--nccl_path=" + nccl_path)
    res = ctx.execute(args)
    if res.return_code != 0:
        fail("@cuda: //third_party:find_cuda.sh failed (%d): %s" % (res.return_code, res.stderr))
    result = {}
    for line in res.stdout.strip().split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            result[key] = value
    return result, res.stderr.strip()

def _cuda_repository_impl(ctx):
    root = ctx.os.environ.get(_CUDA_PATH_ENV, ctx.attr.path)
    result, message = _find_cuda(ctx, root)
    status = result.get("status", "")
    if status == "no_nccl":
        fail("\n@cuda: " + message + "\n")
    if status not in ("cuda", "cpu_only", "no_toolkit"):
        fail("@cuda: //third_party:find_cuda.sh gave no status: %r %s" % (result, message))
    if status == "no_toolkit":
        print(message)
    found = status == "cuda"
    ctx.file("WORKSPACE", "workspace(name = \"cuda\")\n")
    ctx.file("detection.txt", "".join(["%s=%s\n" % (k, v) for k, v in result.items()]) +
                              (message + "\n" if message else ""))
    ctx.file("defs.bzl", _CUDA_DEFS.format(
        detection = repr(status),
        path = repr(root if found else ""),
        nccl_include_dir = repr(result.get("nccl_include_dir", "")),
        nccl_lib_dir = repr(result.get("nccl_lib_dir", "")),
        nccl_found_in = repr(result.get("nccl_found_in", "")),
        available = "True" if found else "False",
    ))
    if not found:
        # CPU-only build: the targets exist (so `bazel query` works) but no platform satisfies
        # :cuda_toolkit_present, so everything that depends on them is skipped by `//...`.
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl", "detection.txt"])
constraint_setting(name = "cuda_toolkit")
# No platform has this value: targets that require it are incompatible in this build. CPU-only
# build ({status}): the CUDA toolkit (nvcc, cuda_runtime.h) at '{root}' ({env}) was not used.
constraint_value(name = "cuda_toolkit_present", constraint_setting = ":cuda_toolkit")
cc_library(name = "headers", target_compatible_with = [":cuda_toolkit_present"])
cc_library(name = "cuda", target_compatible_with = [":cuda_toolkit_present"])
cc_library(name = "nccl", target_compatible_with = [":cuda_toolkit_present"])
genrule(name = "nvcc", outs = ["nvcc_not_found"], cmd = "exit 1", target_compatible_with = [":cuda_toolkit_present"])
""".format(status = status, root = root, env = _CUDA_PATH_ENV))
        return
    ctx.symlink(root + "/include", "include")
    ctx.symlink(root + "/bin", "bin")
    lib = root + "/lib64"
    nccl_include_dir = result["nccl_include_dir"]
    nccl_lib_dir = result["nccl_lib_dir"]

    # NCCL's headers: the toolkit's include/ when they are there; else its nccl* entries only
    # (nccl.h, nccl_net.h, nccl_device.h, nccl_device/), never a whole system include dir.
    nccl_deps = [":headers"]
    if nccl_include_dir != result["cuda_path"] + "/include":
        nccl_deps.append(":nccl_headers")
        for entry in ctx.path(nccl_include_dir).readdir():
            if entry.basename.startswith("nccl"):
                ctx.symlink(entry, "nccl/include/" + entry.basename)

    # libnccl.so by its path (the binary records its soname, libnccl.so.2), so no -L dir can
    # bring another copy of a library forward; an rpath unless the loader searches it anyway.
    nccl_linkopts = [nccl_lib_dir + "/libnccl.so"]
    if result["nccl_found_in"] != "system":
        nccl_linkopts.append("-Wl,-rpath," + nccl_lib_dir)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl", "detection.txt"])
cc_library(
    name = "headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)
cc_library(
    name = "nccl_headers",
    hdrs = glob(["nccl/include/**"]),
    includes = ["nccl/include"],
)
cc_library(
    name = "cuda",
    deps = [":headers"],
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas", "-lcudart"],
)
# NCCL from {nccl_include_dir} and {nccl_lib_dir} ({nccl_found_in}).
cc_library(
    name = "nccl",
    deps = {nccl_deps},
    linkopts = {nccl_linkopts},
)
filegroup(name = "nvcc", srcs = ["bin/nvcc"])
""".format(
        lib = lib,
        nccl_deps = repr(nccl_deps),
        nccl_include_dir = nccl_include_dir,
        nccl_lib_dir = nccl_lib_dir,
        nccl_found_in = result["nccl_found_in"],
        nccl_linkopts = repr(nccl_linkopts),
    ))

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    attrs = {"path": attr.string(default = "/usr/local/cuda")},
    environ = [_CUDA_PATH_ENV, _NCCL_PATH_ENV],
    local = True,
)
