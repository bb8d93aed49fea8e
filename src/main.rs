//! The `toolhost` command: see `toolhost --help` and the `cli` module.

fn main() {
    std::process::exit(toolhost::cli::main());
}
