//! The shell sandbox (design section 19): what bounds a `shell-exec` command the guard allowed. It
//! owns the `[shell]` settings as the host uses them ([`Sandbox`]), what this kernel can confine
//! ([`Support`], probed once per process), and starting one command confined (`Sandbox::prepare`,
//! then `Prepared::spawn`). Running the command, its timeout and its output stay in
//! `crate::tools::shell_exec`.
//!
//! # The parts
//!
//! - **Files**: a Landlock ruleset, prepared here and applied in the child between fork and exec, so
//!   the command and everything it starts may write only beneath the workspace root, a private
//!   temporary folder made for the call (`TMPDIR`, removed after it), the folders `[shell] writable`
//!   names, and a few device files (`/dev/null`, ...). Reads are not confined.
//! - **Network**: unless `[shell] network = true`, a network namespace of its own (as root directly,
//!   otherwise inside a user namespace mapping the user to itself) with nothing but a loopback of its
//!   own (a server the command starts answers it; the host's 127.0.0.1 is out of reach). Landlock's
//!   abstract Unix socket scope is added where the kernel has it, and its TCP rules (no TCP at all)
//!   stand in where no namespace can be made.
//! - **Processes**: unless `[shell] background = true`, the command runs under a supervisor, a child
//!   process that is a child subreaper: every process the command starts, `setsid` and double forks
//!   included, stays its descendant, and when the command ends (or the call's time is up) the
//!   supervisor kills them all and reaps them before it exits. The host process itself changes
//!   nothing process-wide (no subreaper flag, no `waitpid(-1)`), so the same holds in process (the
//!   REPL, `eval`, an embedding program) and in a worker, and MCP servers are never touched.
//!   Landlock's signal scope keeps the command from signalling anything outside its sandbox, its
//!   supervisor included.
//! - **Environment**: variables whose names look like secrets (`*KEY*`, `*SECRET*`, `*TOKEN*`,
//!   `*PASSWORD*`, any case), the one `[provider] api_key_env` names and those `[shell] env_drop`
//!   names are not passed; `[shell] env_keep` names exceptions.
//!
//! `[shell] sandbox` says what happens where the kernel cannot do a part: `required` (the default)
//! refuses to run the command and says which part, why, and which setting changes it; `best-effort`
//! warns once on standard error and runs with what it could apply; `off` confines nothing (the
//! environment policy still applies).
//!
//! # Between fork and exec
//!
//! Everything the child does is prepared in the parent (the ruleset, the user namespace maps, the
//! paths as C strings), so the child only makes system calls on memory that was ready before the
//! fork: no allocation, no lock, no panic. The supervisor is a second fork of that child (a raw
//! `clone`, so no `pthread_atfork` handler runs) that never execs and never returns.

use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use landlock::{
    AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, ABI,
};

use crate::error::{Error, Result};

/// The Landlock ABI whose rights toolhost asks for: the newest it is tested with. Newer kernels
/// are asked for nothing more, so an upgrade never changes what commands may do.
const TESTED_ABI: ABI = ABI::V6;

/// The ABI that confines every write: 3 adds truncate(2), which ABI 1 and 2 leave open.
const FILES_ABI: i32 = 3;
/// The ABI with TCP rules (the network when no namespace can be made: TCP only).
const TCP_ABI: i32 = 4;
/// The ABI with signal and abstract Unix socket scoping.
const SCOPE_ABI: i32 = 6;

/// Device files every command may write (discarding output, reading entropy).
const DEVICE_FILES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Substrings of environment variable names that mark a secret (compared in upper case).
const SECRET_MARKS: [&str; 4] = ["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// The `[shell]` settings as a host applies them. Cheap to clone; clones share the note that the
/// best-effort warning was given.
///
/// ```
/// use toolhost::sandbox::Sandbox;
/// use toolhost::sandbox::SandboxMode;
///
/// let sandbox = Sandbox::default();
/// assert_eq!(sandbox.mode(), SandboxMode::Required);
/// assert!(!sandbox.passes_env("OPENAI_API_KEY") && !sandbox.passes_env("github_token"));
/// assert!(sandbox.passes_env("PATH"));
/// let sandbox = Sandbox::builder().env_keep("GITHUB_TOKEN").env_drop("AWS_*").build().unwrap();
/// assert!(sandbox.passes_env("GITHUB_TOKEN") && !sandbox.passes_env("AWS_REGION"));
/// ```
#[derive(Clone, Debug)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: Settings,
    keep: globset::GlobSet,
    drop: globset::GlobSet,
    /// Set once the best-effort warning was printed.
    warned: AtomicBool,
    /// What the kernel offers: probed on first use, unless a test gave its own.
    support: Option<&'static Support>,
}

/// How strictly `shell-exec` commands are confined (design section 19): `required`, `best-effort` or
/// `off` in a config file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Confine every part the settings ask for, or refuse to run the command and say why.
    #[default]
    Required,
    /// Confine what the kernel can; warn once on standard error about the rest.
    BestEffort,
    /// Run commands unconfined, with the user's rights (the environment policy still applies).
    Off,
}

/// What a [`Sandbox`] is built from; see [`Sandbox::builder`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// What happens where the kernel cannot confine a part.
    pub mode: SandboxMode,
    /// Commands may use the network.
    pub network: bool,
    /// Processes a command starts may outlive its call.
    pub background: bool,
    /// More folders commands may write beneath.
    pub writable: Vec<PathBuf>,
    /// Variables passed although their names look like secrets (`*` stands for any characters).
    pub env_keep: Vec<String>,
    /// More variables not passed.
    pub env_drop: Vec<String>,
    /// The variable that holds the model's API key (`[provider] api_key_env`), never passed unless
    /// `env_keep` names it.
    pub api_key_env: Option<String>,
}

impl Default for Sandbox {
    /// The default sandbox: `required`, no network, no background processes, no extra folders.
    fn default() -> Self {
        Settings::default().build().unwrap_or_else(|_| unreachable!("no patterns to compile"))
    }
}

impl Settings {
    /// More folders commands may write beneath.
    pub fn writable(mut self, folder: impl Into<PathBuf>) -> Self {
        self.writable.push(folder.into());
        self
    }

    /// What happens where the kernel cannot confine a part.
    pub fn mode(mut self, mode: SandboxMode) -> Self {
        self.mode = mode;
        self
    }

    /// Whether commands may use the network.
    pub fn network(mut self, allowed: bool) -> Self {
        self.network = allowed;
        self
    }

    /// Whether processes a command starts may outlive its call.
    pub fn background(mut self, allowed: bool) -> Self {
        self.background = allowed;
        self
    }

    /// Passes the variable(s) `pattern` names although they look like secrets.
    pub fn env_keep(mut self, pattern: impl Into<String>) -> Self {
        self.env_keep.push(pattern.into());
        self
    }

    /// Does not pass the variable(s) `pattern` names.
    pub fn env_drop(mut self, pattern: impl Into<String>) -> Self {
        self.env_drop.push(pattern.into());
        self
    }

    /// The variable that holds the model's API key.
    pub fn api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self
    }

    /// The sandbox of these settings.
    ///
    /// # Errors
    /// A config error when an `env_keep` or `env_drop` pattern does not compile.
    pub fn build(self) -> Result<Sandbox> {
        let set = |key: &str, patterns: &[String]| -> Result<globset::GlobSet> {
            let mut set = globset::GlobSetBuilder::new();
            for pattern in patterns {
                let glob = globset::Glob::new(pattern)
                    .map_err(|e| Error::config(format!("shell.{key}: {pattern:?} is not a valid pattern: {e}")))?;
                set.add(glob);
            }
            set.build().map_err(|e| Error::config(format!("shell.{key}: {e}")))
        };
        let keep = set("env_keep", &self.env_keep)?;
        let drop = set("env_drop", &self.env_drop)?;
        Ok(Sandbox {
            inner: Arc::new(Inner { settings: self, keep, drop, warned: AtomicBool::new(false), support: None }),
        })
    }
}

impl Sandbox {
    /// Settings to build a sandbox from, starting from the defaults.
    pub fn builder() -> Settings {
        Settings::default()
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// `[shell] sandbox`.
    pub fn mode(&self) -> SandboxMode {
        self.inner.settings.mode
    }

    /// Whether the variable `name` is passed to commands.
    pub fn passes_env(&self, name: &str) -> bool {
        let settings = &self.inner.settings;
        if self.inner.drop.is_match(name) {
            return false;
        }
        let upper = name.to_ascii_uppercase();
        let secret = SECRET_MARKS.iter().any(|mark| upper.contains(mark))
            || settings.api_key_env.as_deref().is_some_and(|key| key == name);
        !secret || self.inner.keep.is_match(name)
    }

    /// What confining a command comes to on this machine, part by part.
    pub fn report(&self) -> Report {
        Report::new(&self.inner.settings, self.inner.support.unwrap_or_else(support))
    }

    /// This sandbox as if the kernel offered `support` (for tests of kernels this machine is not).
    #[cfg(test)]
    fn with_support(self, support: &'static Support) -> Sandbox {
        let Inner { settings, keep, drop, warned, .. } = Arc::try_unwrap(self.inner).unwrap_or_else(|_| unreachable!());
        Sandbox { inner: Arc::new(Inner { settings, keep, drop, warned, support: Some(support) }) }
    }

    /// Whether the best-effort warning was given.
    pub fn warned(&self) -> bool {
        self.inner.warned.load(Ordering::SeqCst)
    }

    /// One paragraph for the tool description a model reads: what a command may do here, from the
    /// settings and what this kernel can enforce.
    pub fn describe(&self) -> String {
        let settings = &self.inner.settings;
        let report = self.report();
        if settings.mode == SandboxMode::Off {
            return "The command runs unconfined, with the user's rights; environment variables that look \
                    like secrets are not passed to it."
                .to_string();
        }
        if settings.mode == SandboxMode::Required && !report.gaps.is_empty() {
            return format!(
                "Commands cannot run here: the sandbox cannot confine them ({}).",
                report.gaps.iter().map(|g| g.why.as_str()).collect::<Vec<_>>().join("; ")
            );
        }
        let mut text = String::from("Sandboxed: ");
        if report.files {
            let mut places = vec!["the workspace".to_string(), "its own temporary folder ($TMPDIR)".to_string()];
            places.extend(settings.writable.iter().map(|w| w.display().to_string()));
            text.push_str(&format!("it may write only beneath {}; reading is not limited. ", list(&places)));
        }
        text.push_str(match (settings.network, report.network) {
            (true, _) => "It may use the network. ",
            (false, Confined::Fully) => "It has no network (not even the host's 127.0.0.1). ",
            (false, Confined::Partly) => "It cannot make TCP connections. ",
            (false, Confined::Not) => "",
        });
        text.push_str(match (settings.background, report.processes) {
            (true, _) => "Processes it starts in the background may keep running after the call. ",
            (false, Confined::Not) => "",
            (false, _) => "Every process it starts ends when the call ends. ",
        });
        text.push_str("Environment variables that look like secrets are not passed to it.");
        if !report.gaps.is_empty() {
            let gaps: Vec<&str> = report.gaps.iter().map(|g| g.why.as_str()).collect();
            text.push_str(&format!(" Not confined on this machine: {}.", gaps.join("; ")));
        }
        text
    }

    /// Makes what one command in `root` runs under: its environment (taken from `environment`), its
    /// temporary folder and its confinement.
    ///
    /// # Errors
    /// `denied`, saying which part cannot be confined and which setting changes that, when the
    /// mode is `required` and the kernel cannot confine a part the settings ask for; `tool_failed`
    /// when the temporary folder or the ruleset cannot be made.
    pub(crate) fn prepare(
        &self,
        root: &Path,
        environment: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Prepared> {
        let settings = &self.inner.settings;
        let report = self.report();
        let off = settings.mode == SandboxMode::Off;
        if settings.mode == SandboxMode::Required && !report.gaps.is_empty() {
            return Err(Error::denied(report.refusal()));
        }
        if settings.mode == SandboxMode::BestEffort
            && !report.gaps.is_empty()
            && !self.inner.warned.swap(true, Ordering::SeqCst)
        {
            eprintln!("toolhost: warning: {}", report.warning());
        }
        // A name that is not UTF-8 is judged by its readable part, so `KEY` in it still counts.
        let mut env: Vec<(OsString, OsString)> =
            environment.into_iter().filter(|(name, _)| self.passes_env(&name.to_string_lossy())).collect();
        let temp = if off {
            None
        } else {
            let temp = tempfile::Builder::new()
                .prefix("toolhost-shell-")
                .tempdir()
                .map_err(|e| Error::tool_failed(format!("cannot make the command's temporary folder: {e}")))?;
            // TMPDIR always; TMP and TEMP where the environment has them, so no tool falls back to /tmp.
            env.retain(|(name, _)| name != "TMPDIR");
            for (name, value) in env.iter_mut() {
                if name == "TMP" || name == "TEMP" {
                    *value = temp.path().into();
                }
            }
            env.push(("TMPDIR".into(), temp.path().into()));
            Some(temp)
        };
        let landlock = match (off, report.landlock_abi) {
            (false, Some(_)) => {
                let mut writable = vec![root.to_path_buf()];
                writable.extend(temp.as_ref().map(|t| t.path().to_path_buf()));
                writable.extend(settings.writable.iter().cloned());
                let network = match (settings.network, report.netns) {
                    (true, _) => NetworkRules::None,
                    (false, Some(_)) => NetworkRules::Scope,
                    (false, None) => NetworkRules::NoTcp,
                };
                let scope_signals = !settings.background;
                Some(ruleset(&writable, network, scope_signals)?)
            }
            _ => None,
        };
        let netns = match (report.netns, off || settings.network) {
            (Some(kind), false) => Some(Netns::new(kind)),
            _ => None,
        };
        let supervise = !off && !settings.background && report.supervisor;
        Ok(Prepared { temp, env, landlock, netns, supervise, background: settings.background })
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// What Landlock adds for the network.
#[derive(Clone, Copy, PartialEq)]
enum NetworkRules {
    /// Nothing: the network is allowed.
    None,
    /// No abstract Unix socket made outside the sandbox (the network namespace does the rest).
    Scope,
    /// That, and no TCP at all, where no network namespace can be made.
    NoTcp,
}

/// The Landlock ruleset of one command: writes beneath `writable` (and to the device files) only;
/// `network` as above; no signals outside when `scope_signals`. Rights the kernel lacks are left out
/// (best effort): [`Report`] says what that leaves open.
///
/// # Errors
/// `tool_failed` naming the folder or the step that failed.
fn ruleset(writable: &[PathBuf], network: NetworkRules, scope_signals: bool) -> Result<RulesetCreated> {
    let failed =
        |e: landlock::RulesetError| Error::tool_failed(format!("cannot prepare the sandbox's Landlock rules: {e}"));
    let write = AccessFs::from_write(TESTED_ABI);
    let mut ruleset =
        Ruleset::default().set_compatibility(CompatLevel::BestEffort).handle_access(write).map_err(failed)?;
    if network == NetworkRules::NoTcp {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(failed)?;
    }
    let mut scopes = landlock::BitFlags::<Scope>::empty();
    if network != NetworkRules::None {
        scopes |= Scope::AbstractUnixSocket;
    }
    if scope_signals {
        scopes |= Scope::Signal;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(failed)?;
    }
    let mut created = ruleset.create().map_err(failed)?;
    for folder in writable {
        let fd = PathFd::new(folder).map_err(|e| {
            Error::tool_failed(format!("cannot open {} for the sandbox's rules: {e}", folder.display()))
        })?;
        created = created.add_rule(PathBeneath::new(fd, write)).map_err(failed)?;
    }
    let file_write = write & AccessFs::from_file(TESTED_ABI);
    created.add_rules(landlock::path_beneath_rules(DEVICE_FILES, file_write)).map_err(failed)
}

/// What one command runs under, made in the parent before the fork.
pub(crate) struct Prepared {
    /// The command's temporary folder, removed when this is dropped (after the call).
    temp: Option<tempfile::TempDir>,
    env: Vec<(OsString, OsString)>,
    landlock: Option<RulesetCreated>,
    netns: Option<Netns>,
    supervise: bool,
    background: bool,
}

/// How a command started by [`Prepared::spawn`] is ended.
pub(crate) struct Supervision {
    /// Closing it tells the supervisor to end the command and everything it started.
    stop: Option<OwnedFd>,
    /// The command's process group when there is no supervisor.
    group: Option<i32>,
    background: bool,
    /// Kept until the call is over.
    _temp: Option<tempfile::TempDir>,
}

impl Prepared {
    /// Starts `command` confined. Its standard streams, arguments and folder are the caller's; its
    /// environment is replaced by the prepared one.
    ///
    /// # Errors
    /// When the process cannot be started or a confinement step failed in the child.
    ///
    /// The child returned is the supervisor when there is one (it exits as the command did, once
    /// every process the command started is gone), else the command itself.
    pub(crate) fn spawn(self, mut command: Command) -> io::Result<(Child, Supervision)> {
        command.env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
        let stop = if self.supervise { Some(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?) } else { None };
        if !self.supervise {
            command.process_group(0);
        }
        let mut child_side = ChildSide {
            landlock: self.landlock,
            netns: self.netns,
            stop: stop.as_ref().map(|(read, _)| read.as_raw_fd()),
        };
        // SAFETY: the closure runs between fork and exec. It makes system calls only (prctl, clone,
        // setsid, unshare, open/write/close on prepared C strings and buffers, Landlock's two calls,
        // close_range, poll, wait, kill, _exit), on memory prepared before the fork; it allocates
        // nothing and takes no lock. Landlock's `restrict_self` was read for this: it calls prctl
        // and landlock_restrict_self and builds plain values (its errors carry an OS error, which
        // does not allocate).
        let confining = child_side.landlock.is_some() || child_side.netns.is_some() || self.supervise;
        unsafe { command.pre_exec(move || child_side.run()) };
        let child = command.spawn().map_err(|e| {
            if !confining {
                return e;
            }
            // Confining happens in the child, between fork and exec: its failure comes back as
            // the spawn's, with only an errno to say which step.
            io::Error::new(
                e.kind(),
                format!(
                    "{e} (the sandbox may be what failed: [shell] sandbox = \"best-effort\" runs commands with \
                     what this kernel allows, \"off\" unconfined)"
                ),
            )
        })?;
        let group = (!self.supervise).then(|| child.id() as i32);
        // The read end lives on in the supervisor alone.
        let stop = stop.map(|(_, write)| write);
        Ok((child, Supervision { stop, group, background: self.background, _temp: self.temp }))
    }
}

impl Supervision {
    /// Ends what is left of the command: with a supervisor, every process it started (the
    /// supervisor then exits); without one, its process group, unless background processes are
    /// allowed and the command ended by itself (`forced` false).
    pub(crate) fn end(&mut self, forced: bool) {
        // Closing the last write end wakes the supervisor.
        self.stop = None;
        if let Some(group) = self.group {
            if forced || !self.background {
                if let Some(group) = rustix::process::Pid::from_raw(group) {
                    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
            }
        }
    }

    /// Whether a supervisor ends every process the command started.
    pub(crate) fn supervised(&self) -> bool {
        self.group.is_none()
    }

    /// Whether processes the command started may go on after the call.
    pub(crate) fn background_allowed(&self) -> bool {
        self.background
    }
}

/// What the child does between fork and exec, all of it prepared before the fork.
struct ChildSide {
    landlock: Option<RulesetCreated>,
    netns: Option<Netns>,
    /// The read end of the stop pipe, for the supervisor.
    stop: Option<RawFd>,
}

impl ChildSide {
    /// Runs in the child std forked. With a supervisor, this process becomes it and never returns;
    /// its own child goes on to confine itself and exec the command.
    fn run(&mut self) -> io::Result<()> {
        if let Some(stop) = self.stop {
            let supervisor = rustix::process::getpid();
            rustix::process::set_child_subreaper(Some(supervisor))?;
            match raw_fork()? {
                Some(command) => supervise(command, stop),
                None => {
                    // The command's own session: no controlling terminal (nothing to type into) and
                    // no share in the supervisor's process group.
                    rustix::process::setsid()?;
                    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
                    if rustix::process::getppid() != Some(supervisor) {
                        // The supervisor is gone already.
                        // SAFETY: _exit ends this process without running anything.
                        unsafe { libc::_exit(1) };
                    }
                }
            }
        }
        if let Some(netns) = &self.netns {
            netns.enter()?;
        }
        if let Some(ruleset) = self.landlock.take() {
            if ruleset.restrict_self().is_err() {
                return Err(io::Error::last_os_error());
            }
        }
        close_inherited_descriptors()
    }
}

/// `fork()` as the bare system call: no `pthread_atfork` handler runs, which `fork()` would do in a
/// child that may only make async-signal-safe calls. `Some(pid)` in the parent, `None` in the child.
fn raw_fork() -> io::Result<Option<rustix::process::Pid>> {
    // SAFETY: clone with SIGCHLD and no other flag is fork: the child gets a copy of this
    // single-threaded process and only makes system calls before it execs or exits. (The argument
    // order after the flags differs between architectures; all of them are zero here, except on
    // s390x, whose first argument is the stack.)
    #[cfg(not(target_arch = "s390x"))]
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    #[cfg(target_arch = "s390x")]
    let pid = unsafe { libc::syscall(libc::SYS_clone, 0, libc::SIGCHLD as libc::c_long, 0, 0, 0) };
    match pid {
        0 => Ok(None),
        n if n > 0 => Ok(rustix::process::Pid::from_raw(n as i32)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The supervisor: waits for the command to end or for the stop pipe to close (a timeout, an
/// interrupt, or the host gone), then kills and reaps every process left, and exits as the command
/// did. Never returns.
fn supervise(command: rustix::process::Pid, stop: RawFd) -> ! {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use rustix::process::{WaitOptions, WaitStatus};
    // SAFETY (the whole function): system calls only, on stack memory; see `ChildSide::run`.
    let pidfd = rustix::process::pidfd_open(command, rustix::process::PidfdFlags::empty());
    // Only the stop pipe and the pidfd stay open: the command's output pipes must close as soon as
    // the command's processes are gone, and nothing else of the host's is this process's business.
    let keep = [stop, pidfd.as_ref().map_or(-1, |fd| fd.as_raw_fd())];
    close_all_but(keep);
    block_signals();
    // SAFETY: the stop pipe's read end was inherited from the parent and is owned here alone.
    let stop = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(stop) };
    let mut status: Option<WaitStatus> = None;
    // Reaps orphans as they come, so they do not pile up as zombies while the command runs.
    let reap = |status: &mut Option<WaitStatus>| loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, how))) => {
                if pid == command {
                    *status = Some(how);
                }
            }
            _ => return,
        }
    };
    let one_second = Timespec { tv_sec: 1, tv_nsec: 0 };
    while status.is_none() {
        let stopped = match &pidfd {
            Ok(pidfd) => {
                let mut fds = [PollFd::new(pidfd, PollFlags::IN), PollFd::new(&stop, PollFlags::IN)];
                let _ = poll(&mut fds, Some(&one_second));
                !fds[1].revents().is_empty()
            }
            Err(_) => {
                let mut fds = [PollFd::new(&stop, PollFlags::IN)];
                let _ = poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 20_000_000 }));
                !fds[0].revents().is_empty()
            }
        };
        reap(&mut status);
        if stopped {
            break;
        }
    }
    end_descendants(&mut status, command);
    exit_as(status)
}

/// Kills every child of this process (orphans of the command come here: it is their subreaper)
/// and reaps them, until none is left. A child that forks while being killed leaves a grandchild,
/// which becomes a child in turn; a bounded number of rounds ends even a fork loop.
fn end_descendants(status: &mut Option<rustix::process::WaitStatus>, command: rustix::process::Pid) {
    use rustix::process::WaitOptions;
    let me = rustix::process::getpid();
    for _ in 0..10_000 {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, how))) => {
                    if pid == command {
                        *status = Some(how);
                    }
                }
                // Children left, none dead yet.
                Ok(None) => break,
                // No child at all: done.
                Err(_) => return,
            }
        }
        if kill_children_of(me) == 0 {
            // A child seen by wait but not yet in /proc, or one dying: give it a moment.
            let pause = rustix::thread::Timespec { tv_sec: 0, tv_nsec: 2_000_000 };
            let _ = rustix::thread::nanosleep(&pause);
        }
    }
}

/// Sends SIGKILL to every process whose parent is `parent`, found by reading `/proc/PID/stat`;
/// returns how many. Stack buffers only.
fn kill_children_of(parent: rustix::process::Pid) -> usize {
    use rustix::fs::{openat, Mode, OFlags, RawDir, CWD};
    let Ok(proc) = openat(CWD, c"/proc", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) else {
        return 0;
    };
    let mut killed = 0;
    let mut buffer = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let mut entries = RawDir::new(&proc, &mut buffer);
    while let Some(Ok(entry)) = entries.next() {
        let name = entry.file_name().to_bytes();
        if name.is_empty() || !name.iter().all(u8::is_ascii_digit) || name.len() > 10 {
            continue;
        }
        // "<pid>/stat\0"
        let mut path = [0u8; 16];
        let stat = b"/stat\0";
        path[..name.len()].copy_from_slice(name);
        path[name.len()..name.len() + stat.len()].copy_from_slice(stat);
        let Ok(path) = CStr::from_bytes_with_nul(&path[..name.len() + stat.len()]) else { continue };
        let Ok(file) = openat(&proc, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) else { continue };
        let mut text = [0u8; 256];
        let Ok(read) = rustix::io::read(&file, &mut text) else { continue };
        if parent_in_stat(&text[..read]) == Some(parent.as_raw_nonzero().get()) {
            if let Some(pid) = parse_number(name).and_then(rustix::process::Pid::from_raw) {
                if rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok() {
                    killed += 1;
                }
            }
        }
    }
    killed
}

/// The parent pid in the text of `/proc/PID/stat` ("pid (name) state ppid ..."): after the last `)`,
/// as the name may hold anything.
fn parent_in_stat(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat.get(close + 1..)?.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let _state = fields.next()?;
    parse_number(fields.next()?)
}

fn parse_number(digits: &[u8]) -> Option<i32> {
    let mut n: i32 = 0;
    if digits.is_empty() {
        return None;
    }
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(i32::from(d - b'0'))?;
    }
    Some(n)
}

/// Ends this process as the command ended: with its exit code, or by its signal (without a core
/// file). Killed on request: SIGKILL.
fn exit_as(status: Option<rustix::process::WaitStatus>) -> ! {
    let code = status.and_then(|s| s.exit_status());
    let signal = status.and_then(|s| s.terminating_signal()).unwrap_or(libc::SIGKILL);
    // SAFETY: setrlimit, signal, sigprocmask, kill and _exit are async-signal-safe and take plain
    // values.
    unsafe {
        if let Some(code) = code {
            libc::_exit(code);
        }
        let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal);
    }
}

/// Blocks every signal that can be blocked: the supervisor must outlive its command's processes.
fn block_signals() {
    // SAFETY: sigfillset and sigprocmask are async-signal-safe; the set is on the stack.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Closes every descriptor but those in `keep` (negative ones are ignored).
fn close_all_but(keep: [RawFd; 2]) {
    let (low, high) = (keep[0].min(keep[1]), keep[0].max(keep[1]));
    let mut from: u32 = 0;
    for fd in [low, high] {
        if fd < 0 {
            continue;
        }
        let fd = fd as u32;
        if fd > from {
            close_range(from, fd - 1);
        }
        from = fd + 1;
    }
    close_range(from, u32::MAX);
}

/// close_range(2), or a loop of close(2) on kernels before 5.9.
fn close_range(first: u32, last: u32) {
    // SAFETY: close_range and close take plain integers and touch only this process's descriptors.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
            return;
        }
        for fd in first..last.min(max_descriptors()) {
            libc::close(fd as i32);
        }
    }
}

/// One past the highest descriptor this process may have (the open-files limit, capped).
fn max_descriptors() -> u32 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct on the stack.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur.min(1 << 16) as u32
    } else {
        1024
    }
}

/// Marks every descriptor above the standard three close-on-exec, so the command inherits nothing
/// of toolhost's (a worker's socket, a file it has open) nor of whatever started toolhost. Called
/// between fork and exec: system calls only.
pub(crate) fn close_inherited_descriptors() -> io::Result<()> {
    // SAFETY: close_range takes plain integers and touches only this process's descriptor table.
    let marked = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if marked == 0 {
        return Ok(());
    }
    // Kernels before 5.11 have no CLOSE_RANGE_CLOEXEC: mark each descriptor.
    for fd in 3..max_descriptors() {
        // SAFETY: fcntl on a descriptor number; an unused one fails harmlessly.
        unsafe { libc::fcntl(fd as i32, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// How this kernel lets a process get a network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetnsKind {
    /// unshare(CLONE_NEWNET) directly (root, or CAP_SYS_ADMIN).
    Direct,
    /// Inside a new user namespace that maps the user to itself.
    InUserNamespace,
}

/// Entering a network namespace in the child, with the user namespace maps written ready.
struct Netns {
    kind: NetnsKind,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Netns {
    fn new(kind: NetnsKind) -> Netns {
        let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
        Netns {
            kind,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Between fork and exec: unshares the network (and, for a user, the user namespace, writing
    /// the maps), then brings the new namespace's loopback up.
    fn enter(&self) -> io::Result<()> {
        use rustix::thread::UnshareFlags;
        match self.kind {
            // SAFETY: unshare in a single-threaded child; nothing here relies on the old namespace.
            NetnsKind::Direct => unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET)? },
            NetnsKind::InUserNamespace => {
                // SAFETY: as above; the maps are written before anything depends on them.
                unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET)? };
                write_file(c"/proc/self/setgroups", b"deny\n")?;
                write_file(c"/proc/self/uid_map", &self.uid_map)?;
                write_file(c"/proc/self/gid_map", &self.gid_map)?;
            }
        }
        loopback_up();
        Ok(())
    }
}

/// Writes `bytes` to the file `path` (a /proc control file) in one write.
fn write_file(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    use rustix::fs::{open, Mode, OFlags};
    let file = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&file, bytes)?;
    Ok(())
}

/// Brings up `lo` in the current network namespace, so a command can talk to itself over
/// 127.0.0.1 (a test server it starts) while the host's stays out of reach. Best effort: without it
/// the namespace simply has no network at all.
fn loopback_up() {
    // SAFETY: a socket, two ioctls on a zeroed ifreq on the stack, and close: system calls only.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return;
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        if libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request) == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        }
        libc::close(socket);
    }
}

/// What this kernel offers the sandbox, probed once per process.
#[derive(Debug)]
pub struct Support {
    /// The Landlock ABI, or why there is none.
    pub landlock: std::result::Result<i32, Unavailable>,
    /// How a network namespace can be made, or why none can.
    pub netns: std::result::Result<NetnsKind, Unavailable>,
    /// Whether the supervisor can run (pidfds, /proc), or why not.
    pub supervisor: std::result::Result<(), Unavailable>,
}

/// Why the kernel does not offer something, in words for a report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// What this kernel offers, probed on first use.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| Support { landlock: landlock_abi(), netns: probe_netns(), supervisor: probe_supervisor() })
}

/// The running kernel's Landlock ABI version. (The landlock crate keeps it to itself, rightly for
/// choosing rights; here it only says what a report must name.)
fn landlock_abi() -> std::result::Result<i32, Unavailable> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a null attribute and the VERSION flag this only returns a number.
    let abi = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0, LANDLOCK_CREATE_RULESET_VERSION)
    };
    if abi > 0 {
        return Ok(abi as i32);
    }
    Err(Unavailable(match io::Error::last_os_error().raw_os_error() {
        Some(libc::EOPNOTSUPP) => "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` \
                                   boot parameter)"
            .to_string(),
        Some(libc::ENOSYS) => {
            "this kernel has no Landlock (Linux 5.13 or later, built with CONFIG_SECURITY_LANDLOCK)".to_string()
        }
        _ => format!("Landlock cannot be used: {}", io::Error::last_os_error()),
    }))
}

/// Tries, in a throwaway child, to make a network namespace directly and then inside a user
/// namespace.
fn probe_netns() -> std::result::Result<NetnsKind, Unavailable> {
    use rustix::thread::UnshareFlags;
    // SAFETY: the child makes two unshare calls and exits; nothing else runs there.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the single-threaded child: unshare and _exit only.
        unsafe {
            if rustix::thread::unshare_unsafe(UnshareFlags::NEWNET).is_ok() {
                libc::_exit(0);
            }
            match rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET) {
                Ok(()) => libc::_exit(1),
                Err(e) => libc::_exit(10 + e.raw_os_error().clamp(0, 200)),
            }
        }
    }
    if pid < 0 {
        return Err(Unavailable(format!("cannot try to make a network namespace: {}", io::Error::last_os_error())));
    }
    let mut status = 0;
    let waited = loop {
        // SAFETY: waits for the child just forked.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        if waited >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break waited;
        }
    };
    if waited != pid || !libc::WIFEXITED(status) {
        let why = if waited == pid {
            "the child ended abnormally".to_string()
        } else {
            io::Error::last_os_error().to_string()
        };
        return Err(Unavailable(format!("the attempt to make a network namespace did not finish ({why})")));
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(NetnsKind::Direct),
        1 => Ok(NetnsKind::InUserNamespace),
        code => Err(Unavailable(format!(
            "no network namespace can be made here (unshare(CLONE_NEWUSER|CLONE_NEWNET): {})",
            io::Error::from_raw_os_error(code - 10)
        ))),
    }
}

/// The supervisor needs pidfds (Linux 5.3) and /proc.
fn probe_supervisor() -> std::result::Result<(), Unavailable> {
    rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty())
        .map_err(|e| Unavailable(format!("this kernel has no pidfds (Linux 5.3): {e}")))?;
    std::fs::read("/proc/self/stat").map_err(|e| Unavailable(format!("/proc cannot be read: {e}")))?;
    Ok(())
}

/// How far a part is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confined {
    /// As the settings ask.
    Fully,
    /// In part (see the gaps).
    Partly,
    /// Not at all.
    Not,
}

/// One part the settings ask to confine that this kernel cannot confine, or not fully.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    /// `files`, `network` or `processes`.
    pub part: &'static str,
    /// Why, naming what is missing.
    pub why: String,
    /// The setting that stops asking for this part.
    pub setting: &'static str,
}

/// What confining commands comes to on this machine with given settings.
#[derive(Debug)]
pub struct Report {
    /// How a network namespace can be made, when one can.
    netns: Option<NetnsKind>,
    /// Whether the supervisor can run.
    supervisor: bool,
    /// The Landlock ABI, when there is one.
    pub landlock_abi: Option<i32>,
    /// Whether writes are confined (Landlock is there).
    pub files: bool,
    /// How far the network is confined (or `Fully` when the settings allow it).
    pub network: Confined,
    /// How far processes are confined (or `Fully` when background processes are allowed).
    pub processes: Confined,
    /// What the settings ask that cannot be done.
    pub gaps: Vec<Gap>,
}

impl Report {
    fn new(settings: &Settings, support: &Support) -> Report {
        let abi = support.landlock.as_ref().ok().copied();
        let mut gaps = Vec::new();
        let off = settings.mode == SandboxMode::Off;
        let files = !off && abi.is_some();
        match (&support.landlock, abi) {
            _ if off => {}
            (Err(why), _) => gaps.push(Gap { part: "files", why: format!("files: {why}"), setting: "" }),
            (_, Some(n)) if n < FILES_ABI => gaps.push(Gap {
                part: "files",
                why: format!(
                    "files: Landlock ABI {n} cannot stop truncate(2) of files outside the workspace (ABI {FILES_ABI}, \
                     Linux 6.2, can)"
                ),
                setting: "",
            }),
            _ => {}
        }
        let network = if off || settings.network {
            Confined::Fully
        } else {
            match &support.netns {
                Ok(_) => Confined::Fully,
                Err(why) => {
                    let tcp = abi.is_some_and(|n| n >= TCP_ABI);
                    let partly = if tcp { " (Landlock blocks TCP only, not UDP)" } else { "" };
                    gaps.push(Gap {
                        part: "network",
                        why: format!("network: {why}{partly}"),
                        setting: "network = true",
                    });
                    if tcp {
                        Confined::Partly
                    } else {
                        Confined::Not
                    }
                }
            }
        };
        let processes = if off || settings.background {
            Confined::Fully
        } else {
            match &support.supervisor {
                Err(why) => {
                    gaps.push(Gap {
                        part: "processes",
                        why: format!("processes: {why}"),
                        setting: "background = true",
                    });
                    Confined::Not
                }
                Ok(()) if abi.is_none_or(|n| n < SCOPE_ABI) => {
                    let have = abi.map_or("no Landlock".to_string(), |n| format!("Landlock ABI {n}"));
                    gaps.push(Gap {
                        part: "processes",
                        why: format!(
                            "processes: with {have} a command can signal processes outside its sandbox, its \
                             supervisor included, and so outlive the call (ABI {SCOPE_ABI}, Linux 6.12, stops that)"
                        ),
                        setting: "background = true",
                    });
                    Confined::Partly
                }
                Ok(()) => Confined::Fully,
            }
        };
        Report {
            netns: support.netns.as_ref().ok().copied(),
            supervisor: support.supervisor.is_ok(),
            landlock_abi: if off { None } else { abi },
            files,
            network,
            processes,
            gaps,
        }
    }

    /// The message a `required` sandbox refuses a command with.
    fn refusal(&self) -> String {
        let mut text = format!(
            "the command was not run: the shell sandbox cannot confine it here ({}). ",
            self.gaps.iter().map(|g| g.why.as_str()).collect::<Vec<_>>().join("; ")
        );
        let mut settings: Vec<&str> = self.gaps.iter().map(|g| g.setting).filter(|s| !s.is_empty()).collect();
        settings.dedup();
        if !settings.is_empty() {
            text.push_str(&format!("[shell] {} stops asking for that, ", settings.join(" and ")));
        }
        text.push_str(
            "[shell] sandbox = \"best-effort\" runs commands with what this kernel can apply, \
             sandbox = \"off\" runs them unconfined. Ask the user to change the config; there is no way around it from \
             here.",
        );
        text
    }

    /// The warning a `best-effort` sandbox prints once.
    fn warning(&self) -> String {
        format!(
            "the shell sandbox runs commands with what this kernel can apply ([shell] sandbox = \"best-effort\"); not \
             confined: {}",
            self.gaps.iter().map(|g| g.why.as_str()).collect::<Vec<_>>().join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_pid_is_read_after_the_last_parenthesis() {
        assert_eq!(parent_in_stat(b"42 (sh) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parent_in_stat(b"42 (a) b (c) R 9 1"), Some(9));
        assert_eq!(parent_in_stat(b"42 (x"), None);
        assert_eq!(parse_number(b"123"), Some(123));
        assert_eq!(parse_number(b"12a"), None);
        assert_eq!(parse_number(b"99999999999"), None);
    }

    #[test]
    fn secret_looking_names_are_not_passed_unless_kept() {
        let sandbox =
            Sandbox::builder().api_key_env("MY_MODEL").env_keep("GIT_*").env_drop("SSH_AUTH_SOCK").build().unwrap();
        for name in ["OPENAI_API_KEY", "aws_secret_access_key", "NPM_TOKEN", "DB_Password", "MY_MODEL", "SSH_AUTH_SOCK"]
        {
            assert!(!sandbox.passes_env(name), "{name}");
        }
        for name in ["PATH", "HOME", "GIT_TOKEN", "LANG"] {
            assert!(sandbox.passes_env(name), "{name}");
        }
        let dropped = Sandbox::builder().env_keep("GIT_TOKEN").env_drop("GIT_*").build().unwrap();
        assert!(!dropped.passes_env("GIT_TOKEN"), "a drop wins over a keep");
    }

    /// A kernel of Linux 5.19's era: Landlock ABI 2, and (as a user where user namespaces are
    /// restricted) no network namespace.
    fn older_kernel() -> &'static Support {
        Box::leak(Box::new(Support {
            landlock: Ok(2),
            netns: Err(Unavailable(
                "no network namespace can be made here (unshare(CLONE_NEWUSER|CLONE_NEWNET): \
                 Operation not permitted (os error 1))"
                    .to_string(),
            )),
            supervisor: Ok(()),
        }))
    }

    #[test]
    fn required_refuses_a_command_it_cannot_confine_and_says_which_part_why_and_what_changes_it() {
        let sandbox = Sandbox::default().with_support(older_kernel());
        let dir = tempfile::tempdir().unwrap();
        let Err(err) = sandbox.prepare(dir.path(), Vec::new()) else { panic!("a command ran unconfined") };
        assert_eq!(err.kind(), crate::ErrorKind::Denied);
        let message = err.message();
        for part in [
            "the command was not run: the shell sandbox cannot confine it here (",
            "files: Landlock ABI 2 cannot stop truncate(2) of files outside the workspace (ABI 3, Linux 6.2, can)",
            "network: no network namespace can be made here (unshare(CLONE_NEWUSER|CLONE_NEWNET): Operation not permitted",
            "processes: with Landlock ABI 2 a command can signal processes outside its sandbox, its supervisor included",
            "[shell] network = true and background = true stops asking for that",
            "sandbox = \"best-effort\" runs commands with what this kernel can apply",
        ] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
        assert!(sandbox.describe().starts_with("Commands cannot run here: the sandbox cannot confine them (files: "));
        // Not asking for the network and process parts leaves the files part alone.
        let fewer = Sandbox::builder().network(true).background(true).build().unwrap().with_support(older_kernel());
        let parts: Vec<&str> = fewer.report().gaps.iter().map(|g| g.part).collect();
        assert_eq!(parts, ["files"]);
        let none = Sandbox::builder().mode(SandboxMode::Off).build().unwrap().with_support(older_kernel());
        assert!(none.report().gaps.is_empty() && none.prepare(dir.path(), Vec::new()).is_ok());
    }

    #[test]
    fn without_landlock_the_report_says_why() {
        let support = Box::leak(Box::new(Support {
            landlock: Err(Unavailable(
                "this kernel has no Landlock (Linux 5.13 or later, built with CONFIG_SECURITY_LANDLOCK)".into(),
            )),
            netns: Ok(NetnsKind::Direct),
            supervisor: Ok(()),
        }));
        let report = Sandbox::default().with_support(support).report();
        assert!(!report.files && report.network == Confined::Fully && report.processes == Confined::Partly);
        let why: Vec<&str> = report.gaps.iter().map(|g| g.why.as_str()).collect();
        assert_eq!(
            why[0],
            "files: this kernel has no Landlock (Linux 5.13 or later, built with CONFIG_SECURITY_LANDLOCK)"
        );
        assert!(why[1].starts_with("processes: with no Landlock a command can signal"), "{why:?}");
    }

    #[test]
    fn best_effort_runs_with_what_it_can_apply_and_warns_once() {
        let sandbox = Sandbox::builder().mode(SandboxMode::BestEffort).build().unwrap().with_support(older_kernel());
        let dir = tempfile::tempdir().unwrap();
        let prepared = sandbox.prepare(dir.path(), vec![("PATH".into(), "/bin".into())]).expect("it runs");
        assert!(sandbox.warned());
        // No namespace to enter; Landlock rules and the supervisor still apply.
        assert!(prepared.netns.is_none() && prepared.landlock.is_some() && prepared.supervise);
        assert!(prepared.env.iter().any(|(k, _)| k == "TMPDIR"));
        let report = sandbox.report();
        assert_eq!((report.network, report.processes), (Confined::Not, Confined::Partly));
        assert!(report.warning().contains("not confined: files: Landlock ABI 2"), "{}", report.warning());
    }

    #[test]
    fn lists_read_as_a_sentence() {
        let s = |v: &[&str]| list(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["a"]), "a");
        assert_eq!(s(&["a", "b"]), "a and b");
        assert_eq!(s(&["a", "b", "c"]), "a, b and c");
    }
}
