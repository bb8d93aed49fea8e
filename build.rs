//! Link settings for the `toolhost` executable.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    // Packed relative relocations (DT_RELR): the loader no longer reads ~870 KB of relocation
    // entries at every start, which is about a tenth of a one-shot `toolhost call`'s resident
    // memory; the executable stays position-independent. GNU ld and lld only emit them when the C
    // library supports them (glibc 2.36+), so older systems get an ordinary executable.
    if target.contains("linux-gnu") {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
