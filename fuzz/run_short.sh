#!/usr/bin/env bash
# The fuzz phase of deploy/test.sh (docs/testing.md, "Fuzzing"): builds every fuzz target with clang-14,
# libFuzzer, ASan and UBSan (fuzz_env.sh), then runs each on its seed corpus, fuzz/corpus/<name>/,
# and for a bounded time more. One line per target, then "N passed, N failed" (one case per
# target: it passes when the run exits 0). Exits non-zero when any fails, also when clang-14 or
# its runtimes are missing (each target then counts as failed): never a skip.
#
# usage: fuzz/run_short.sh [--seconds N]     (default 10 per target, or $RINGLEADER_FUZZ_SECONDS)
#
# New inputs go to a temporary directory, never into fuzz/corpus; a failing target's input,
# its log and the command that reproduces it stay in the directory named (long runs:
# fuzz/run_long.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
source fuzz/fuzz_env.sh

seconds=${RINGLEADER_FUZZ_SECONDS:-10}
while (($#)); do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    *) echo "usage: fuzz/run_short.sh [--seconds N]" >&2; exit 2 ;;
  esac
done

# The fuzz build's own Bazel server (its own output base) stops with this script: the test run
# leaves no server behind.
trap 'bazel --output_base="$(fuzz_output_base)" shutdown >/dev/null 2>&1 || true' EXIT

mapfile -t targets < <(fuzz_targets)
work=$(mktemp -d "${TMPDIR:-/tmp}/ringleader-fuzz-short.XXXXXX")
passed=0 failed=0 keep=0

fail_all() {
  echo "FAILED: every fuzz target ($1)" >&2
  echo "0 passed, ${#targets[@]} failed"
  rm -rf "$work"
  exit 1
}

fuzz_require_toolchain || fail_all "no clang-14 with libFuzzer"
start=$SECONDS
if ! fuzz_build "${targets[@]}" >"$work/build.log" 2>&1; then
  grep -E "error|ERROR" "$work/build.log" | head -20 >&2
  fail_all "the fuzz build failed; its log: $work/build.log"
fi
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s"

for t in "${targets[@]}"; do
  corpus=$(fuzz_corpus_dir "$t")
  binary=$(fuzz_binary "$t")
  mkdir -p "$work/$t/new"
  # -timeout: one input may take 10 s (a hang is a failure); -rss_limit_mb / -malloc_limit_mb:
  # 2 GiB (an out-of-memory is one); inputs up to 64 KiB.
  # shellcheck disable=SC2207
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
        -print_final_stats=1 $(fuzz_flags "$t") -artifact_prefix="$work/$t/" "$work/$t/new"
        "$corpus")
  t0=$SECONDS
  if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus" 2>/dev/null)" ]; then
    echo "FAIL $t: no seed corpus at $corpus"
    failed=$((failed + 1))
    continue
  fi
  "$binary" "${args[@]}" >"$work/$t/log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -n 1)
  if ((rc == 0)); then
    echo "PASS $t: $(ls "$corpus" | wc -l) seeds and ${runs:-?} runs in $((SECONDS - t0)) s"
    passed=$((passed + 1))
  else
    echo "FAIL $t (exit $rc): the end of its log ($work/$t/log):"
    grep -v "^#[0-9]" "$work/$t/log" | tail -n 40 | sed 's/^/    /'
    for crash in "$work/$t"/crash-* "$work/$t"/oom-* "$work/$t"/timeout-* "$work/$t"/leak-*; do
      [ -e "$crash" ] && echo "    reproduce: source fuzz/fuzz_env.sh; \$(fuzz_binary $t) $crash"
    done
    failed=$((failed + 1))
    keep=1
  fi
done

if ((keep)); then
  echo "fuzz: logs and failing inputs kept in $work"
else
  rm -rf "$work"
fi
echo "$passed passed, $failed failed"
((failed == 0))
