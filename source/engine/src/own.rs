//! What of a node's data is its own: the transactions it committed itself, as opposed to
//! those it applied from another server (which carry an origin) and its own bookkeeping.
//!
//! A node that was a primary and comes back as a replica (the old primary after a failover)
//! holds commits of its own; its new source has them only if they were streamed before the
//! failover. The source judges that from the last one (see `ringrep-server`'s stream).

use binlog_format::{BinlogReader, DdlEvent, Event, ReaderOptions, Record, Transaction};

use crate::{is_node_local_event, Engine, Result, SYSTEM_DB};

/// Whether a transaction this node committed holds only its own bookkeeping (its apply
/// status, the `mysql` database that holds it): nothing another node takes or lacks.
pub fn is_bookkeeping(t: &Transaction) -> bool {
    t.origin.is_none()
        && t.events.iter().all(|e| {
            is_node_local_event(e)
                || matches!(e, Event::Ddl(DdlEvent::CreateDatabase { name }) if name.eq_ignore_ascii_case(SYSTEM_DB))
        })
}

impl Engine {
    /// The sequence number of the last transaction this node committed itself (not applied
    /// from another server, not bookkeeping) that its binlog still holds; `None` when there is
    /// none. Reads the binlog from its first segment: for a node about to replicate from a
    /// source it has no position from, once per link.
    pub fn last_own_commit(&self) -> Result<Option<u64>> {
        let reader = BinlogReader::open(&self.binlog_dir(), ReaderOptions::default())?;
        let mut last = None;
        for item in reader {
            if let (_, Record::Transaction(t)) = item? {
                if t.origin.is_none() && !is_bookkeeping(&t) {
                    last = Some(t.seq);
                }
            }
        }
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineConfig;

    #[test]
    fn own_commits_are_found_and_applied_ones_are_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (engine, _) = Engine::open(dir.path(), EngineConfig::new(7)).expect("open");
        // A writable node's first open creates database `test`: its own first commit.
        assert_eq!(engine.last_own_commit().expect("scan"), Some(1));
        let mut s = engine.session();
        s.create_database("app", false).expect("create");
        let own = engine.last_seq();
        // A transaction applied from server 3 is not this node's own.
        s.vars.applier = true;
        s.apply_replicated(
            vec![Event::Ddl(DdlEvent::CreateDatabase {
                name: "other".into(),
            })],
            vec![],
            binlog_format::Origin {
                server_id: 3,
                seq: 40,
            },
        )
        .expect("apply");
        assert!(engine.last_seq() > own);
        assert_eq!(engine.last_own_commit().expect("scan"), Some(own));
    }
}
