//! The `toolhost` command: see `toolhost --help` and the `cli` module.

fn main() {
    // steel decides its home folder once per process, the first time it compiles anything: from
    // `STEEL_HOME`, or else by creating a folder in the user's data directory (and printing "Unable
    // to create steel home directory" when it cannot). toolhost reads nothing from there, so the
    // executable points it at a folder name in the temporary directory before any thread exists;
    // worker processes inherit it. The library leaves the process environment alone.
    if std::env::var_os("STEEL_HOME").is_none() {
        // SAFETY: no other thread exists yet, so nothing reads the environment while it changes.
        unsafe { std::env::set_var("STEEL_HOME", std::env::temp_dir().join("toolhost-steel-home")) };
    }
    std::process::exit(toolhost::cli::main());
}
