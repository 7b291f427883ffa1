#!/usr/bin/env bash
# Runs fuzz targets one after another for N seconds each and prints executions per target.
# Usage: run.sh SECONDS [TARGET...]   (default: every target, i.e. every [[bin]] in Cargo.toml —
#        the one list of targets; `make fuzz`/`make test-fuzz` pass none unless FUZZ_TARGETS is set)
# Env:   FUZZ_ARGS            extra libFuzzer flags (e.g. "-max_len=8192")
# Exit status is non-zero if any target crashed, timed out or failed to build; the crashing input
# is in artifacts/<target>/ and the log in logs/<target>.log.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
export CARGO_TARGET_DIR="$here/target"

seconds="${1:?usage: run.sh SECONDS [TARGET...]}"
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  # shellcheck disable=SC2207 # target names are single words
  targets=($(sed -n '/^\[\[bin\]\]/,/^name/s/^name = "\(.*\)"/\1/p' Cargo.toml))
fi
for t in "${targets[@]}"; do
  grep -qx "name = \"$t\"" Cargo.toml || { echo "fuzz: no target \"$t\" in Cargo.toml" >&2; exit 1; }
done
# Safe Rust (`#![forbid(unsafe_code)]` in the core): no sanitizer, so twice the executions. Debug
# assertions and overflow checks stay on (cargo-fuzz's default).
fuzz=(cargo +nightly fuzz)
build_flags=(--sanitizer none)

python3 seeds.py
mkdir -p logs
start=$(date +%s)
"${fuzz[@]}" build "${build_flags[@]}" 2>&1 | grep -E '^(error|warning: unused)|Finished' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: build failed" >&2; exit 1; }
built=$(date +%s)

failed=()
printf '%-12s %8s %12s %9s %7s %7s  %s\n' target seconds executions exec/s cov corpus result
for t in "${targets[@]}"; do
  log="logs/$t.log"
  mkdir -p "corpus/$t"
  rc=0
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  "${fuzz[@]}" run "${build_flags[@]}" "$t" "corpus/$t" -- \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$( (grep -oE 'cov: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  corp=$( (grep -oE 'corp: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  if [ "$rc" -eq 0 ]; then result=ok; else result="FAILED (exit $rc)"; failed+=("$t"); fi
  printf '%-12s %8s %12s %9s %7s %7s  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${corp:-?}" "$result"
done
end=$(date +%s)
echo "fuzz: build $((built - start)) s, runs $((end - built)) s, total $((end - start)) s"

if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "---- $t (logs/$t.log)" >&2
    grep -E -A8 'panicked at|ERROR: libFuzzer|SUMMARY' "logs/$t.log" | head -30 >&2 || tail -30 "logs/$t.log" >&2
    grep -E 'Test unit written to|^\s+cargo fuzz (run|tmin)' "logs/$t.log" >&2 || true
  done
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
