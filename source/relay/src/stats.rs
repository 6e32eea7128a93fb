//! What a relay has done and is doing, shared with whoever shows it: the node's log line once
//! a second, its Prometheus metrics and SHOW STATUS.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringrep_kafka::Result;

/// Where a relay is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RelayState {
    /// Not started yet.
    Idle = 0,
    /// Creating topics and reading where the last run left them.
    Starting = 1,
    /// Relaying.
    Running = 2,
    /// A run failed with an error a retry can mend; waiting to start again.
    Retrying = 3,
    /// Stopped when told to.
    Stopped = 4,
    /// Stopped by an error no retry can mend.
    Failed = 5,
}

impl RelayState {
    /// The state's name, as SHOW STATUS and the metrics' label write it.
    pub fn name(self) -> &'static str {
        match self {
            RelayState::Idle => "idle",
            RelayState::Starting => "starting",
            RelayState::Running => "running",
            RelayState::Retrying => "retrying",
            RelayState::Stopped => "stopped",
            RelayState::Failed => "failed",
        }
    }

    fn from_u8(v: u8) -> RelayState {
        match v {
            1 => RelayState::Starting,
            2 => RelayState::Running,
            3 => RelayState::Retrying,
            4 => RelayState::Stopped,
            5 => RelayState::Failed,
            _ => RelayState::Idle,
        }
    }
}

/// What a relay has done so far (shared with whoever shows progress).
#[derive(Debug, Default)]
pub struct RelayStats {
    /// The last sequence number whose records, on every topic, the broker acknowledged.
    pub acked_seq: AtomicU64,
    /// Where a run that starts now resumes the change topics from, less one: the
    /// `ringrep.acked_seq` of the last replication record produced (the binlog after it must
    /// be kept, which `acked_seq` alone would not say).
    pub checkpoint: AtomicU64,
    /// The commit time (µs since the epoch) of the transaction `acked_seq` names.
    pub acked_commit_us: AtomicI64,
    /// The last sequence number read from the binlog.
    pub read_seq: AtomicU64,
    /// Transactions (replication records) produced since the relay was made.
    pub transactions: AtomicU64,
    /// Change records produced since the relay was made (tombstones included).
    pub change_records: AtomicU64,
    /// Records not produced again after a restart because their partition held them.
    pub skipped: AtomicU64,
    /// Heartbeat records produced.
    pub heartbeats: AtomicU64,
    /// Records produced and not yet acknowledged.
    pub in_flight: AtomicU64,
    /// Kafka transactions committed (with `--kafka-transactions`; 0 without).
    pub kafka_commits: AtomicU64,
    /// Runs that ended in an error.
    pub errors: AtomicU64,
    /// Rows sent by incremental snapshots (acknowledged chunks).
    pub incremental_rows: AtomicU64,
    /// Tables waiting for their incremental snapshot, the one being sent included.
    pub incremental_tables: AtomicU64,
    /// The table an incremental snapshot is sending (`database.table`), "" when none.
    pub incremental_table: Mutex<String>,
    state: AtomicU8,
    last_error: Mutex<String>,
    rates: Mutex<Rates>,
}

/// Records and transactions per second over the last second sampled.
#[derive(Debug, Default)]
struct Rates {
    at: Option<Instant>,
    transactions: u64,
    records: u64,
    transactions_per_s: f64,
    records_per_s: f64,
}

impl RelayStats {
    /// The relay's state now.
    pub fn state(&self) -> RelayState {
        RelayState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub(crate) fn set_state(&self, s: RelayState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    /// Records how a run ended: stopped, or failed with its error.
    pub(crate) fn finished(&self, r: &Result<u64>) {
        match r {
            Ok(_) => self.set_state(RelayState::Stopped),
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut last) = self.last_error.lock() {
                    *last = e.to_string();
                }
                self.set_state(RelayState::Failed);
            }
        }
    }

    /// The error that ended the last failed run ("" when none did).
    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default()
    }

    /// Samples the counters for the rates (call about once a second); returns
    /// (transactions/s, records/s).
    pub fn sample(&self) -> (f64, f64) {
        let now = Instant::now();
        let tx = self.transactions.load(Ordering::Relaxed);
        let rec = self.change_records.load(Ordering::Relaxed);
        let Ok(mut r) = self.rates.lock() else {
            return (0.0, 0.0);
        };
        if let Some(at) = r.at {
            let secs = now.duration_since(at).as_secs_f64();
            if secs > 0.0 {
                r.transactions_per_s = (tx - r.transactions) as f64 / secs;
                r.records_per_s = (rec - r.records) as f64 / secs;
            }
        }
        (r.at, r.transactions, r.records) = (Some(now), tx, rec);
        (r.transactions_per_s, r.records_per_s)
    }

    /// The relay's figures by name, for SHOW STATUS (`Ringrep_relay_<name>`) and the metrics
    /// (`ringrep_relay_<name>`): `node_seq` is the node's last committed sequence number and
    /// `now_us` the time now, for the lag.
    pub fn fields(&self, node_seq: u64, now_us: i64) -> Vec<(&'static str, String)> {
        let acked = self.acked_seq.load(Ordering::Acquire);
        let commit = self.acked_commit_us.load(Ordering::Relaxed);
        // Caught up, the lag is nothing however old the last commit is.
        let lag_ms = if acked >= node_seq || commit == 0 {
            0
        } else {
            (now_us - commit).max(0) / 1000
        };
        let (tps, rps) = self
            .rates
            .lock()
            .map(|r| (r.transactions_per_s, r.records_per_s))
            .unwrap_or_default();
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        vec![
            ("state", self.state().name().to_string()),
            ("acked_seq", acked.to_string()),
            ("read_seq", n(&self.read_seq)),
            ("lag_seq", node_seq.saturating_sub(acked).to_string()),
            ("lag_ms", lag_ms.to_string()),
            ("transactions", n(&self.transactions)),
            ("change_records", n(&self.change_records)),
            ("transactions_per_second", format!("{tps:.1}")),
            ("records_per_second", format!("{rps:.1}")),
            ("records_skipped", n(&self.skipped)),
            ("heartbeats", n(&self.heartbeats)),
            ("in_flight", n(&self.in_flight)),
            ("kafka_transactions_committed", n(&self.kafka_commits)),
            ("errors", n(&self.errors)),
            (
                "incremental_snapshot_table",
                self.incremental_table
                    .lock()
                    .map(|t| t.clone())
                    .unwrap_or_default(),
            ),
            ("incremental_snapshot_tables", n(&self.incremental_tables)),
            ("incremental_snapshot_rows", n(&self.incremental_rows)),
            ("last_error", self.last_error()),
        ]
    }

    /// Logs a line a second while transactions move, sampling the rates, until `stop`.
    pub async fn log_every_second(
        self: std::sync::Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut last = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let (tps, _) = self.sample();
            let n = self.transactions.load(Ordering::Relaxed);
            if n != last {
                tracing::info!(
                    "relay: acknowledged up to seq {}, {} transactions and {} change records produced ({tps:.0}/s)",
                    self.acked_seq.load(Ordering::Relaxed),
                    n,
                    self.change_records.load(Ordering::Relaxed),
                );
                last = n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_shows_its_error_and_state() {
        let s = RelayStats::default();
        assert_eq!(s.state(), RelayState::Idle);
        s.finished(&Err(ringrep_kafka::kafka_error("delivery", "broker away")));
        assert_eq!(s.state(), RelayState::Failed);
        assert_eq!(s.errors.load(Ordering::Relaxed), 1);
        let fields = s.fields(10, 0);
        let get = |k: &str| fields.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("state").as_deref(), Some("failed"));
        assert_eq!(get("lag_seq").as_deref(), Some("10"));
        assert!(get("last_error").expect("field").contains("broker away"));
    }

    #[test]
    fn lag_is_nothing_when_caught_up() {
        let s = RelayStats::default();
        s.acked_seq.store(5, Ordering::Relaxed);
        s.acked_commit_us.store(1_000_000, Ordering::Relaxed);
        let lag = |node_seq| {
            s.fields(node_seq, 3_000_000)
                .into_iter()
                .find(|(n, _)| *n == "lag_ms")
                .map(|(_, v)| v)
        };
        assert_eq!(lag(5).as_deref(), Some("0"));
        assert_eq!(lag(7).as_deref(), Some("2000"));
    }
}
