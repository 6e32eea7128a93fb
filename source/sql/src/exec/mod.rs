//! Statement execution: SELECT (with `join` and `cte`), INSERT, UPDATE, DELETE and LOAD DATA
//! (`dml`, `insert_plan`, `conflict`) with the triggers they fire (`fire`) and the foreign
//! keys they check and carry out (`foreign_keys`), DDL, prepared statements (`bound`), SET
//! (`vars`), account statements and privilege checks (`accounts`, `authorize`), locks and
//! binary logs. May import every floor below it (`catalog`, `objects`, `expr`, `accounts`,
//! `table`, `parse`), never `session`.

pub(crate) mod accounts;
pub(crate) mod authorize;
pub(crate) mod binary_logs;
pub(crate) mod bound;
pub(crate) mod checksum;
pub(crate) mod conflict;
pub(crate) mod cte;
pub(crate) mod ddl;
pub(crate) mod dml;
pub(crate) mod fire;
pub(crate) mod foreign_keys;
pub(crate) mod insert_plan;
pub(crate) mod join;
pub(crate) mod select;
pub(crate) mod table_lock;
pub(crate) mod user_locks;
pub(crate) mod vars;
