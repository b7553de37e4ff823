//! Where lockctl's words go: its answers to stdout, its errors to stderr,
//! and the width its text for people keeps to.

use std::io::Write;

/// The width lockctl's output for people keeps to.
pub const WIDTH: usize = 80;

/// Writes `text` to stdout. A closed pipe (`lockctl list '*' | head -1`)
/// is not an error: what is left unwritten was not wanted (and `println!`
/// would panic on it). Any other failure (a full disk) ends lockctl with
/// status 1.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    if let Err(err) = written
        && !closed(&err)
    {
        warn(&format!("error: the output could not be written: {err}"));
        std::process::exit(1);
    }
}

/// Whether `err` says that the reader of stdout is gone.
pub fn closed(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::BrokenPipe
}

/// Writes `text` and a newline to stderr, as [`emit`] writes to stdout.
pub fn warn(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// Writes `err` and its causes to stderr, one per line.
pub fn report(err: &dyn std::error::Error) {
    warn(&format!("error: {err}"));
    let mut source = err.source();
    while let Some(cause) = source {
        warn(&format!("  caused by: {cause}"));
        source = cause.source();
    }
}

/// Writes `document` to stdout as one line of JSON.
pub fn emit_json(document: &impl serde::Serialize) {
    // Plain structs of strings and numbers always serialize.
    let text = serde_json::to_string(document).unwrap_or_default();
    emit(&format!("{text}\n"));
}
