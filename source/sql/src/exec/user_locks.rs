//! GET_LOCK, RELEASE_LOCK, RELEASE_ALL_LOCKS, IS_FREE_LOCK and IS_USED_LOCK over the engine's
//! user-level locks (`ringrep_engine::named_locks`), held by the session until it releases
//! them or ends.

use std::time::Duration;

use binlog_format::Value;
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::named_locks::Wait;
use ringrep_engine::types::text_of;

use crate::expr::to_f64;
use crate::SqlSession;

impl SqlSession {
    /// Whether a statement may wait here (not on the server's brief path, where a wait would
    /// stall the connection task's other connections).
    pub(crate) fn may_wait(&self) -> bool {
        self.session.lock_wait
    }

    /// The value of the user-lock function `name` (upper case) over `args`.
    pub(crate) fn user_lock_function(&self, name: &str, args: &[Value]) -> Result<Value> {
        // Not on the brief path: a wait would stall the connection task's other connections,
        // and a statement run again there would take or give back a lock twice.
        if !self.may_wait() {
            return Err(Error::would_wait());
        }
        if name != "IS_FREE_LOCK" && name != "IS_USED_LOCK" {
            self.took_user_lock
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let locks = self.engine().named_locks();
        let wanted = match name {
            "RELEASE_ALL_LOCKS" => 0,
            "GET_LOCK" => 2,
            _ => 1,
        };
        crate::expr::arity(name, args.len(), wanted, wanted)?;
        let lock_name = || match args.first() {
            None | Some(Value::Null) => Err(Error::new(
                code::ER_USER_LOCK_WRONG_NAME,
                "Incorrect user-level lock name 'NULL'.",
            )),
            Some(v) => Ok(text_of(v)),
        };
        Ok(match name {
            "GET_LOCK" => {
                let timeout = to_f64(&args[1]).unwrap_or(0.0);
                let wait = if timeout < 0.0 {
                    Wait::Forever
                } else {
                    Wait::Up(Duration::from_secs_f64(timeout.min(31_536_000.0)))
                };
                let got = locks.get(&lock_name()?, self.lock_owner, self.connection_id, wait)?;
                Value::Int(i64::from(got))
            }
            "RELEASE_LOCK" => match locks.release(&lock_name()?, self.lock_owner)? {
                Some(released) => Value::Int(i64::from(released)),
                None => Value::Null,
            },
            "RELEASE_ALL_LOCKS" => Value::Int(locks.release_all(self.lock_owner) as i64),
            "IS_FREE_LOCK" => Value::Int(i64::from(locks.holder(&lock_name()?)?.is_none())),
            _ => match locks.holder(&lock_name()?)? {
                Some(connection) => Value::UInt(connection),
                None => Value::Null,
            },
        })
    }
}
