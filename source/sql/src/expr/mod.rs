//! Expression evaluation with MySQL's semantics: NULL is unknown, numbers compare as numbers,
//! strings compare by the text collation (`binlog_format::collation`: MySQL's default
//! utf8mb4_0900_ai_ci, without case or accents, trailing spaces counting), a string compared
//! with a number or a time is converted first.

//!
//! The files, from the bottom up: `value` (values alone: conversions, comparison, arithmetic,
//! rendering), `decimal` and `unique`, `context` (what an evaluation sees: the row in scope,
//! the session's state, warnings), `dates` and `strings`, `functions` (the functions of
//! plain argument values), `evaluate` (an expression's value, and function calls whose
//! arguments are expressions), then `predicate`, `rowset`, `result` and `memo`, which use it. Each
//! imports only the files below it; this file only names them for the rest of the crate.

mod context;
mod dates;
pub(crate) mod decimal;
mod evaluate;
mod functions;
pub(crate) mod memo;
pub(crate) mod predicate;
pub(crate) mod result;
pub(crate) mod rowset;
mod strings;
mod unique;
mod value;

pub(crate) use context::*;
pub(crate) use evaluate::*;
pub use functions::server_version;
pub(crate) use value::*;
