#!/usr/bin/env bash
# What an embedder pays to build toolhost: a fresh crate that depends on it, built cold (debug, its
# own target folder, dependencies already downloaded), with the core alone
# (`default-features = false`) and with the default features, one after the other on the same
# machine. Twice: as `cargo new` makes the crate (every dependency unoptimised), and with the
# README's advice for debug builds (steel's crates optimised, so a host starts fast). Prints the crates each compiles, wall time and CPU time (user + system), and the ratios.
#
#   benches/embed_build.sh            # from the checkout
#
# Not run by CI: it compiles 170 to 275 crates four times over (about 10 minutes on 2 cores).
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

make_crate() { # name, dependency line, profile lines
  mkdir -p "$scratch/$1/src"
  cat > "$scratch/$1/Cargo.toml" <<TOML
[package]
name = "$1"
version = "0.1.0"
edition = "2021"

[workspace]

[dependencies]
$2
tempfile = "3"

$3
TOML
  # The README's first embedding example, in short: a Rust tool called from Scheme and from JSON.
  cat > "$scratch/$1/src/main.rs" <<'RUST'
use toolhost::{HostBuilder, Tool, ToolCtx};

fn shout(_ctx: &ToolCtx, text: String) -> String {
    text.to_uppercase()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let tool = Tool::new("shout", "Upper-case a text.").param("text", "What to shout").build(shout).unwrap();
    let mut host = HostBuilder::new(dir.path()).tool(tool).build().unwrap();
    assert_eq!(host.eval_to_string(r#"(shout "hi")"#).unwrap(), "HI");
    assert_eq!(host.call_json("shout", r#"{"text": "hey"}"#).model_text(), "HEY");
}
RUST
}

build() { # name -> "crates wall cpu"; a build or a run that fails ends the bench
  local dir="$scratch/$1"
  (cd "$dir" && { cargo generate-lockfile --offline -q 2>/dev/null || cargo generate-lockfile -q; })
  local crates
  crates=$(cd "$dir" && cargo tree -e normal,build --prefix none --offline 2>/dev/null | sed 's/ (\*)$//' | sort -u | wc -l)
  /usr/bin/env time -o "$dir/time.txt" -f "%e %U %S" sh -c "cd '$dir' && cargo build --offline -q >'$dir/build.log' 2>&1" \
    || { cat "$dir/build.log" >&2; echo "the build of $1 failed" >&2; exit 1; }
  (cd "$dir" && STEEL_HOME="$dir/steel-home" ./target/debug/"$1") || { echo "$1 did not run" >&2; exit 1; }
  read -r wall user sys <"$dir/time.txt"
  echo "$crates $wall $(echo "$user + $sys" | bc)"
}

advice='[profile.dev.package]
steel-core = { opt-level = 2 }
steel-parser = { opt-level = 2 }
im-rc = { opt-level = 2 }
im-lists = { opt-level = 2 }'
printf '%-44s %8s %10s %10s\n' "fresh crate, cold debug build" crates "wall s" "cpu s"
for profile in plain advice; do
  extra=""
  [ "$profile" = advice ] && extra="$advice"
  make_crate "core_$profile" "toolhost = { path = \"$checkout\", default-features = false }" "$extra"
  make_crate "default_$profile" "toolhost = { path = \"$checkout\" }" "$extra"
  read -r core_crates core_wall core_cpu <<<"$(build "core_$profile")"
  read -r full_crates full_wall full_cpu <<<"$(build "default_$profile")"
  label="as cargo new makes it"
  [ "$profile" = advice ] && label="with the README's opt-level advice"
  printf '%-44s %8s %10s %10s\n' "core ($label)" "$core_crates" "$core_wall" "$core_cpu"
  printf '%-44s %8s %10s %10s\n' "default features ($label)" "$full_crates" "$full_wall" "$full_cpu"
  printf '  core / default: wall %.2fx, cpu %.2fx, crates %.2fx\n' \
    "$(echo "$core_wall / $full_wall" | bc -l)" "$(echo "$core_cpu / $full_cpu" | bc -l)" \
    "$(echo "$core_crates / $full_crates" | bc -l)"
done
