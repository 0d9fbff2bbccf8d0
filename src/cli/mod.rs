//! The `deckhand` command line: argument parsing (from the command table, which also writes
//! the shell completions and the man page), the client commands that talk to the local API
//! (`submit`, `stop`, `ps`, `top`, `inspect`, `events`, `logs`), and offline `validate`.

pub mod args;
pub mod client;
pub mod command_table;
pub mod commands;
pub mod completions;
pub mod terminal;
pub mod top;
pub mod validate;
