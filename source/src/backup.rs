//! `ringrep-source backup --from mysql://...`: an online backup of a serving node, read through
//! its replication stream as a new replica would be provisioned
//! ([`ringrep_applier::PointInTime`]: a snapshot taken while the node goes on taking writes,
//! then the transactions after it applied over it). The result is the node's state exactly at
//! that sequence number, written as a backup (`restore` makes a data directory of it;
//! `ringrep-applier seed` makes a replica of it that resumes the stream after it).

use std::path::Path;
use std::time::Instant;

use anyhow::bail;
use ringrep_applier::PointInTime;
use ringrep_engine::Engine;

/// The server id the backup registers with (SHOW REPLICAS lists it while it reads).
const BACKUP_ID: u32 = u32::MAX;

/// Reads the node at `url` and writes its backup into `to`; returns the sequence number the
/// backup stands at.
pub(crate) fn online(url: &str, ca: Option<&Path>, to: &Path) -> anyhow::Result<u64> {
    if to.join("snapshots").exists() || to.join("binlog").exists() {
        bail!(
            "{} holds a data directory; back up into a new directory",
            to.display()
        );
    }
    let config = PointInTime::config(url, BACKUP_ID, ca).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let started = Instant::now();
        let mut point = match PointInTime::read(config).await {
            Ok(p) => p,
            // A refusal that retrying cannot mend (no REPLICATION SLAVE, a wrong password).
            Err(ringrep_applier::Error::Refused(e)) => bail!("the node refused the backup: {e}"),
            Err(e) => return Err(e.into()),
        };
        // A backup of a replica leaves out its own apply status: restored, it is a primary.
        point
            .state
            .tables
            .retain(|_, t| !ringrep_engine::is_node_local_table(&t.def.database, &t.def.name));
        let seq = Engine::write_backup(&point.state, point.server_id, to)?;
        eprintln!(
            "online backup: {} tables at seq {seq} in {:.1?}",
            point.state.tables.len(),
            started.elapsed()
        );
        Ok(seq)
    })
}
