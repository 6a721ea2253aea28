# Sourced by fuzz/run_short.sh and fuzz/run_long.sh (bash; from the repository root): builds the
# libFuzzer binaries of fuzz/ and says where they are.
#
# The fuzz build (.bazelrc --config=fuzz: libFuzzer, ASan, UBSan; the compiler clang-14 through
# fuzz/clang_cc.sh) runs in an output base of its own, $RINGLEADER_FUZZ_OUTPUT_BASE (default ~/.cache/ringleader-fuzz/<hash of the
# repository path>), with its own Bazel server (it exits after 10 idle minutes): switching the
# compiler in the main output base would rebuild everything there, and again on the way back.

# The fuzz targets: fuzz/<name>_fuzzer.cc, each with its seed corpus in fuzz/corpus/<name>/.
fuzz_targets() {
  local f
  for f in fuzz/*_fuzzer.cc; do
    f=${f#fuzz/}
    echo "${f%.cc}"
  done
}

fuzz_corpus_dir() { echo "fuzz/corpus/${1%_fuzzer}"; }

# libFuzzer flags of one target beyond the common ones. The RPC handler target covers the
# coordinator core and the API's generated code, tens of thousands of features: LLVM 14's
# entropic scheduling spends most of its time updating their frequencies there (about 10x
# fewer executions, and less coverage, in the same time).
fuzz_flags() {
  case "$1" in
    rpc_handler_fuzzer) echo "-entropic=0" ;;
  esac
}

# Fails, naming the packages, unless clang-14 and its libFuzzer and sanitizer runtimes are
# installed (Debian: clang-14, libclang-rt-14-dev; deploy/setup.sh installs them).
fuzz_require_toolchain() {
  if ! command -v clang-14 >/dev/null 2>&1; then
    echo "fuzz: clang-14 not found: install Debian's clang-14 (deploy/setup.sh does)" >&2
    return 1
  fi
  local lib rt
  lib="$(clang-14 -print-resource-dir)/lib/linux"
  for rt in fuzzer asan ubsan_standalone; do
    if [ ! -f "$lib/libclang_rt.$rt-$(uname -m).a" ]; then
      echo "fuzz: clang-14's $rt runtime ($lib/libclang_rt.$rt-$(uname -m).a) not found:" \
        "install Debian's libclang-rt-14-dev (deploy/setup.sh does)" >&2
      return 1
    fi
  done
}

fuzz_output_base() {
  if [ -n "${RINGLEADER_FUZZ_OUTPUT_BASE:-}" ]; then
    echo "$RINGLEADER_FUZZ_OUTPUT_BASE"
  else
    echo "${XDG_CACHE_HOME:-$HOME/.cache}/ringleader-fuzz/$(pwd -P | md5sum | cut -c1-32)"
  fi
}

fuzz_bazel() {
  local command=$1
  shift
  bazel --output_base="$(fuzz_output_base)" --max_idle_secs=600 "$command" --config=fuzz \
    --repo_env=CC="$(pwd -P)/fuzz/clang_cc.sh" "$@"
}

# fuzz_build TARGET...: builds the libFuzzer binaries; prints Bazel's output to stderr, less
# gold's warning about each of ASan's check symbols ("Cannot export local symbol"), harmless.
fuzz_build() {
  local labels=() t
  for t in "$@"; do labels+=("//fuzz:$t"); done
  echo "fuzz: bazel build --config=fuzz ${labels[*]} (output base $(fuzz_output_base))" >&2
  fuzz_bazel build --noshow_progress "${labels[@]}" 2>&1 |
    grep -v -e "ld.gold: warning: Cannot export local symbol" -e "^INFO: From Linking" >&2
  return "${PIPESTATUS[0]}"
}

# The binary of fuzz target $1 (after fuzz_build).
fuzz_binary() {
  if [ -z "${FUZZ_BIN_DIR:-}" ]; then
    FUZZ_BIN_DIR=$(fuzz_bazel info bazel-bin 2>/dev/null) || return 1
  fi
  echo "$FUZZ_BIN_DIR/fuzz/$1"
}

# Sanitizer settings for every run: abort on the first report (so libFuzzer saves the input),
# stack traces for UBSan, symbolized with clang-14's symbolizer where installed.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
