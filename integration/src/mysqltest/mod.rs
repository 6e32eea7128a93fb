//! mysqltest for ringrep: the `.test` language run against ringrep nodes ([`runner`], parsed
//! by [`script`]), and `.result` transcripts ([`transcript`]): replayed on their own, or
//! compared with what a script printed, statement by statement, with the statements where
//! the spec overrides a recording listed as deviations.
//!
//! What the runner gives scripts besides the language: mtr's variables (`vars` replaces
//! them), MySQL 8's error names ([`error_names`]), and the NDB tools RonDB's backup tests run
//! (`ndb_tools`: START BACKUP and ndb_restore on ringrep's backup and restore, node restarts
//! as a close and reopen of the node), `--replace_regex` (`replace_regex`). The standard
//! includes are files, ringrep's own text, in integration/conformance/include.

pub mod error_names;
mod ndb_tools;
mod render;
mod replace_regex;
pub mod runner;
pub mod script;
pub mod transcript;
mod vars;

pub use runner::{run_script, Problem, RunEnv, RunOutput, Topology};
pub use transcript::{
    compare_run, load_deviations, record, run_file, Deviation, Mismatch, RunReport,
};
