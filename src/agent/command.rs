//! `toolhost agent` and `toolhost replay` (design section 13): their flags, and running them from the
//! command line's common flags. The agent's settings come from `[provider]` with these flags on
//! top; the host is built as every command builds it ([`Setup`]), on its own thread. Standard
//! output carries only the final answer (scripts' `display` goes to standard error); progress, one
//! line per call, goes to standard error.
//!
//! Exit codes: 0 answered (or replayed clean); 1 the session failed, ended at the turn limit, or a
//! replayed result differs; 2 the settings are wrong (no model server, a bad config, a log that
//! cannot be created or read); 130 stopped with Ctrl-C (a second Ctrl-C quits at once; every log
//! line written so far is already on disk).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::ValueEnum;

use crate::agent::client::{ChatClient, ClientSettings};
use crate::agent::instructions;
use crate::agent::log::{self, SessionLog};
use crate::agent::provider::{self, ProviderFlags};
use crate::agent::replay::{self, ReplayAnswers};
use crate::agent::resume::Resumed;
use crate::agent::session::{End, Session, DEFAULT_MAX_CALLS_PER_REPLY, DEFAULT_MAX_TURNS};
use crate::agent::stop::Stop;
use crate::code_mode::ToolsAs;
use crate::config::{Api, Dialect, Preset};
use crate::error::{Error, ErrorKind};
use crate::launch::{self, settings_error, Asker};
use crate::setup::Flags;

/// What `toolhost agent --help` says after the flags: the safe defaults.
pub const AFTER_HELP: &str = "\
Safe defaults: the agent asks before every shell-exec, fs-write and fs-edit call that no [guard]
rule of your config decides, showing the command or the diff. --yes answers yes to all of them; a
rule of yours decides the calls it matches, e.g. in toolhost.toml:
  [[guard.rule]]
  tool = \"fs-*\"
  action = \"allow\"
and a [guard] default of yours turns the defaults off. Without a terminal to ask on, such a call is
denied and the model is told why.";

/// How many hosts (worker processes) read-only calls of one reply may run on at once: the first,
/// and up to three more started when a reply first makes several such calls.
const LANES: usize = 4;

/// `toolhost agent`'s own flags (`--yes` and the workspace flags are the common ones).
#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// The provider: sets the base URL, the API and the key's variable (OPENAI_API_KEY,
    /// ANTHROPIC_API_KEY, OPENROUTER_API_KEY, GEMINI_API_KEY; none for the local servers), instead
    /// of [provider] preset.
    #[arg(long, value_enum, value_name = "NAME")]
    pub provider: Option<ProviderArg>,
    /// The API's wire format (instead of the preset's, or [provider] api; chat when neither says).
    #[arg(long, value_enum, value_name = "API")]
    pub api: Option<ApiArg>,
    /// The API's base URL, e.g. http://127.0.0.1:8080/v1 (instead of the preset's, or [provider]
    /// base_url). A key the user named is sent only to a base URL the user chose.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Send the API key in the environment variable NAME (instead of [provider] api_key_env).
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// Wait for each whole reply instead of showing it as it is generated.
    #[arg(long)]
    pub no_stream: bool,
    /// The model name to request (instead of [provider] model).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Send the tools in strict form and drop the nulls in their calls (as [provider]
    /// strict_tools = true).
    #[arg(long)]
    pub strict: bool,
    /// How tools are spoken: the API's own tool calls, or P-format text (instead of [provider]
    /// dialect; native when neither says).
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub dialect: Option<DialectArg>,
    /// Which tools the model is offered: each as a JSON tool, only the `scheme` program tool with
    /// every tool as a Scheme procedure (code mode), or both (instead of [provider] tools; json
    /// when neither says).
    #[arg(long, value_enum, value_name = "HOW")]
    pub tools_as: Option<ToolsAsArg>,
    /// Write the session log (JSON lines) to FILE as the session goes.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Go on from the conversation logged in LOG with TASK, in its dialect; the new lines are
    /// added to LOG (to FILE instead with --log FILE, which then holds the whole conversation).
    #[arg(long, value_name = "LOG")]
    pub resume: Option<PathBuf>,
    /// Send at most N requests to the model.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TURNS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: u32,
    /// What the agent should do; `-` reads it from standard input.
    pub task: String,
}

/// `--dialect`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DialectArg {
    /// The provider's own tool calls.
    Native,
    /// Tool calls written as text tags in the reply.
    Pformat,
    /// Native, unless the server says the model cannot take tools (llama-server's /props).
    Auto,
}

/// `--tools-as`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ToolsAsArg {
    /// Each tool as a JSON tool of its own.
    Json,
    /// Only the `scheme` program tool, its description the catalogue of every tool as a procedure.
    Code,
    /// The tools, and the program tool beside them.
    Both,
}

/// `--provider`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ProviderArg {
    /// https://api.openai.com/v1, the Responses API, OPENAI_API_KEY.
    Openai,
    /// https://api.anthropic.com/v1, the Messages API, ANTHROPIC_API_KEY.
    Anthropic,
    /// https://openrouter.ai/api/v1, chat completions, OPENROUTER_API_KEY.
    Openrouter,
    /// Gemini's OpenAI-compatible endpoint, chat completions, GEMINI_API_KEY.
    Gemini,
    /// http://127.0.0.1:11434/v1, chat completions, no key.
    Ollama,
    /// http://127.0.0.1:8080/v1, chat completions, no key, dialect auto.
    LlamaServer,
    /// http://127.0.0.1:8000/v1, chat completions, no key.
    Vllm,
}

impl From<ProviderArg> for Preset {
    fn from(arg: ProviderArg) -> Preset {
        match arg {
            ProviderArg::Openai => Preset::OpenAi,
            ProviderArg::Anthropic => Preset::Anthropic,
            ProviderArg::Openrouter => Preset::OpenRouter,
            ProviderArg::Gemini => Preset::Gemini,
            ProviderArg::Ollama => Preset::Ollama,
            ProviderArg::LlamaServer => Preset::LlamaServer,
            ProviderArg::Vllm => Preset::Vllm,
        }
    }
}

/// `--api`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ApiArg {
    /// OpenAI-compatible chat completions ({base_url}/chat/completions).
    Chat,
    /// Anthropic's Messages API ({base_url}/messages).
    Anthropic,
    /// OpenAI's Responses API ({base_url}/responses).
    Responses,
}

/// `toolhost replay`'s flags.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The session log written by `toolhost agent --log`.
    pub log: PathBuf,
}

/// Runs `toolhost agent`; returns the exit code.
pub fn agent(flags: &Flags, args: &AgentArgs) -> i32 {
    let mut setup = match launch::settings(flags, None) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    setup.add_agent_defaults();
    let mut provider = setup.config.provider.clone();
    if args.model.is_some() {
        provider.model = args.model.clone();
    }
    if args.strict {
        provider.strict_tools = Some(true);
    }
    if args.no_stream {
        provider.stream = Some(false);
    }
    let flags_given = ProviderFlags {
        preset: args.provider.map(Preset::from),
        api: args.api.map(|api| match api {
            ApiArg::Chat => Api::Chat,
            ApiArg::Anthropic => Api::Anthropic,
            ApiArg::Responses => Api::Responses,
        }),
        base_url: args.base_url.clone(),
        api_key_env: args.api_key_env.clone(),
    };
    // The user's own files: their config, and a --config file they named.
    let user_files: Vec<PathBuf> = crate::config::user_config_path().into_iter().chain(flags.config.clone()).collect();
    let resolved = match provider::resolve(&provider, &flags_given, &user_files) {
        Ok(resolved) => resolved,
        Err(e) => return settings_error(&e),
    };
    for note in &resolved.notes {
        eprintln!("toolhost: warning: {note}");
    }
    let settings = match ClientSettings::from_resolved(&provider, &resolved) {
        Ok(settings) => settings,
        Err(e) => return settings_error(&e),
    };
    let wanted = match args.dialect {
        Some(DialectArg::Native) => Dialect::Native,
        Some(DialectArg::Pformat) => Dialect::Pformat,
        Some(DialectArg::Auto) => Dialect::Auto,
        None => provider.dialect.or(resolved.preset.map(Preset::dialect)).unwrap_or(Dialect::Native),
    };
    let dialect = choose_dialect(wanted, resolved.preset, &settings);
    let task = match read_task(&args.task) {
        Ok(task) => task,
        Err(e) => return settings_error(&e),
    };
    let resumed = match &args.resume {
        Some(path) => match log::read_log(path)
            .and_then(|entries| Resumed::from_log(&entries, path.display().to_string()))
        {
            Ok(resumed) => {
                let asked = args.dialect.is_some() || args.strict;
                if asked && (resumed.dialect != dialect || resumed.strict != provider.strict_tools.unwrap_or(false)) {
                    eprintln!(
                        "toolhost: {} was a {} session{}; --resume goes on in its dialect (leave out --dialect and --strict)",
                        path.display(),
                        match resumed.dialect {
                            Dialect::Native => "native",
                            Dialect::Pformat => "pformat",
                            Dialect::Auto => "auto",
                        },
                        if resumed.strict { " in strict mode" } else { "" }
                    );
                    return 2;
                }
                Some(resumed)
            }
            Err(e) => return settings_error(&e),
        },
        None => None,
    };
    let log = match (&args.log, &args.resume) {
        (Some(path), Some(from)) if same_file(path, from) => SessionLog::append(path).map(Some),
        (Some(path), _) => SessionLog::create(path).map(Some),
        (None, Some(from)) => SessionLog::append(from).map(Some),
        (None, None) => Ok(None),
    };
    let log = match log {
        Ok(log) => log,
        Err(e) => return settings_error(&e),
    };
    // The tools run in a worker process (design section 18), as `toolhost call`'s do; read-only
    // calls of one reply may run at once on more hosts started like it.
    let start = launch::Start { asker: Asker::Terminal, worker_flags: &["--agent-defaults"], lanes: LANES };
    let handle = match launch::host_handle(flags, &setup, &start) {
        Ok(handle) => handle,
        Err(code) => return code,
    };

    let stop = Stop::new();
    let on_signal = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        if on_signal.is_stopped() {
            std::process::exit(130);
        }
        on_signal.stop();
        eprintln!("toolhost: stopping (Ctrl-C again quits at once)");
    }) {
        eprintln!("toolhost: warning: Ctrl-C will not stop the session cleanly: {e}");
    }

    let root = if setup.root.as_os_str().is_empty() { std::path::Path::new(".") } else { setup.root.as_path() };
    let instructions = match crate::workspace::Workspace::new(root) {
        Ok(workspace) => instructions::gather(&workspace, crate::config::user_config_dir().as_deref()),
        Err(e) => return settings_error(&e),
    };
    for problem in &instructions.problems {
        eprintln!("toolhost: warning: {problem}");
    }
    let streamed = Arc::new(Mutex::new(Shown::default()));
    let text_to_stdout = std::io::stdout().is_terminal();
    let mut client = ChatClient::new(settings).stop_on(stop.clone());
    if client.settings().stream {
        let shown = Arc::clone(&streamed);
        client = client.show_text(move |text| show(&shown, text, text_to_stdout));
    }
    let mut session = Session::new(handle, &mut client)
        .instructions(&instructions)
        .dialect(dialect)
        .tools_as(match args.tools_as {
            Some(ToolsAsArg::Json) => ToolsAs::Json,
            Some(ToolsAsArg::Code) => ToolsAs::Code,
            Some(ToolsAsArg::Both) => ToolsAs::Both,
            None => provider.tools.unwrap_or_default(),
        })
        .strict(provider.strict_tools.unwrap_or(false))
        .max_turns(args.max_turns as usize)
        .max_calls_per_reply(
            provider
                .max_calls_per_reply
                .map_or(DEFAULT_MAX_CALLS_PER_REPLY, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        )
        .stop_on(stop)
        .on_call(|event| eprintln!("toolhost: {}", event.progress_line()));
    if let Some(log) = log {
        session = session.log(log);
    }
    if let Some(resumed) = resumed {
        session = session.resume(resumed);
    }
    let result = session.run(&task);
    let totals = client.totals();
    if let Some(summary) = totals.summary() {
        eprintln!("toolhost: {summary}");
    }
    match result {
        Ok(outcome) => match outcome.end {
            End::Answered => {
                let answer = outcome.answer.unwrap_or_default();
                let already = text_to_stdout && streamed.lock().is_ok_and(|s| !answer.is_empty() && s.last == answer);
                if already {
                    // The answer is on the terminal already: it was shown as it was generated.
                } else if answer.ends_with('\n') {
                    print!("{answer}");
                } else {
                    println!("{answer}");
                }
                if totals.last_cut {
                    eprintln!(
                        "toolhost: warning: the answer was cut: the model reached its token limit \
                         (raise [provider] max_tokens)"
                    );
                }
                0
            }
            End::MaxTurns => {
                eprintln!(
                    "toolhost: the model was still calling tools after {} turns (--max-turns); no final answer",
                    outcome.turns
                );
                1
            }
            End::Interrupted => {
                eprintln!("toolhost: interrupted");
                130
            }
        },
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}

/// The dialect to speak: `wanted`, with llama-server's `/props` asked first when `wanted` is auto or
/// the preset is llama-server: a model whose chat template cannot take tools gets P-format under
/// auto, and a warning under native.
fn choose_dialect(wanted: Dialect, preset: Option<Preset>, settings: &ClientSettings) -> Dialect {
    let ask = wanted == Dialect::Auto || (wanted == Dialect::Native && preset == Some(Preset::LlamaServer));
    if !ask || settings.api != Api::Chat {
        return if wanted == Dialect::Auto { Dialect::Native } else { wanted };
    }
    let timeout = settings.timeout.min(std::time::Duration::from_secs(10));
    match provider::template_takes_tools(&settings.base_url, timeout) {
        Some((false, said)) if wanted == Dialect::Auto => {
            eprintln!(
                "toolhost: the model's chat template cannot take tools (llama-server /props: {said}); \
                 speaking P-format instead"
            );
            Dialect::Pformat
        }
        Some((false, said)) => {
            eprintln!(
                "toolhost: warning: the model's chat template cannot take tools (llama-server /props: \
                 {said}): the server will drop them from every request; --dialect pformat (or auto) \
                 speaks tools as text instead"
            );
            Dialect::Native
        }
        _ if wanted == Dialect::Auto => Dialect::Native,
        _ => wanted,
    }
}

/// What was shown of streamed replies: the one being shown, and the last whole one.
#[derive(Default)]
struct Shown {
    current: String,
    last: String,
}

/// Shows streamed text on the terminal (standard output when it is one, else standard error, so
/// that standard output still carries only the answer); `""` ends a reply, on a line of its own.
fn show(shown: &Mutex<Shown>, text: &str, to_stdout: bool) {
    let Ok(mut shown) = shown.lock() else { return };
    let mut out: Box<dyn Write> = if to_stdout { Box::new(std::io::stdout()) } else { Box::new(std::io::stderr()) };
    if text.is_empty() {
        if !shown.current.is_empty() && !shown.current.ends_with('\n') {
            let _ = writeln!(out);
        }
        shown.last = std::mem::take(&mut shown.current);
    } else {
        shown.current.push_str(text);
        let _ = write!(out, "{text}");
    }
    let _ = out.flush();
}

/// Runs `toolhost replay`; returns the exit code.
pub fn replay(flags: &Flags, args: &ReplayArgs) -> i32 {
    let entries = match log::read_log(&args.log) {
        Ok(entries) => entries,
        Err(e) => return settings_error(&e),
    };
    let mut setup = match launch::settings(flags, None) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    // The calls were judged under the agent's defaults: they are judged so again.
    setup.add_agent_defaults();
    let answers = ReplayAnswers::new();
    let builder = match setup.builder(flags, Some(answers.confirmer())) {
        Ok(builder) => builder,
        Err(e) => return settings_error(&e),
    };
    let handle = match launch::thread_handle(builder) {
        Ok(handle) => handle,
        Err(code) => return code,
    };
    let report = replay::replay(&entries, &handle, &answers);
    for difference in &report.differences {
        println!("{}", difference.report());
    }
    let skipped = if report.skipped > 0 { format!(" ({} skipped)", report.skipped) } else { String::new() };
    if report.is_clean() {
        println!("replayed {} calls{skipped}: every result is as logged", report.replayed);
        0
    } else {
        println!("replayed {} calls{skipped}: {} differ", report.replayed, report.differences.len());
        1
    }
}

/// Whether two paths name one file (both must exist; a path that does not is no file of the other).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn read_task(task: &str) -> crate::Result<String> {
    if task != "-" {
        return Ok(task.to_string());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Error::new(ErrorKind::Config, format!("cannot read the task from standard input: {e}")))?;
    Ok(text)
}
