//! The catalog: information_schema's tables and the SHOW statements that read them. May
//! import `parse`, `table`, `accounts`, `expr` and `objects`; nothing of `exec`.

pub(crate) mod information_schema;
pub(crate) mod show;
pub(crate) mod show_catalog;
