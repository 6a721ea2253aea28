"""cc_grpc_proto: protoc + grpc_cpp_plugin from Debian, without @com_google_protobuf.

For `name` over `src = "foo.proto"` it defines:
  :<name>       messages only (foo.pb.{h,cc}); links libprotobuf, never grpc++.
  :<name>_grpc  service stubs (foo.grpc.pb.{h,cc}); the only kind of target that links grpc++.
"""

def cc_grpc_proto(name, src, deps = [], grpc_deps = [], visibility = None):
    base = src[:-len(".proto")]
    pkg = native.package_name()
    pb = [base + ".pb.h", base + ".pb.cc"]
    grpc_pb = [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    proto_srcs = [src] + [d + "_srcs" for d in deps]
    native.filegroup(name = name + "_srcs", srcs = [src], visibility = visibility)
    native.genrule(
        name = name + "_gen",
        srcs = proto_srcs,
        outs = pb + grpc_pb,
        cmd = ("/usr/bin/protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin $(location {src})").format(src = src),
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = deps + ["@protobuf//:lib"],
        visibility = visibility,
    )
    native.cc_library(
        name = name + "_grpc",
        srcs = [base + ".grpc.pb.cc"],
        hdrs = [base + ".grpc.pb.h"],
        deps = [":" + name] + grpc_deps + ["@grpc//:lib"],
        visibility = visibility,
    )
