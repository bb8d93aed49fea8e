//! Scheme behaviour pinned by `.scm` scripts: every file under `tests/scheme/success/` must run
//! without error in a fresh host, and every file under `tests/scheme/failure/` must fail with the
//! text its first line names (`;; error: TEXT`). Each script is its own test, named after its file.
//! Scripts run in a temporary workspace holding `a.txt` (300 lines, "line N") and may use
//! `(check-equal actual expected)`.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};

const CHECK: &str = r#"
(define (check-equal actual expected)
  (unless (equal? actual expected)
    (error "check failed:" actual "is not" expected)))
"#;

fn scripts(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scheme").join(folder);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "scm"));
    files.sort();
    files
}

fn run(path: &Path) -> Result<(), String> {
    let source = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let lines: String = (1..=300).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), lines).map_err(|e| e.to_string())?;
    let mut host = toolhost::Host::new(dir.path()).map_err(|e| e.to_string())?;
    host.eval(CHECK).map_err(|e| e.to_string())?;
    host.eval(&source).map(|_| ()).map_err(|e| e.to_string())
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for path in scripts("success") {
        let name = format!("success/{}", path.file_stem().unwrap_or_default().to_string_lossy());
        trials.push(Trial::test(name, move || run(&path).map_err(Failed::from)));
    }
    for path in scripts("failure") {
        let name = format!("failure/{}", path.file_stem().unwrap_or_default().to_string_lossy());
        trials.push(Trial::test(name, move || {
            let source = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            let expected = source
                .lines()
                .next()
                .and_then(|l| l.strip_prefix(";; error: "))
                .ok_or("the first line must be `;; error: TEXT`")?
                .to_string();
            match run(&path) {
                Ok(()) => Err(format!("the script succeeded; expected an error containing {expected:?}").into()),
                Err(message) if message.contains(&expected) => Ok(()),
                Err(message) => Err(format!("expected an error containing {expected:?}, got: {message}").into()),
            }
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}
