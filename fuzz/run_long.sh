#!/usr/bin/env bash
# Long fuzzing runs (docs/testing.md, "Fuzzing"; not part of deploy/test.sh): builds the fuzz targets
# (fuzz_env.sh) and fuzzes each for N seconds, one after the other, starting from its seed
# corpus. Everything found goes under one output folder, named at the start and the end:
#   OUT/<target>/corpus/    new inputs that reached new code (fuzz/corpus/ is only read)
#   OUT/<target>/crashes/   inputs that crashed, hung, leaked or ran out of memory
#   OUT/<target>/log        libFuzzer's output
# Exits non-zero when a target found something. To keep the new inputs as seeds, minimise them
# into the seed corpus with libFuzzer's merge (the command is printed); a crash, once fixed,
# goes into fuzz/corpus/<name>/ as a regression-* file.
#
# usage: fuzz/run_long.sh [--seconds N] [--out DIR] [--keep-going] [TARGET...]
#   --seconds N   per target (default 600)
#   --out DIR     the output folder (default: a new ringleader-fuzz-long.* under $TMPDIR or /tmp);
#                 an existing one goes on from the inputs it holds
#   --keep-going  fuzz on after a failure (libFuzzer's fork mode, one child process): collects
#                 every distinct failure of the time given instead of stopping at the first
#   TARGET        e.g. rpc_handler_fuzzer or rpc_handler (default: every target)
set -uo pipefail
cd "$(dirname "$0")/.."
source fuzz/fuzz_env.sh

seconds=600 out="" keep_going=() targets=()
usage() { sed -n 's/^# usage: //p' "$0" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --keep-going) keep_going=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1); shift ;;
    -h|--help) usage ;;
    -*) echo "run_long.sh: unknown flag $1" >&2; usage ;;
    *) t=${1%_fuzzer}_fuzzer; targets+=("$t"); shift ;;
  esac
done
mapfile -t all < <(fuzz_targets)
if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/$t.cc" ]; then
    echo "run_long.sh: no fuzz target $t (targets: ${all[*]})" >&2
    exit 2
  fi
done
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/ringleader-fuzz-long.XXXXXX")
fi
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
echo "fuzz: output folder $out (${#targets[@]} targets, $seconds s each)"

fuzz_require_toolchain || exit 1
fuzz_build "${targets[@]}" || exit 1

found=0
for t in "${targets[@]}"; do
  mkdir -p "$out/$t/corpus" "$out/$t/crashes"
  echo "fuzz: $t for $seconds s ..."
  before=$(ls "$out/$t/crashes" | wc -l)
  # shellcheck disable=SC2046
  "$(fuzz_binary "$t")" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 $(fuzz_flags "$t") "${keep_going[@]}" \
    -artifact_prefix="$out/$t/crashes/" "$out/$t/corpus" "$(fuzz_corpus_dir "$t")" \
    >"$out/$t/log" 2>&1
  rc=$?
  new=$(ls "$out/$t/corpus" | wc -l)
  if ((rc == 0)) && (($(ls "$out/$t/crashes" | wc -l) == before)); then
    echo "fuzz: $t: nothing found; $out/$t/corpus now holds $new inputs"
  else
    found=1
    echo "fuzz: $t: FOUND A FAILURE (exit $rc); inputs in $out/$t/crashes:" \
      "$(ls "$out/$t/crashes" | tr '\n' ' ')"
    echo "  the end of $out/$t/log:"
    grep -v "^#[0-9]" "$out/$t/log" | tail -n 25 | sed 's/^/    /'
  fi
done
echo "fuzz: everything is in $out"
echo "fuzz: to add new inputs to a seed corpus (keeping only those that add coverage):"
echo "  source fuzz/fuzz_env.sh; \$(fuzz_binary TARGET) -merge=1 fuzz/corpus/NAME $out/TARGET/corpus"
exit "$found"
