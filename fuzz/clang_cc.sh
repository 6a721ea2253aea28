#!/bin/sh
# The C/C++ compiler of the fuzz build (fuzz_env.sh passes it to Bazel as CC): Debian's clang-14,
# minus the gcc-only flags .bazelrc gives every build (clang 14 refuses
# -fvect-cost-model=dynamic as an unknown argument).
for arg; do
  shift
  case "$arg" in
    -fvect-cost-model=*) ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec clang-14 "$@"
