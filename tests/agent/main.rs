//! The agent loop against a real HTTP model server on 127.0.0.1: sessions, the log, and replay.
//!
//! One test binary per area (each links the whole dependency graph once); one module per subsystem.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod code_mode;
mod defaults;
mod parallel;
mod providers;
mod replay;
mod resume;
mod stats;
