//! `ringrep-source backup --from mysql://...`: an online backup of a serving node, read through
//! its replication stream as a new replica would be provisioned: a snapshot of the whole state
//! (taken while the node goes on taking writes), then the transactions after it until the
//! stream has nothing more, applied over it. The result is the node's state exactly at that
//! sequence number, written as a backup (`restore` makes a data directory of it;
//! `ringrep-applier seed` makes a replica of it that resumes the stream after it).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ringrep_applier::{EventSource, NetworkConfig, NetworkSource};
use ringrep_engine::Engine;

/// The server id the backup registers with (SHOW REPLICAS lists it while it reads).
const BACKUP_ID: u32 = u32::MAX;

/// How long the stream may bring nothing while the backup waits for the transactions its
/// snapshot's rows may come from.
const STALL: Duration = Duration::from_secs(30);

/// Reads the node at `url` and writes its backup into `to`; returns the sequence number the
/// backup stands at.
pub(crate) fn online(url: &str, ca: Option<&Path>, to: &Path) -> anyhow::Result<u64> {
    if to.join("snapshots").exists() || to.join("binlog").exists() {
        bail!(
            "{} holds a data directory; back up into a new directory",
            to.display()
        );
    }
    let config = NetworkConfig::from_url(
        url,
        BACKUP_ID,
        Duration::from_millis(500),
        Duration::from_secs(5),
        ca,
    )
    .map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let started = Instant::now();
        let mut source = NetworkSource::new(config, 1).with_snapshot();
        let status = source.status();
        // The snapshot first: nothing else comes before it.
        let deadline = Instant::now() + Duration::from_secs(60);
        let provision = loop {
            if let Some(t) = source.next(Duration::from_millis(200)).await? {
                bail!("the node sent transaction {} before its snapshot", t.tx.seq);
            }
            if let Some(p) = source.take_provision() {
                break p;
            }
            // A refusal that retrying cannot mend (no REPLICATION SLAVE, a wrong password)
            // ends the backup at once.
            let refused = status.lock().ok().and_then(|s| s.last_error.clone()).filter(|e| {
                e.contains("ERROR 1227") || e.contains("ERROR 1045") || e.contains("ERROR 3118")
            });
            if let Some(e) = refused {
                bail!("the node refused the backup: {e}");
            }
            if Instant::now() > deadline {
                let why = status
                    .lock()
                    .ok()
                    .and_then(|s| s.last_error.clone())
                    .unwrap_or_else(|| "no answer".into());
                bail!("no snapshot from the node within 60 s: {why}");
            }
        };
        let server_id = provision.server_id;
        let covered = provision.covered;
        let mut state = Engine::decode_snapshot(&provision.snapshot)
            .context("the snapshot the node sent")?;
        // A backup of a replica leaves out its own apply status: restored, it is a primary.
        state
            .tables
            .retain(|_, t| !ringrep_engine::is_node_local_table(&t.def.database, &t.def.name));
        eprintln!(
            "snapshot of server {server_id} at seq {} received ({} MiB); applying up to seq {covered}",
            provision.seq,
            provision.snapshot.len() >> 20
        );
        drop(provision);
        // The snapshot's rows may come from transactions up to `covered`; those transactions,
        // applied over it, make it the state at `covered` exactly (as recovery does). The
        // backup stops there, however busy the node is.
        let mut applied = 0u64;
        while state.last_seq < covered {
            let Some(t) = source.next(STALL).await? else {
                bail!(
                    "the node sent nothing for {} s at seq {} (up to {covered} needed)",
                    STALL.as_secs(),
                    state.last_seq
                );
            };
            if t.tx.seq <= state.last_seq {
                continue;
            }
            if t.tx.seq != state.last_seq + 1 {
                bail!(
                    "the stream skipped from seq {} to {}",
                    state.last_seq,
                    t.tx.seq
                );
            }
            state.apply_transaction(&t.tx)?;
            applied += 1;
        }
        let seq = Engine::write_backup(&state, server_id, to)?;
        eprintln!(
            "online backup: {} tables at seq {seq} ({applied} transactions after the snapshot) in {:.1?}",
            state.tables.len(),
            started.elapsed()
        );
        Ok(seq)
    })
}
