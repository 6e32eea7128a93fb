//! A serving node's state at one sequence number, read through its replication stream as a new
//! replica is provisioned: a snapshot of the whole state (taken while the node goes on taking
//! writes), then the transactions after it, applied over it in memory. Nothing on the node
//! waits for it. An online backup (`ringrep-source backup --from`) writes it out; a live
//! verification (`ringrep-applier verify --live`) takes one of each side and moves the
//! primary's forward to exactly the point the replica's stands at.

use std::time::{Duration, Instant};

use ringrep_engine::{Engine, State};

use crate::{Error, EventSource, NetworkConfig, NetworkSource, Result};

/// How long the stream may bring nothing while a transaction that is needed is awaited.
const STALL: Duration = Duration::from_secs(30);

/// How long the node has to send its snapshot.
const SNAPSHOT_WITHIN: Duration = Duration::from_secs(60);

/// A node's state at [`PointInTime::seq`], with the stream it came from still open, so that it
/// can be moved forward ([`PointInTime::advance_to`]).
#[derive(Debug)]
pub struct PointInTime {
    /// The state: every table, meta rows included, as the node had it at `seq`.
    pub state: State,
    /// The server id whose binlog `seq` counts (the node's own).
    pub server_id: u32,
    source: NetworkSource,
}

impl PointInTime {
    /// The stream settings of a point-in-time read of the node at `url`
    /// (`mysql://USER:PASSWORD@HOST[:PORT]`), registering as `server_id` (SHOW REPLICAS lists
    /// it while it reads) and trusting the CA file `ca` for TLS when given: heartbeats every
    /// 500 ms, reconnects at most 5 s apart.
    pub fn config(
        url: &str,
        server_id: u32,
        ca: Option<&std::path::Path>,
    ) -> std::result::Result<NetworkConfig, String> {
        NetworkConfig::from_url(
            url,
            server_id,
            Duration::from_millis(500),
            Duration::from_secs(5),
            ca,
        )
    }

    /// Reads the node `config` names: its snapshot, then the transactions its rows may come
    /// from, up to the first point the state is exact at. An account the node refuses (a
    /// wrong password, no REPLICATION SLAVE) ends it at once, naming the error.
    pub async fn read(config: NetworkConfig) -> Result<PointInTime> {
        let address = config.address.clone();
        let mut source = NetworkSource::new(config, 1)
            .with_snapshot()
            .giving_up_after(Some(10));
        // The snapshot first: nothing else comes before it.
        let deadline = Instant::now() + SNAPSHOT_WITHIN;
        let provision = loop {
            if let Some(t) = source.next(Duration::from_millis(200)).await? {
                return Err(Error::Invalid(format!(
                    "{address} sent transaction {} before its snapshot",
                    t.tx.seq
                )));
            }
            if let Some(p) = source.take_provision() {
                break p;
            }
            if Instant::now() > deadline {
                let why = source
                    .status()
                    .lock()
                    .ok()
                    .and_then(|s| s.last_error.clone())
                    .unwrap_or_else(|| "no answer".into());
                return Err(Error::Source(format!(
                    "no snapshot from {address} within {} s: {why}",
                    SNAPSHOT_WITHIN.as_secs()
                )));
            }
        };
        let server_id = provision.server_id;
        // Decoded as it arrives, on a thread that may block for the next piece while this
        // runtime (of one thread, it may be) goes on receiving.
        let mut stream = provision.snapshot;
        let (state, stream) = tokio::task::spawn_blocking(move || {
            let state = Engine::decode_snapshot(&mut stream);
            (state, stream)
        })
        .await
        .map_err(|e| Error::Source(format!("decoding the snapshot: {e}")))?;
        let state = state.map_err(|e| match stream.failure() {
            Some(why) => Error::Source(format!(
                "the snapshot from {address} stopped after {} bytes: {why}",
                stream.received()
            )),
            None => Error::from(e),
        })?;
        let Some((seq, covered)) = stream.end() else {
            return Err(Error::Invalid(format!(
                "the snapshot from {address} read back before its end"
            )));
        };
        tracing::info!(
            "snapshot of server {server_id} at seq {seq} received ({} MiB); applying up to seq {covered}",
            stream.received() >> 20,
        );
        let mut point = PointInTime {
            state,
            server_id,
            source,
        };
        // The snapshot's rows may come from transactions up to `covered`; those, applied over
        // it, make it the state at `covered` exactly (as recovery does).
        point.advance_to(covered).await?;
        Ok(point)
    }

    /// The sequence number the state stands at.
    pub fn seq(&self) -> u64 {
        self.state.last_seq
    }

    /// Applies the node's transactions after [`PointInTime::seq`] up to `seq` exactly (however
    /// busy the node is, it stops there). Returns how many it applied.
    pub async fn advance_to(&mut self, seq: u64) -> Result<u64> {
        let mut applied = 0u64;
        while self.state.last_seq < seq {
            let Some(t) = self.source.next(STALL).await? else {
                return Err(Error::Source(format!(
                    "the node sent nothing for {} s at seq {} (up to {seq} needed)",
                    STALL.as_secs(),
                    self.state.last_seq
                )));
            };
            if t.tx.seq <= self.state.last_seq {
                continue;
            }
            if t.tx.seq != self.state.last_seq + 1 {
                return Err(Error::Gap {
                    server_id: self.server_id,
                    missing: self.state.last_seq + 1,
                    found: t.tx.seq,
                    position: t.position,
                });
            }
            self.state.apply_transaction(&t.tx)?;
            applied += 1;
        }
        Ok(applied)
    }
}
