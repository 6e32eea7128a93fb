//! `ringrep-applier verify --live`: two nodes compared while the primary takes writes, at one
//! point exactly and without stopping anyone. Each side is read through its replication stream
//! as a point in time ([`PointInTime`]): the primary's first, at seq S; then, once the replica
//! has applied at least S, the replica's, which stands where it had applied from the primary,
//! A >= S; then the primary's copy is moved forward from S to A with the primary's own
//! transactions. Both copies then hold the state at A, whatever was written meanwhile, and are
//! compared like two data directories.

use std::time::{Duration, Instant};

use binlog_format::SyncPolicy;
use mysql_async::prelude::*;
use ringrep_applier::{NetworkConfig, PointInTime, Result};
use ringrep_engine::{Engine, EngineConfig};

use crate::remote::{remote, Side};

/// The server id a live verification registers with on both nodes (SHOW REPLICAS lists it
/// while it reads); the online backup's is the one above it.
const VERIFY_ID: u32 = u32::MAX - 1;

/// How long the replica may go without applying anything while it is awaited.
const REPLICA_STALL: Duration = Duration::from_secs(60);

fn config(url: &str) -> Result<NetworkConfig> {
    PointInTime::config(url, VERIFY_ID, None).map_err(remote)
}

/// Both sides at one sequence number of the primary's, read from the running nodes at
/// `primary` and `replica` (`mysql://` URLs of accounts with REPLICATION SLAVE).
pub(crate) async fn sides(primary: &str, replica: &str) -> Result<(Side, Side)> {
    let (pc, rc) = (config(primary)?, config(replica)?);
    eprintln!("live: reading the primary at one point through its stream");
    let mut p = PointInTime::read(pc).await?;
    let at_least = p.seq();
    eprintln!(
        "live: the primary (server {}) at seq {at_least}; waiting for the replica to apply it",
        p.server_id
    );
    wait_applied(replica, p.server_id, at_least).await?;
    let r = PointInTime::read(rc).await?;
    let (r_engine, r_dir) = scratch_engine(&r.state, r.server_id)?;
    let applied: Vec<(u32, u64)> = ringrep_applier::applier::read_positions(&r_engine)
        .into_iter()
        .map(|pos| (pos.server_id, pos.last_seq))
        .collect();
    let at = applied
        .iter()
        .find(|(id, _)| *id == p.server_id)
        .map(|(_, seq)| *seq)
        .ok_or_else(|| {
            remote(format!(
                "the replica's copy holds no position from server {}: is it a replica of that primary?",
                p.server_id
            ))
        })?;
    if at < at_least {
        return Err(remote(format!(
            "the replica's copy stands at seq {at} of the primary, before the {at_least} it had applied"
        )));
    }
    let moved = p.advance_to(at).await?;
    eprintln!(
        "live: both sides at the primary's seq {at} ({moved} primary transactions applied after its copy)"
    );
    // The primary's copy, as its own node has it: no apply status of its own is compared.
    p.state
        .tables
        .retain(|_, t| !ringrep_engine::is_node_local_table(&t.def.database, &t.def.name));
    let (p_engine, p_dir) = scratch_engine(&p.state, p.server_id)?;
    Ok((
        Side::scratch(p_engine, p.server_id, at, Vec::new(), p_dir),
        Side::scratch(r_engine, r.server_id, r.seq(), applied, r_dir),
    ))
}

/// Waits until the replica at `url` has applied `seq` of server `source_id`, failing when it
/// applies nothing for [`REPLICA_STALL`].
async fn wait_applied(url: &str, source_id: u32, seq: u64) -> Result<()> {
    let (mut conn, shown) = crate::remote::connect(url).await?;
    let mut last = None;
    let mut moved_at = Instant::now();
    loop {
        let applied: Option<u64> = conn
            .exec_first(
                "SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = ?",
                (source_id,),
            )
            .await
            .map_err(|e| remote(format!("{shown}: {e}")))?;
        if applied.is_some_and(|a| a >= seq) {
            conn.disconnect().await.ok();
            return Ok(());
        }
        if applied != last {
            last = applied;
            moved_at = Instant::now();
        } else if moved_at.elapsed() > REPLICA_STALL {
            return Err(remote(format!(
                "{shown} applied nothing for {} s at seq {} of server {source_id} (seq {seq} awaited)",
                REPLICA_STALL.as_secs(),
                applied.unwrap_or(0)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An engine in a scratch directory holding `state` (written as a backup, then restored).
fn scratch_engine(
    state: &ringrep_engine::State,
    server_id: u32,
) -> Result<(Engine, tempfile::TempDir)> {
    let dir = tempfile::tempdir().map_err(|e| remote(format!("scratch directory: {e}")))?;
    let backup = dir.path().join("backup");
    let data = dir.path().join("data");
    Engine::write_backup(state, server_id, &backup)?;
    Engine::restore(&backup, &data)?;
    std::fs::remove_dir_all(&backup).map_err(|e| remote(format!("scratch directory: {e}")))?;
    let mut cfg = EngineConfig::new(server_id);
    cfg.sync = SyncPolicy::Never;
    let (engine, _) = Engine::open(&data, cfg)?;
    Ok((engine, dir))
}
