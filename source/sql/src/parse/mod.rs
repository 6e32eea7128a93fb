//! Statement text, the bottom floor: splitting scripts, placeholders, the lexical helpers
//! (`lexer`) and the parsing of one statement. It imports nothing of this crate.

pub(crate) mod lexer;
pub(crate) mod prepared;
pub(crate) mod show;
pub(crate) mod statement;
pub(crate) mod tree;
