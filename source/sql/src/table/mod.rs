//! The shapes of tables and rows: which names reach which row slots (`columns`) and a
//! query's rows before rendering (`rows`). A bottom floor: it imports nothing of this crate.

pub(crate) mod columns;
pub(crate) mod computed;
pub(crate) mod rows;
