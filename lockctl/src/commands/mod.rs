//! One module per command.

pub mod leader;
pub mod list;
pub mod release;
pub mod schema;
pub mod show;
pub mod watch;

/// The width lockctl's output for people keeps to.
pub const WIDTH: usize = 80;

/// Prints `err` and its causes to stderr, one per line.
pub fn report(err: &dyn std::error::Error) {
    eprintln!("error: {err}");
    let mut source = err.source();
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
}

/// Prints `document` as one line of JSON.
pub fn print_json(document: &impl serde::Serialize) {
    // Serializing plain structs of strings and numbers cannot fail.
    let text = serde_json::to_string(document).unwrap_or_default();
    println!("{text}");
}
