//! `toolhost mcp`: the command that serves the command line's host with [`McpServer`], over
//! standard input and output or, with `--http ADDR`, over streamable HTTP.
//!
//! Standard output is the protocol channel and nothing else: before the host is built, the
//! process's standard output is moved aside for the protocol and descriptor 1 is pointed at
//! standard error, so whatever a script, steel or a child process prints lands there instead.

use std::io::Write;
use std::net::SocketAddr;

use crate::launch::{self, Asker};
use crate::mcp::{HttpOptions, McpServer};
use crate::setup::Flags;

/// `toolhost mcp`'s own flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct McpArgs {
    /// Serve over MCP's streamable HTTP transport at http://ADDR/mcp instead of standard input
    /// and output (127.0.0.1:0 takes a free port; the URL is printed on standard error). Only a
    /// loopback address unless a bearer token is set.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Require `Authorization: Bearer TOKEN` over HTTP, TOKEN being the value of the environment
    /// variable NAME (so it never shows in the process list).
    #[arg(long, value_name = "NAME", requires = "http")]
    http_token_env: Option<String>,
    /// Let browser pages from ORIGIN (scheme://host:port, e.g. the MCP Inspector's) reach the HTTP
    /// server beside its own loopback origin; may be given more than once.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    http_allow_origin: Vec<String>,
    /// Code mode: offer only the `scheme` program tool, whose description shows every tool (MCP
    /// servers' included) as a Scheme procedure, so a client's model writes one program instead
    /// of many calls.
    #[arg(long)]
    code: bool,
}

/// The HTTP options the flags ask for, or why they cannot be had (exit 2).
fn http_options(address: SocketAddr, args: &McpArgs) -> Result<HttpOptions, String> {
    let token = match &args.http_token_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(token) => {
                // The token is the server's alone: the worker, its commands and its MCP servers
                // inherit this process's environment, so the variable leaves it.
                // SAFETY: `toolhost mcp` reads its flags before it starts any thread (the host, the
                // runtime and the worker come later), so nothing reads the environment meanwhile.
                unsafe { std::env::remove_var(name) };
                Some(token)
            }
            Err(_) => return Err(format!("--http-token-env {name}: the environment variable {name} is not set")),
        },
    };
    HttpOptions::new(address, token, args.http_allow_origin.clone()).map_err(|e| e.message().to_string())
}

/// Moves the process's standard output aside for the protocol and points descriptor 1 at standard
/// error, so nothing but the protocol reaches the client. The protocol's descriptor is not inherited
/// by child processes.
fn take_stdout_for_protocol() -> std::io::Result<std::fs::File> {
    std::io::stdout().flush()?;
    let protocol = rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), 3)?;
    rustix::stdio::dup2_stdout(std::io::stderr())?;
    Ok(std::fs::File::from(protocol))
}

/// `toolhost mcp`: builds the host as the command line does (config, trust, flags; no terminal
/// confirmer, since standard input is the protocol: a confirm rule denies unless `--yes`), then
/// serves it on standard input and output until the client leaves, or over HTTP until the process
/// is ended. Returns the exit code.
pub fn serve(flags: &Flags, args: &McpArgs) -> i32 {
    // Checked before anything starts: a refused address costs no host.
    let http = match args.http.map(|address| http_options(address, args)).transpose() {
        Ok(http) => http,
        Err(why) => {
            eprintln!("toolhost: {why}");
            return 2;
        }
    };
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
    let offered = if args.code { crate::code_mode::ToolsAs::Code } else { crate::code_mode::ToolsAs::Json };
    let server = McpServer::new(handle).watching_tools().offering(offered);
    let outcome = match &http {
        Some(options) => {
            drop(protocol);
            server.run_http(options, |url| eprintln!("toolhost: serving MCP over streamable HTTP at {url}"))
        }
        None => match rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3) {
            Ok(input) => server.run_on(input, protocol.into()),
            Err(e) => {
                eprintln!("toolhost: cannot read standard input for the MCP protocol: {e}");
                return 1;
            }
        },
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}
