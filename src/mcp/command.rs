//! `toolhost mcp`: the command that serves the command line's host over standard input and
//! output with [`McpServer`].
//!
//! Standard output is the protocol channel and nothing else: before the host is built, the
//! process's standard output is moved aside for the protocol and descriptor 1 is pointed at
//! standard error, so whatever a script, steel or a child process prints lands there instead.

use std::io::Write;

use crate::launch::{self, Asker};
use crate::mcp::McpServer;
use crate::setup::Flags;

/// Moves the process's standard output aside for the protocol and points descriptor 1 at standard
/// error, so nothing but the protocol reaches the client. The protocol's descriptor is not inherited
/// by child processes.
fn take_stdout_for_protocol() -> std::io::Result<std::fs::File> {
    std::io::stdout().flush()?;
    let protocol = rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), 3)?;
    rustix::stdio::dup2_stdout(std::io::stderr())?;
    Ok(std::fs::File::from(protocol))
}

/// `toolhost mcp`'s flags.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct McpArgs {
    /// Code mode: offer only the `scheme` program tool, whose description shows every tool (MCP
    /// servers' included) as a Scheme procedure, so a client's model writes one program instead
    /// of many calls.
    #[arg(long)]
    pub(crate) code: bool,
}

/// `toolhost mcp`: builds the host as the command line does (config, trust, flags; no terminal
/// confirmer, since standard input is the protocol: a confirm rule denies unless `--yes`), then
/// serves it on standard input and output until the client leaves. Returns the exit code.
pub fn serve(flags: &Flags, args: &McpArgs) -> i32 {
    let protocol = match take_stdout_for_protocol() {
        Ok(file) => file,
        Err(e) => {
            eprintln!("toolhost: cannot set standard output aside for the MCP protocol: {e}");
            return 1;
        }
    };
    let setup = match launch::settings(flags, None) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    // The tools run in a worker process (design section 18), as `toolhost call`'s do, unless the
    // config or --no-isolate says otherwise.
    let handle = match launch::host_handle(
        flags,
        &setup,
        &launch::Start { asker: Asker::Nobody, worker_flags: &[], lanes: 1 },
    ) {
        Ok(handle) => handle,
        Err(code) => return code,
    };
    let writer = tokio::fs::File::from_std(protocol);
    let offered = if args.code { crate::code_mode::ToolsAs::Code } else { crate::code_mode::ToolsAs::Json };
    match McpServer::new(handle).watching_tools().offering(offered).run(tokio::io::stdin(), writer) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}
