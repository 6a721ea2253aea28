"""Repository rules that let Bazel 4.2.3 build offline against Debian's system libraries.

Three kinds of glue:
  * stand-ins for repositories Bazel would otherwise download (`rules_cc`,
    `remote_coverage_tools`);
  * `system_library`: a cc_library whose flags come from `pkg-config`, or are given
    directly for libraries without a .pc file (gloo);
  * `cuda_repository`: headers and libraries of the CUDA toolkit (with NCCL).
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
    if ctx.attr.modules:
        linkopts = _pkg_config(ctx, "--libs", ctx.attr.modules) + linkopts
        copts = [f for f in _pkg_config(ctx, "--cflags", ctx.attr.modules) if not f.startswith("-I/usr/include")]
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "lib",
    copts = {copts},
    linkopts = {linkopts},
)
""".format(copts = repr(copts), linkopts = repr(linkopts)))

system_library = repository_rule(
    implementation = _system_library_impl,
    attrs = {
        "modules": attr.string_list(doc = "pkg-config module names"),
        "linkopts": attr.string_list(doc = "extra link flags (for libraries without a .pc file)"),
    },
    local = True,
)

def _cuda_repository_impl(ctx):
    root = ctx.attr.path
    if not ctx.path(root + "/include/cuda_runtime.h").exists:
        # Still define the targets so `bazel query` works; building them fails clearly.
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
genrule(name = "missing", outs = ["missing.h"], cmd = "echo 'CUDA toolkit not found at {root}: run the set-up script' >&2; exit 1")
cc_library(name = "headers", hdrs = [":missing"])
cc_library(name = "cuda", hdrs = [":missing"])
cc_library(name = "nccl", hdrs = [":missing"])
filegroup(name = "nvcc", srcs = [":missing"])
""".format(root = root))
        ctx.file("WORKSPACE", "workspace(name = \"cuda\")\n")
        return
    ctx.symlink(root + "/include", "include")
    ctx.symlink(root + "/bin", "bin")
    ctx.file("WORKSPACE", "workspace(name = \"cuda\")\n")
    lib = root + "/lib64"
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)
cc_library(
    name = "cuda",
    deps = [":headers"],
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas", "-lcudart"],
)
cc_library(
    name = "nccl",
    deps = [":headers"],
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lnccl"],
)
filegroup(name = "nvcc", srcs = ["bin/nvcc"])
""".format(lib = lib))

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    attrs = {"path": attr.string(default = "/usr/local/cuda")},
    local = True,
)
