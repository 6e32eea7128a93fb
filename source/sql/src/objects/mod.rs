//! Stored objects: views, triggers, stored routines and the table engines, with their
//! definitions, storage (system tables) and running. May import `parse`, `table`,
//! `accounts` and `expr`; nothing above (`catalog`, `exec`).

pub(crate) mod engines;
pub(crate) mod routines;
pub(crate) mod triggers;
pub(crate) mod views;
