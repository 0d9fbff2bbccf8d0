//! The `deckhand` client commands. `validate` works offline; the commands that talk to the
//! local API live beside it.

pub mod validate;
