//! Shared set-up for the integration tests: a real temporary workspace with real files, and a host
//! on it.
#![allow(dead_code)]

pub mod model_server;

use std::path::Path;

use serde_json::Value;
use toolhost::{CallRecord, Host, HostBuilder};

/// A temporary workspace holding `a.txt` (300 lines, "line N") and whatever `files` add.
pub fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines: String = (1..=300).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), lines).expect("write a.txt");
    for (path, content) in files {
        write(dir.path(), path, content);
    }
    dir
}

pub fn write(root: &Path, path: &str, content: &str) {
    let full = root.join(path);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(full, content).expect("write");
}

pub fn host(dir: &tempfile::TempDir) -> Host {
    let host = HostBuilder::new(dir.path()).build().expect("host");
    assert!(host.load_errors().is_empty(), "load errors: {:?}", host.load_errors());
    host
}

/// The result text of a call that must succeed.
pub fn ok_text(outcome: &CallRecord) -> String {
    match &outcome.result {
        Ok(Value::String(s)) => s.clone(),
        Ok(other) => other.to_string(),
        Err(e) => panic!("call failed: {} ({})", e.message(), e.kind()),
    }
}

/// The error kind and message of a call that must fail.
pub fn err_of(outcome: &CallRecord) -> (String, String) {
    match &outcome.result {
        Ok(v) => panic!("call succeeded with {v}"),
        Err(e) => (e.kind().as_str().to_string(), e.message().to_string()),
    }
}

/// The line numbers an fs-read result shows.
pub fn numbered_lines(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.split('\t').next()?.trim().parse().ok()).collect()
}

/// A home folder of a test's own: the `toolhost` processes a test runs get it as `HOME`,
/// `XDG_CONFIG_HOME` and `XDG_CACHE_HOME` (where MCP tool lists are kept), so no test reads or writes the real user's config or trust store. steel's
/// own `STEEL_HOME` is left unset, as a newcomer's shell has it.
pub struct Home(tempfile::TempDir);

impl Home {
    pub fn new() -> Home {
        Home(tempfile::tempdir().expect("tempdir"))
    }

    /// The home folder itself (`HOME`).
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// `$XDG_CONFIG_HOME/toolhost`: where the user's `config.toml` and the trust store live.
    pub fn toolhost_config_dir(&self) -> std::path::PathBuf {
        self.0.path().join("xdg-config/toolhost")
    }

    /// The REPL's history file.
    pub fn history_file(&self) -> std::path::PathBuf {
        self.0.path().join(".history")
    }

    /// `toolhost ARGS` in `dir`, with this home.
    pub fn command(&self, dir: &Path, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
        command.args(args).current_dir(dir);
        self.environment(&mut command);
        command
    }

    /// Gives `command` this home (for a program that starts `toolhost` itself).
    pub fn environment(&self, command: &mut std::process::Command) {
        command
            .env("HOME", self.0.path())
            .env("XDG_CONFIG_HOME", self.0.path().join("xdg-config"))
            .env("XDG_CACHE_HOME", self.0.path().join("xdg-cache"))
            .env_remove("XDG_DATA_HOME")
            .env_remove("STEEL_HOME")
            .env("TOOLHOST_HISTORY", self.history_file());
        // Tests talk to servers on 127.0.0.1 only; a proxy from the environment would get between.
        for proxy in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
            command.env_remove(proxy);
        }
    }

    /// Starts `toolhost ARGS` in `dir` in the background: no input, its output captured.
    pub fn spawn(&self, dir: &Path, args: &[&str]) -> std::process::Child {
        self.command(dir, args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("toolhost starts")
    }

    /// Runs `toolhost ARGS` in `dir` with `stdin` as its input (none: closed).
    pub fn run(&self, dir: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use std::io::Write;
        let mut child = self
            .command(dir, args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("toolhost starts");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("write stdin");
        }
        drop(input);
        child.wait_with_output().expect("toolhost runs")
    }
}

/// The pids of processes whose command line has an argument equal to `arg` (read from /proc, so no
/// tool is needed).
pub fn processes_with_arg(arg: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|cmdline| cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Polls `check` until it holds, failing the test after a generous deadline. For waiting on
/// another process, never for asserting how long something took.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs `toolhost ARGS` on a pseudo-terminal (util-linux `script`) with this home, typing `typed`
/// at it all at once; returns the screen once it ends.
pub fn on_terminal(home: &Home, dir: &Path, args: &[&str], typed: &str) -> String {
    let mut terminal = Terminal::start(home, dir, args);
    terminal.send(typed);
    terminal.finish()
}

/// `toolhost` on a pseudo-terminal (util-linux `script`), typed at as a person would.
pub struct Terminal {
    child: std::process::Child,
    input: std::process::ChildStdin,
    screen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Terminal {
    pub fn start(home: &Home, dir: &Path, args: &[&str]) -> Terminal {
        use std::io::Read;
        let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_toolhost").to_string())
            .chain(args.iter().map(|a| format!("'{}'", a.replace('\'', r"'\''"))))
            .collect();
        let settings = home.command(dir, &[]);
        let mut child = std::process::Command::new("script")
            .args(["-qec", &quoted.join(" "), "/dev/null"])
            .current_dir(dir)
            .envs(settings.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
            .env("TERM", "xterm")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("script starts");
        let input = child.stdin.take().expect("stdin");
        let mut output = child.stdout.take().expect("stdout");
        let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let seen = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = output.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Terminal { child, input, screen }
    }

    pub fn send(&mut self, keys: &str) {
        use std::io::Write;
        self.input.write_all(keys.as_bytes()).expect("type");
        self.input.flush().expect("flush");
    }

    /// Everything shown so far, carriage returns and terminal escapes removed.
    pub fn screen(&self) -> String {
        strip_escapes(&self.screen.lock().unwrap())
    }

    /// Waits until the screen, after what it showed when `since` was taken, contains `text`.
    pub fn wait_for(&self, text: &str, since: usize) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.get(since..).is_some_and(|s| s.contains(text)) {
                return screen;
            }
            assert!(std::time::Instant::now() < deadline, "gave up waiting for {text:?}; the screen:\n{screen}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits for the program to end by itself (the test typed `:quit`), failing after a deadline.
    pub fn finish(mut self) -> String {
        eventually("the program to end", || matches!(self.child.try_wait(), Ok(Some(_))));
        self.screen()
    }
}

impl Drop for Terminal {
    /// A test that fails leaves no REPL running behind it.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes ANSI escape sequences and carriage returns.
pub fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    while let Some(&n) = chars.peek() {
                        chars.next();
                        if n.is_ascii_alphabetic() || n == '~' {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// The real MCP peers the MCP tests run against: the pinned npm packages of
/// `tests/fixtures/mcp/package.json` (the reference server `server-everything` and the official
/// SDK, which the fixture server and the client script use). They are installed with `npm ci` the
/// first time a test needs them, once per machine: a lock file keeps parallel test processes from
/// installing at once.
pub mod peers {
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    /// `tests/fixtures/mcp`.
    pub fn dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp")
    }

    /// Whether every package pinned in package.json is installed at its pinned version.
    fn installed(dir: &Path) -> bool {
        let read = |path: PathBuf| -> Option<serde_json::Value> {
            serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
        };
        let Some(manifest) = read(dir.join("package.json")) else { return false };
        let Some(pinned) = manifest["dependencies"].as_object() else { return false };
        pinned.iter().all(|(name, version)| {
            read(dir.join("node_modules").join(name).join("package.json"))
                .is_some_and(|installed| installed["version"] == *version)
        })
    }

    /// Runs one of the peers' client scripts (`command`, a `node` command line); the one JSON object
    /// it prints. Panics with its output if it failed.
    pub fn client_report(command: &mut Command) -> serde_json::Value {
        let out = command.output().expect("node runs");
        assert!(
            out.status.success(),
            "the client failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the client prints one JSON object")
    }

    /// Installs the peers when they are missing; returns `tests/fixtures/mcp`. Panics with npm's
    /// own output when it cannot (no node/npm, no registry).
    pub fn ensure() -> &'static Path {
        static READY: OnceLock<PathBuf> = OnceLock::new();
        READY.get_or_init(|| {
            let dir = dir();
            if installed(&dir) {
                return dir;
            }
            let lock_path = std::env::temp_dir().join("toolhost-mcp-peers.lock");
            let lock = std::fs::File::create(&lock_path).expect("create the install lock file");
            // flock, not File::lock: the tests build with the crate's rust-version (1.85).
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("take the install lock");
            if !installed(&dir) {
                let output = Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&dir)
                    .output()
                    .expect("npm runs (node and npm are needed for the MCP tests)");
                assert!(
                    output.status.success(),
                    "npm ci in {} failed:\n{}\n{}",
                    dir.display(),
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
                assert!(installed(&dir), "npm ci did not install the pinned MCP peers");
            }
            drop(lock);
            dir
        })
    }

    /// The entry point of `@modelcontextprotocol/server-everything`.
    pub fn everything() -> PathBuf {
        ensure().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    }

    /// `fixture-server.mjs`, the small server that shows the arguments it received.
    pub fn fixture_server() -> PathBuf {
        ensure().join("fixture-server.mjs")
    }

    /// A `[[mcp]]` entry that runs `node SCRIPT ARGS...`, as TOML.
    pub fn stdio_entry(name: &str, script: &Path, args: &[&str], timeout_s: Option<f64>) -> String {
        let mut all = vec![toml_string(&script.display().to_string())];
        all.extend(args.iter().map(|a| toml_string(a)));
        let timeout = timeout_s.map(|t| format!("timeout_s = {t}\n")).unwrap_or_default();
        format!("[[mcp]]\nname = \"{name}\"\ncommand = \"node\"\nargs = [{}]\n{timeout}\n", all.join(", "))
    }

    fn toml_string(s: &str) -> String {
        serde_json::Value::String(s.to_string()).to_string()
    }

    /// server-everything serving streamable HTTP on 127.0.0.1, killed when dropped.
    pub struct EverythingHttp {
        child: std::process::Child,
        /// `http://127.0.0.1:PORT/mcp`.
        pub url: String,
    }

    impl EverythingHttp {
        /// Starts it on a free port and waits until the port takes connections (polling the port,
        /// not sleeping a guessed time). A port taken between choosing and binding is retried.
        pub fn start() -> EverythingHttp {
            let entry = everything();
            for _ in 0..5 {
                let port =
                    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
                let mut child = Command::new("node")
                    .arg(&entry)
                    .arg("streamableHttp")
                    .env("PORT", port.to_string())
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("node starts");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                loop {
                    if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                        return EverythingHttp { child, url: format!("http://127.0.0.1:{port}/mcp") };
                    }
                    if child.try_wait().ok().flatten().is_some() || std::time::Instant::now() > deadline {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
            }
            panic!("server-everything did not start serving streamable HTTP");
        }
    }

    impl Drop for EverythingHttp {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A real HTTP server on 127.0.0.1 that answers every request with `hello` and counts the
/// connections it accepted, for checking whether a command can reach the host's loopback. It stops
/// when dropped.
pub struct LocalServer {
    pub port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl LocalServer {
    pub fn start() -> LocalServer {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (count, done) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            // Bounded: a test's server lives a few minutes at most.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
            while !done.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        count.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                        let mut request = [0u8; 1024];
                        let _ = stream.read(&mut request);
                        let _ =
                            stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
        });
        LocalServer { port, accepted, stop }
    }

    /// How many connections it accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Whether process `pid` is gone (or a zombie, dead and waiting for its reaper), read from /proc.
pub fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// The CPU time process `pid` has used in user mode, in clock ticks (0 once it is gone): it
/// moves while the process computes.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    fields.get(11).and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// The pid written in the file `path` (by a command, with `echo $$ > path`).
pub fn pid_in(path: &Path) -> u32 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.trim().parse().unwrap_or_else(|_| panic!("{}: {text:?} is not a pid", path.display()))
}

impl Home {
    /// Runs `toolhost ARGS` in `dir` (no input) as [`Home::run`] does, but bounded: 2 GiB of
    /// address space and 60 s, after which it is killed. For inputs that, mishandled, would make it
    /// eat the machine's memory or hang.
    pub fn run_bounded(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        use std::os::unix::process::CommandExt;
        let mut command = self.command(dir, args);
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // SAFETY: setrlimit alone between fork and exec. Only the soft limit: the worker process
        // `toolhost call` starts may still set its own.
        unsafe {
            command.pre_exec(|| {
                let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                if libc::getrlimit(libc::RLIMIT_AS, &mut limit) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                limit.rlim_cur = (2 << 30).min(limit.rlim_max);
                if libc::setrlimit(libc::RLIMIT_AS, &limit) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("toolhost starts");
        let pid = child.id();
        let (sent, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(child.wait_with_output());
        });
        match outcome.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(output) => output.expect("toolhost runs"),
            Err(_) => {
                // SAFETY: a signal to our own child, which its waiting thread has not reaped.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                let _ = outcome.recv();
                panic!("toolhost {args:?} hung: killed after 60 s");
            }
        }
    }
}

/// Makes a named pipe (FIFO) at `path`: opening it to read blocks until someone writes.
pub fn make_fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("no NUL in the path");
    // SAFETY: mkfifo reads the NUL-terminated name only.
    let made = unsafe { libc::mkfifo(name.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}
