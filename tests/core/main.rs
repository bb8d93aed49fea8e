//! The library's behaviour through its public API: the call path, the guard, the built-in, shipped
//! and Scheme tools, the workspace boundary, the shell sandbox, config, trust, warm search, the
//! handle and the tool author's loop.
//!
//! One test binary per area (each links the whole dependency graph once); one module per subsystem.

#[path = "../common/mod.rs"]
mod common;

mod authoring;
mod bindings;
mod builtin_tools;
mod call_path;
mod code_mode;
mod config;
mod guard;
mod handle;
mod model_boundary;
mod pformat;
mod readme;
mod sandbox;
mod scheme_tools;
mod shipped_tools;
mod trust;
mod warm_search;
mod workspace_boundary;
