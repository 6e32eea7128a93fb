//! The node's connections as SHOW PROCESSLIST lists them, and KILL.
//!
//! Each logged-in connection has an entry: its account, client address, current database,
//! what it is doing (`Sleep`, `Query`, `Binlog Dump`) since when, and the statement it runs.
//! `KILL [CONNECTION] id` ends a connection: at once while it waits for its client's next
//! command, or as soon as the statement it runs has finished; its open transaction is rolled
//! back as for any closed connection. `KILL QUERY id` of a connection that runs nothing does
//! nothing, as in MySQL; of one that runs a statement it is refused (1235), since ringrep
//! cannot interrupt a statement (a row-lock wait ends by itself after `innodb_lock_wait_timeout`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ringrep_engine::error::{code, Error};

/// What a connection is doing, as SHOW PROCESSLIST's Command column says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Doing {
    Sleep,
    Query,
    BinlogDump,
}

impl Doing {
    fn name(self) -> &'static str {
        match self {
            Doing::Sleep => "Sleep",
            Doing::Query => "Query",
            Doing::BinlogDump => "Binlog Dump",
        }
    }
}

/// One connection's entry.
#[derive(Debug)]
struct Process {
    user: String,
    host: String,
    db: Option<String>,
    doing: Doing,
    since: Instant,
    /// The last statement; shown only while it runs (MySQL shows NULL for an idle
    /// connection), kept after it so that running the same text again copies nothing.
    info: Option<String>,
    kill: Arc<Kill>,
}

/// A connection's kill switch: set, then the connection is woken.
#[derive(Debug, Default)]
pub(crate) struct Kill {
    killed: AtomicBool,
    wake: tokio::sync::Notify,
}

impl Kill {
    /// Whether the connection was killed.
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Completes once the connection is killed.
    pub(crate) async fn killed(&self) {
        loop {
            let woken = self.wake.notified();
            if self.is_killed() {
                return;
            }
            woken.await;
        }
    }

    fn fire(&self) {
        self.killed.store(true, Ordering::Release);
        self.wake.notify_waiters();
    }
}

/// Completes when `kill` fires; never without one.
pub(crate) async fn killed(kill: Option<&Kill>) {
    match kill {
        Some(k) => k.killed().await,
        None => std::future::pending().await,
    }
}

/// Every logged-in connection of the node.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    by_id: Mutex<BTreeMap<u32, Process>>,
}

/// A row of SHOW PROCESSLIST: Id, User, Host, db, Command, Time, State, Info.
pub(crate) type Row = Vec<Option<String>>;

impl Processes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Process>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters a connection that has logged in; returns its kill switch.
    pub(crate) fn enter(&self, id: u32, user: &str, host: &str, db: Option<String>) -> Arc<Kill> {
        let kill = Arc::new(Kill::default());
        self.lock().insert(
            id,
            Process {
                user: user.to_string(),
                host: host.to_string(),
                db,
                doing: Doing::Sleep,
                since: Instant::now(),
                info: None,
                kill: Arc::clone(&kill),
            },
        );
        kill
    }

    /// Removes a connection that closed.
    pub(crate) fn leave(&self, id: u32) {
        self.lock().remove(&id);
    }

    /// Records what a connection does now (`info`: the statement) and its database.
    pub(crate) fn doing(&self, id: u32, doing: Doing, info: Option<&str>, db: Option<&str>) {
        if let Some(p) = self.lock().get_mut(&id) {
            p.doing = doing;
            p.since = Instant::now();
            // Copied only when it changed: most commands keep the database, and most
            // connections run the same few statements again and again.
            if let Some(text) = info {
                if p.info.as_deref() != Some(text) {
                    p.info = Some(text.to_string());
                }
            }
            if p.db.as_deref() != db {
                p.db = db.map(str::to_string);
            }
        }
    }

    /// SHOW [FULL] PROCESSLIST: every connection (with `all`), or those of `user` only. Info is
    /// cut at 100 characters without `full`, as MySQL cuts it.
    pub(crate) fn rows(&self, full: bool, all: bool, user: &str) -> Vec<Row> {
        self.lock()
            .iter()
            .filter(|(_, p)| all || p.user == user)
            .map(|(id, p)| {
                let running = p.doing == Doing::Query;
                let info = p.info.as_ref().filter(|_| running).map(|i| {
                    if full {
                        i.clone()
                    } else {
                        i.chars().take(100).collect()
                    }
                });
                let state = match p.doing {
                    Doing::Sleep => "",
                    Doing::Query => "executing",
                    Doing::BinlogDump => {
                        "Source has sent all binlog to replica; waiting for more updates"
                    }
                };
                vec![
                    Some(id.to_string()),
                    Some(p.user.clone()),
                    Some(p.host.clone()),
                    p.db.clone(),
                    Some(p.doing.name().to_string()),
                    Some(p.since.elapsed().as_secs().to_string()),
                    Some(state.to_string()),
                    info,
                ]
            })
            .collect()
    }

    /// KILL [CONNECTION | QUERY] `id` by `user` (who may kill any connection with `any`).
    pub(crate) fn kill(
        &self,
        id: u32,
        query_only: bool,
        user: &str,
        any: bool,
    ) -> Result<(), Error> {
        let by_id = self.lock();
        let Some(p) = by_id.get(&id) else {
            return Err(unknown_thread(id));
        };
        if !any && p.user != user {
            return Err(Error::new(
                code::ER_KILL_DENIED_ERROR,
                format!("You are not owner of thread {id}"),
            ));
        }
        if query_only {
            return match p.doing {
                Doing::Query => Err(Error::unsupported(
                    "KILL QUERY of a running statement (ringrep cannot interrupt one; KILL CONNECTION ends the connection once the statement has finished)",
                )),
                Doing::Sleep | Doing::BinlogDump => Ok(()),
            };
        }
        p.kill.fire();
        Ok(())
    }
}

fn unknown_thread(id: u32) -> Error {
    Error::new(code::ER_NO_SUCH_THREAD, format!("Unknown thread id: {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_is_the_running_statement_and_null_when_idle() {
        let p = Processes::default();
        let _a = p.enter(1, "app", "127.0.0.1:5000", None);
        let info = |p: &Processes| p.rows(true, true, "app")[0][7].clone();
        p.doing(1, Doing::Query, Some("INSERT INTO t VALUES (?)"), None);
        assert_eq!(info(&p).as_deref(), Some("INSERT INTO t VALUES (?)"));
        p.doing(1, Doing::Sleep, None, None);
        assert_eq!(info(&p), None, "an idle connection shows no statement");
        p.doing(1, Doing::Query, Some("INSERT INTO t VALUES (?)"), None);
        assert_eq!(info(&p).as_deref(), Some("INSERT INTO t VALUES (?)"));
        p.doing(1, Doing::Query, Some("SELECT 1"), None);
        assert_eq!(info(&p).as_deref(), Some("SELECT 1"));
        p.doing(1, Doing::BinlogDump, None, None);
        assert_eq!(info(&p), None, "a stream runs no statement");
    }

    #[test]
    fn kill_checks_the_owner_and_fires_the_switch() {
        let p = Processes::default();
        let a = p.enter(1, "app", "127.0.0.1:5000", Some("test".into()));
        let _b = p.enter(2, "root", "127.0.0.1:5001", None);
        assert_eq!(p.rows(false, false, "app").len(), 1);
        assert_eq!(p.rows(false, true, "app").len(), 2);
        assert_eq!(
            p.kill(2, false, "app", false)
                .expect_err("not the owner")
                .code,
            code::ER_KILL_DENIED_ERROR.number
        );
        assert_eq!(
            p.kill(9, false, "root", true).expect_err("no such").code,
            code::ER_NO_SUCH_THREAD.number
        );
        p.doing(1, Doing::Query, Some("SELECT SLEEP(10)"), Some("test"));
        assert!(p.kill(1, true, "app", false).is_err(), "a running query");
        p.doing(1, Doing::Sleep, None, Some("test"));
        p.kill(1, true, "app", false)
            .expect("an idle connection's query");
        assert!(!a.is_killed());
        p.kill(1, false, "app", false).expect("own connection");
        assert!(a.is_killed());
        p.leave(1);
        assert_eq!(p.rows(true, true, "root").len(), 1);
    }
}
