//! The `toolhost` command as a person runs it: its subcommands, the REPL on a terminal, calls
//! isolated in a worker process, and the shell sandbox as the command applies it.
//!
//! One test binary per area (each links the whole dependency graph once); one module per subsystem.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod isolation;
mod repl;
mod sandbox;
