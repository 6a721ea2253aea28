#!/usr/bin/env bash
# usage: strategy_compare_flags_test.sh PATH/TO/strategy_compare.sh
# The flags of bench/strategy_compare.sh, with --dry_run (nothing built or started): the default
# runs are described with the model's parameter count; a bad strategy list, world size, model or
# count fails with exit 2 and a line naming the flag.
set -uo pipefail
script=$1
failures=0

expect() {  # expect EXIT_CODE TEXT ARGS...: the run exits EXIT_CODE and prints TEXT
  local code=$1 text=$2
  shift 2
  local output
  output=$("$script" "$@" 2>&1)
  local got=$?
  if [ "$got" -ne "$code" ] || [[ "$output" != *"$text"* ]]; then
    echo "FAIL: $* exited $got (expected $code), wanted '$text' in:" >&2
    echo "$output" >&2
    failures=$((failures + 1))
  fi
}

expect 0 "P = 47788042 parameters" --dry_run
expect 2 "--bucket_cap_mb: expected a positive number" --dry_run --bucket_cap_mb 0
expect 0 "strategies ddp,zero1,zero2,fsdp at ranks 2 4" --dry_run
expect 0 "mlp 784-64-10 (P = 50890 parameters)" --dry_run --layers 784,64,10 --ranks "1 2 8"
expect 2 "--strategies: expected names separated by commas" --dry_run --strategies "ddp;zero1"
expect 2 "--strategies: expected names separated by commas" --dry_run --strategies "ddp,,zero1"
expect 2 "the list must hold ddp" --dry_run --strategies zero1,zero2
expect 2 "--ranks: expected world sizes" --dry_run --ranks "2 x"
expect 2 "--ranks: expected world sizes" --dry_run --ranks 0
expect 2 "--layers: expected widths from 784 to 10" --dry_run --layers 784,5120
expect 2 "expected a positive count, got '0'" --dry_run --rounds 0
expect 2 "at least 2" --dry_run --steps 1
expect 2 "--steps needs a value" --dry_run --steps
expect 2 "unknown flag --strategy" --dry_run --strategy ddp
echo "$failures failures"
((failures == 0))
