#!/usr/bin/env bash
# count_test_results.py counts cases from plain and sharded targets, and a missing result or
# shard as one failure each.
set -euo pipefail
script=$1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
case_xml() {  # case_xml DIR PASSED FAILED
  mkdir -p "$1"
  {
    echo '<testsuites><testsuite>'
    for ((i = 0; i < $2; i++)); do echo "<testcase classname=\"c\" name=\"ok$i\"/>"; done
    for ((i = 0; i < $3; i++)); do echo "<testcase classname=\"c\" name=\"bad$i\"><failure/></testcase>"; done
    echo '</testsuite></testsuites>'
  } > "$1/test.xml"
}
case_xml "$logs/a/plain" 3 0
case_xml "$logs/a/sharded/shard_1_of_2" 2 0
case_xml "$logs/a/sharded/shard_2_of_2" 1 1
mkdir -p "$logs/a/half/shard_1_of_2"
case_xml "$logs/a/half/shard_1_of_2" 1 0
out=$(python3 "$script" "$logs" //a:plain //a:sharded //a:half //a:missing || true)
echo "$out"
expect() { grep -qF -- "$1" <<<"$out" || { echo "FAIL: expected '$1'"; exit 1; }; }
expect "7 passed, 3 failed"
expect "FAILED: //a:sharded (shard 2 of 2) c.bad0"
expect "FAILED: //a:half (shard 2 of 2) (no result: it did not build or did not run)"
expect "FAILED: //a:missing (no result: it did not build or did not run)"
echo PASS
