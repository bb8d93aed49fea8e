#!/usr/bin/env bash
# How long CI takes: `.ci/run` on a clean clone of each commit given (default: HEAD), one after the
# other, each with its own fresh `target/`. Prints wall time and CPU time (user + system) of each.
# Crates come from the registry cache as on any machine that fetched them once; nothing else is
# shared between the runs.
#
#   benches/ci_time.sh [COMMIT...]     # e.g. benches/ci_time.sh 5182dce HEAD
#
# Not run by CI (it runs CI).
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
[ "$#" -gt 0 ] || set -- HEAD

printf '%-12s %8s %8s %s\n' commit "wall s" "cpu s" outcome
for commit in "$@"; do
  id=$(git -C "$checkout" rev-parse --short "$commit")
  clone="$scratch/$id"
  git clone -q "$checkout" "$clone"
  git -C "$clone" checkout -q "$id"
  outcome=passed
  /usr/bin/env time -o "$scratch/time.txt" -f "%e %U %S" "$clone/.ci/run" >"$scratch/$id.log" 2>&1 || outcome="failed (log: kept in $checkout/target/ci-$id.log)"
  [ "$outcome" = passed ] || { mkdir -p "$checkout/target"; cp "$scratch/$id.log" "$checkout/target/ci-$id.log"; }
  # A failed run's times come after a line saying so: the figures are the last line.
  read -r wall user sys < <(tail -n 1 "$scratch/time.txt")
  printf '%-12s %8s %8s %s\n' "$id" "$wall" "$(echo "$user + $sys" | bc)" "$outcome"
  rm -rf "$clone"
done
