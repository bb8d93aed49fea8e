//! Link settings for the `toolhost` executable. Only a build with the `cli` feature has the
//! executable, so without it (an embedder's core-only build) nothing runs here, and no C compiler is
//! needed. With it, a dependent pays one probe (about 0.2 s).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CC");
    if std::env::var_os("CARGO_FEATURE_CLI").is_none() {
        return;
    }
    // Packed relative relocations (DT_RELR): the loader no longer reads ~870 KB of relocation
    // entries at every start, about half a megabyte of a one-shot `toolhost call`'s resident
    // memory; the executable stays position-independent. Only where a probe linked so runs here (glibc 2.36+,
    // binutils 2.38+ or lld): elsewhere, and when cross-compiling, an ordinary executable.
    if packed_relocations_work() {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

fn packed_relocations_work() -> bool {
    let (target, host) = (std::env::var("TARGET").unwrap_or_default(), std::env::var("HOST").unwrap_or_default());
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else { return false };
    if target != host || !target.contains("linux-gnu") {
        return false;
    }
    let (source, probe) = (out.join("relr-probe.c"), out.join("relr-probe"));
    if std::fs::write(&source, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    let linked = Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
        .args(["-fPIE", "-pie", "-Wl,-z,pack-relative-relocs", "-o"])
        .arg(&probe)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success() && o.stderr.is_empty());
    linked && Command::new(&probe).status().is_ok_and(|s| s.success())
}
