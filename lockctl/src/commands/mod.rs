//! One module per command that reaches a store or prints a document.

pub mod leader;
pub mod list;
pub mod release;
pub mod schema;
pub mod show;
pub mod watch;
