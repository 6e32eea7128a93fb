//! Stored objects: views, triggers, stored routines, the table engines and foreign keys: their
//! definitions and storage (system tables), a view's reading and a routine's CALL. A trigger's
//! firing is `exec::fire`'s. May import `parse`, `table`, `accounts` and `expr`; nothing
//! above (`catalog`, `exec`, `session`).

pub(crate) mod engines;
pub(crate) mod foreign_keys;
pub(crate) mod routines;
pub(crate) mod triggers;
pub(crate) mod views;
