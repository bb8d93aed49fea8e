//! What the whole-process benches share: the large real tree they search, and whether `rg` (the
//! anchor) is there to compare with.

use std::path::PathBuf;
use std::process::Command;

/// The tree to search: `TOOLHOST_BENCH_TREE`, else the cargo registry's unpacked sources.
pub fn search_tree() -> Option<PathBuf> {
    std::env::var_os("TOOLHOST_BENCH_TREE").map(PathBuf::from).or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        let src = home.join("registry/src");
        src.is_dir().then_some(src)
    })
}

/// Runs `figures` on the search tree when there is one and `rg` is on the PATH; else says why
/// `what` was skipped.
pub fn with_tree_and_rg(what: &str, figures: impl FnOnce(&std::path::Path)) {
    match search_tree() {
        Some(tree) if Command::new("rg").arg("--version").output().is_ok() => figures(&tree),
        Some(_) => println!("{what}: skipped, `rg` is not on the PATH (apt-get install ripgrep)"),
        None => println!("{what}: skipped; set TOOLHOST_BENCH_TREE to a large source tree"),
    }
}
