#!/usr/bin/env bash
# What an embedder pays to build toolhost: a fresh crate that depends on it, built cold (debug,
# its own target folder, dependencies already downloaded), once with the core alone
# (`default-features = false`) and once with the default features, one after the other on the same
# machine. Prints the crates each compiles, wall time and CPU time (user + system), and the ratios.
#
#   benches/embed_build.sh            # from the checkout
#
# Not run by CI: it compiles about 430 crates.
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

make_crate() { # name, dependency line
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

[profile.dev.package."*"]
opt-level = 2
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

build() { # name -> "crates wall cpu"
  local dir="$scratch/$1"
  (cd "$dir" && cargo generate-lockfile --offline -q 2>/dev/null || cargo generate-lockfile -q)
  local crates
  crates=$(cd "$dir" && cargo tree -e normal,build --prefix none --offline 2>/dev/null | sed 's/ (\*)$//' | sort -u | wc -l)
  local times
  times=$( { cd "$dir" && /usr/bin/env time -f "%e %U %S" cargo build --offline -q 2>&1 >/dev/null; } | tail -1 )
  (cd "$dir" && ./target/debug/"$1")
  read -r wall user sys <<<"$times"
  echo "$crates $wall $(echo "$user + $sys" | bc)"
}

make_crate embed_core "toolhost = { path = \"$checkout\", default-features = false }"
make_crate embed_default "toolhost = { path = \"$checkout\" }"
read -r core_crates core_wall core_cpu <<<"$(build embed_core)"
read -r full_crates full_wall full_cpu <<<"$(build embed_default)"
printf '%-28s %8s %10s %10s\n' "fresh crate, cold debug" crates "wall s" "cpu s"
printf '%-28s %8s %10s %10s\n' "toolhost core" "$core_crates" "$core_wall" "$core_cpu"
printf '%-28s %8s %10s %10s\n' "toolhost default features" "$full_crates" "$full_wall" "$full_cpu"
printf 'core / default: wall %.2fx, cpu %.2fx, crates %.2fx\n' \
  "$(echo "$core_wall / $full_wall" | bc -l)" "$(echo "$core_cpu / $full_cpu" | bc -l)" \
  "$(echo "$core_crates / $full_crates" | bc -l)"
