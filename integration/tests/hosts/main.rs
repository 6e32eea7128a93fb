//! ringrep across hosts: nodes as containers on a private Docker network, each with its own
//! address, under a write load whose every insert is recorded with its outcome, through
//! faults between hosts; each scenario ends with every replica caught up, the verifier's
//! CONVERGED for each, and the history checker (`integration::history`) passing on every
//! node. docs/testing-hosts.md describes the scenarios.
//!
//! The containers run `ringrep:latest` as `.ci/images` builds it (no registry: nothing is
//! pulled). Without `RINGREP_TEST_IMAGES=1` the target skips, saying why: the images must be
//! built first, and hold the binaries of the tree they were built from. With it, a missing
//! engine or image fails the run; `.ci/run` sets it once `.ci/compose-check` has built them.
//!
//! Its own main (no libtest harness): DOCKER_HOST must be set before any thread starts (the
//! relay in `docker.rs`), and the scenarios run one after another, each with its containers
//! removed at its end whatever happened. `cargo test -p integration --test hosts -- NAME`
//! runs the scenarios whose names contain NAME.

mod cluster;
mod docker;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use integration::history::{self, CheckOptions};

use cluster::{settle_and_check, Broker, Cluster, Load, Node, SeqWatch, PASSWORD, RING_SIZE};

type Scenario = fn(Cluster) -> Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// Every scenario, by name.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("partition_replica", |c| Box::pin(partition_replica(c))),
    ("pause_primary", |c| Box::pin(pause_primary(c))),
    ("kill_replica", |c| Box::pin(kill_replica(c))),
    ("chain", |c| Box::pin(chain(c))),
    ("failover", |c| Box::pin(failover(c))),
    ("old_primary_rejoins", |c| Box::pin(old_primary_rejoins(c))),
    ("replica_overtaken", |c| Box::pin(replica_overtaken(c))),
    ("broker_cut", |c| Box::pin(kafka_cut(c, Cut::Broker))),
    ("relay_cut", |c| Box::pin(kafka_cut(c, Cut::Relay))),
    ("slow_lossy_link", |c| Box::pin(slow_lossy_link(c))),
    ("broker_restart", |c| Box::pin(broker_restart(c))),
];

/// Writers and prefixes per writer of every scenario's load.
const WRITERS: u32 = 4;
const USERS_PER_WRITER: u32 = 6;

fn main() -> ExitCode {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if std::env::args().any(|a| a == "--list") {
        for (name, _) in SCENARIOS {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let selected: Vec<&(&str, Scenario)> = SCENARIOS
        .iter()
        .filter(|(n, _)| filter.as_deref().is_none_or(|f| n.contains(f)))
        .collect();
    if std::env::var("RINGREP_TEST_IMAGES").as_deref() != Ok("1") {
        println!(
            "hosts: skipped {} scenarios: RINGREP_TEST_IMAGES is not 1. They run nodes as \
             containers of ringrep:latest, which .ci/images builds from this tree's release \
             binaries; build it, then RINGREP_TEST_IMAGES=1 cargo test -p integration --test \
             hosts (.ci/run does)",
            selected.len()
        );
        return ExitCode::SUCCESS;
    }
    // Kept until the end: the relay's socket lives in it.
    let scratch = match prepare() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hosts: cannot run: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (mut passed, mut failed) = (0, 0);
    let started = Instant::now();
    for (name, scenario) in selected {
        println!("hosts: {name} ...");
        let t = Instant::now();
        let cluster = Cluster::new(name);
        let network = cluster.name.clone();
        // Spawned, so that a panic ends only the task: its containers are dropped (and so
        // removed) while it unwinds.
        let result = rt.block_on(async move { tokio::spawn(scenario(cluster)).await });
        let secs = t.elapsed().as_secs_f64();
        let left = docker::sweep(&format!("{}={network}", cluster::LABEL), &network);
        if !left.is_empty() {
            println!("hosts: {name}: removed what it left: {}", left.join(", "));
        }
        let outcome = match result {
            Ok(Ok(())) if left.is_empty() => Ok(()),
            Ok(Ok(())) => Err(format!("left behind (removed now): {}", left.join(", "))),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(e) => Err(format!("panicked: {e}")),
        };
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("hosts: {name} ok ({secs:.1} s)");
            }
            Err(e) => {
                failed += 1;
                println!("hosts: {name} FAILED ({secs:.1} s): {e}");
            }
        }
    }
    drop(rt);
    drop(scratch);
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; finished in {:.1} s",
        if failed == 0 { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Checks the engine and the image, and puts the Docker API relay in front of the engine
/// (DOCKER_HOST, read by testcontainers). Runs before any other thread exists.
fn prepare() -> Result<tempfile::TempDir> {
    docker::self_test()?;
    docker::docker(&["info", "--format", "{{.ServerVersion}}"])
        .context("no Docker engine answers (docker info)")?;
    let image = format!("{}:{}", cluster::IMAGE.0, cluster::IMAGE.1);
    if docker::docker(&["image", "inspect", "--format", "{{.Id}}", &image]).is_err() {
        bail!("no image {image}: build it with .ci/images (nothing can be pulled)");
    }
    let engine = docker::engine_socket()?;
    let minor = docker::engine_api_minor(&engine)?;
    let scratch = tempfile::Builder::new().prefix("ringrep-hosts").tempdir()?;
    let socket = scratch.path().join("docker.sock");
    // Before any thread: set_var while another thread reads the environment is undefined.
    std::env::set_var("DOCKER_HOST", format!("unix://{}", socket.display()));
    docker::start_relay(engine, minor, scratch.path())?;
    Ok(scratch)
}

/// `ringrep-applier verify --live` of `replica` against `primary` while the writers go on
/// (issue 49, item 4): both sides compared at one sequence number of the primary.
async fn verify_live(c: &Cluster, primary: &Node, replica: &Node) -> Result<()> {
    let live = c.verify_live(primary, replica).await?;
    let at = live
        .lines()
        .rev()
        .find(|l| l.contains("live:"))
        .unwrap_or("")
        .trim();
    println!(
        "    verify --live {} against {} under load: CONVERGED ({at})",
        replica.short, primary.short
    );
    Ok(())
}

/// Primary and one replica, the load running, and the replica's link up.
async fn primary_and_replica(c: &Cluster) -> Result<(Arc<Node>, Arc<Node>, Load)> {
    let p = c.primary().await?;
    let r1 = c.replica("r1", 2, &p).await?;
    let load = Load::start(&p, 0, WRITERS, USERS_PER_WRITER);
    load.wait_more(100).await?;
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    Ok((p, r1, load))
}

/// A replica cut off its primary (`docker network disconnect`) until it ends the silent link
/// itself (three heartbeats), the primary taking writes meanwhile; then healed.
async fn partition_replica(c: Cluster) -> Result<()> {
    let (p, r1, load) = primary_and_replica(&c).await?;
    let watch = SeqWatch::start(vec![r1.clone()]);
    r1.disconnect(&c.name)?;
    // Only a link silent for three heartbeat periods is ended: this proves the cut lasted.
    r1.wait_metric("ringrep_replica_link_up", 0.0).await?;
    load.wait_more(200).await?;
    r1.reconnect(&c.name).await?;
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    verify_live(&c, &p, &r1).await?;
    load.wait_more(100).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&r1], &history, None).await?;
    Ok(())
}

/// The primary frozen (`docker pause`, the cgroup freezer: SIGSTOP for every process) until
/// its replica ends the silent link, writers waiting on it; then thawed.
async fn pause_primary(c: Cluster) -> Result<()> {
    let (p, r1, load) = primary_and_replica(&c).await?;
    let watch = SeqWatch::start(vec![r1.clone()]);
    p.pause().await?;
    r1.wait_metric("ringrep_replica_link_up", 0.0).await?;
    p.unpause().await?;
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    load.wait_more(200).await?;
    verify_live(&c, &p, &r1).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&r1], &history, None).await?;
    Ok(())
}

/// A replica killed (SIGKILL) while the primary takes writes, then started again on its
/// volume: it resumes from its stored position.
async fn kill_replica(c: Cluster) -> Result<()> {
    let (p, r1, load) = primary_and_replica(&c).await?;
    let watch = SeqWatch::start(vec![r1.clone()]);
    r1.kill()?;
    watch.forget(&r1);
    load.wait_more(200).await?;
    r1.restart().await?;
    // What it had applied survived the crash on its volume (all but the last few
    // milliseconds at most): a replica on an empty directory would be at 0 here.
    let resumed = r1.applied_seq().await?;
    if resumed == 0 {
        bail!("r1 came back at seq 0: its data did not survive on its volume");
    }
    watch.forget(&r1);
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    verify_live(&c, &p, &r1).await?;
    load.wait_more(100).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&r1], &history, None).await?;
    Ok(())
}

/// A chain across three hosts: primary -> r1 -> r2, the middle one killed and started
/// again while writes go on.
async fn chain(c: Cluster) -> Result<()> {
    let p = c.primary().await?;
    let r1 = c.replica("r1", 2, &p).await?;
    let r2 = c.replica("r2", 3, &r1).await?;
    let load = Load::start(&p, 0, WRITERS, USERS_PER_WRITER);
    load.wait_more(100).await?;
    r2.wait_metric("ringrep_replica_link_up", 1.0).await?;
    let watch = SeqWatch::start(vec![r1.clone(), r2.clone()]);
    r1.kill()?;
    watch.forget(&r1);
    r2.wait_metric("ringrep_replica_link_up", 0.0).await?;
    load.wait_more(200).await?;
    r1.restart().await?;
    watch.forget(&r1);
    r2.wait_metric("ringrep_replica_link_up", 1.0).await?;
    verify_live(&c, &p, &r1).await?;
    load.wait_more(100).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&r1, &r2], &history, None).await?;
    Ok(())
}

/// A replica cut off while the primary's binlog retention is small: the primary keeps the
/// segments the replica's stream still needs until the binlog passes twice the size limit,
/// then removes them (counted as a reader overtaken). The replica, back on the network, is
/// refused the stream it asks for and is provisioned from a snapshot over its connection,
/// while the writers go on.
async fn replica_overtaken(c: Cluster) -> Result<()> {
    let p = c
        .primary_with(&[
            "--max-binlog-size",
            "4096",
            "--binlog-retention-size",
            "16K",
            "--metrics-listen",
            "127.0.0.1:9100",
        ])
        .await?;
    let r1 = c.replica("r1", 2, &p).await?;
    let load = Load::start(&p, 0, WRITERS, USERS_PER_WRITER);
    load.wait_more(100).await?;
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    let watch = SeqWatch::start(vec![r1.clone()]);
    r1.disconnect(&c.name)?;
    r1.wait_metric("ringrep_replica_link_up", 0.0).await?;
    // Retention runs every 10 s; the stream the primary still holds for r1 keeps its
    // segments until the binlog is past the hard cap (32K), which the load soon passes.
    p.wait_counter("ringrep_binlog_readers_overtaken_total", 1.0)
        .await?;
    load.wait_more(100).await?;
    r1.reconnect(&c.name).await?;
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    load.wait_more(100).await?;
    verify_live(&c, &p, &r1).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&r1], &history, None).await?;
    if !r1.logs()?.contains("provisioned from server 1") {
        bail!("r1 caught up without being provisioned, though its next transaction was purged");
    }
    println!("    r1, overtaken by retention, was provisioned from the primary");
    Ok(())
}

/// A replica on a slow and lossy link: what the primary sends it shaped to 256 kbit/s, and
/// a tenth of the packets it receives dropped, while the writers (whose own link is not
/// touched) get ahead of it; it keeps up as it can (retransmits, heartbeats late or lost),
/// is verified live while the link is still bad, then the link heals and it converges.
async fn slow_lossy_link(c: Cluster) -> Result<()> {
    let (p, r1, load) = primary_and_replica(&c).await?;
    let watch = SeqWatch::start(vec![r1.clone()]);
    p.slow_link_to(&r1, "256kbit")?;
    r1.drop_incoming(0.1)?;
    load.wait_more(300).await?;
    verify_live(&c, &p, &r1).await?;
    load.wait_more(100).await?;
    let (at, applied) = (p.last_seq().await?, r1.applied_seq().await?);
    println!(
        "    link impaired: r1 at seq {applied} of the primary's {at} ({} behind)",
        at.saturating_sub(applied)
    );
    p.heal()?;
    r1.heal()?;
    load.wait_more(100).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&r1], &history, None).await?;
    Ok(())
}

/// What a Kafka scenario cuts off.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// The broker's host, off the network: the relay and the Kafka-fed replica both lose it.
    Broker,
    /// Only the link between the primary (whose relay produces) and the broker: the replica
    /// keeps its own link to the broker, and the primary keeps serving its clients.
    Relay,
}

/// The Kafka path across hosts: the primary's relay produces to a broker on a host of its
/// own, and a replica on a third host applies the replication topic from it. The broker is
/// cut off (`Cut::Broker`), or only the relay's link to it (`Cut::Relay`, packets between the
/// primary's and the broker's addresses dropped in the primary's network namespace), while
/// the primary takes writes, for longer than the relay's and the consumer's timeouts to
/// notice, then healed: the relay resumes where Kafka's partitions end, and the replica gets
/// every change once.
async fn kafka_cut(c: Cluster, cut: Cut) -> Result<()> {
    let broker = c.broker().await?;
    let (p, rk, load) = kafka_path(&c, &broker).await?;
    let watch = SeqWatch::start(vec![rk.clone()]);
    match cut {
        Cut::Broker => broker.disconnect(&c.name)?,
        Cut::Relay => p.cut_from(&broker.ip()?)?,
    }
    load.wait_more(200).await?;
    // Past the relay's delivery and the consumer's session timeouts' first retries.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    // The cut held the relay back: what Kafka acknowledged stopped short of the primary.
    let lag = p.metric("ringrep_relay_lag_seq").await?.unwrap_or(0.0);
    if lag < 200.0 {
        bail!("the relay is {lag} transactions behind after 200 inserts cut off from the broker: the cut did not hold it back");
    }
    // Nor did anything produced after the cut reach the replica (still linked to the broker
    // when only the relay was cut): it is behind by at least the inserts since.
    let (last, applied) = (p.last_seq().await?, rk.applied_seq().await?);
    if last.saturating_sub(applied) < 200 {
        bail!("rk applied seq {applied} of the primary's {last} with the relay cut off from the broker for 200 inserts");
    }
    println!("    cut off: the relay {lag} transactions behind the primary, rk at seq {applied} of {last}");
    match cut {
        Cut::Broker => broker.reconnect(&c.name)?,
        Cut::Relay => p.heal()?,
    }
    load.wait_more(100).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&rk], &history, None).await?;
    Ok(())
}

/// The primary with its relay producing to `broker`, `rk` applying the replication topic from
/// the broker, the load running, and rk through the first inserts.
async fn kafka_path(c: &Cluster, broker: &Broker) -> Result<(Arc<Node>, Arc<Node>, Load)> {
    let p = c
        .primary_with(&[
            "--kafka-brokers",
            &broker.address(),
            "--metrics-listen",
            "127.0.0.1:9100",
        ])
        .await?;
    let rk = c.kafka_replica("rk", 3, broker).await?;
    let load = Load::start(&p, 0, WRITERS, USERS_PER_WRITER);
    load.wait_more(100).await?;
    // Through Kafka: the replica applies what the relay produced, the load going on.
    rk.wait_applied(p.last_seq().await?)
        .await
        .context("rk never applied the first inserts through the broker")?;
    Ok((p, rk, load))
}

/// The broker restarted under load: tansu on S3 storage (moto's server, on a host of its
/// own), stopped gracefully and started again while the primary takes writes. The relay and
/// rk lose it for the restart and go on where they were, because the broker kept its topics:
/// a replica started from nothing after the restart reads the replication topic from its
/// first record, and the relay never began the stream again. Not SIGKILL: tansu 0.6.0
/// killed during a produce can lose batches it acknowledged (docs/testing-hosts.md).
async fn broker_restart(c: Cluster) -> Result<()> {
    let s3 = c.s3().await?;
    let broker = c.broker_on_s3(&s3).await?;
    let (p, rk, load) = kafka_path(&c, &broker).await?;
    let watch = SeqWatch::start(vec![rk.clone()]);
    let acked = p.metric("ringrep_relay_acked_seq").await?.unwrap_or(0.0) as u64;
    let from = load.acked();
    // 200 more inserts acknowledged around the restart (the primary takes them throughout).
    let (away, more) = tokio::join!(broker.restart(), load.wait_more(200));
    let away = away?;
    more?;
    println!(
        "    broker restarted gracefully: away {:.1} s, the relay had acknowledged seq {acked}, {} inserts acknowledged meanwhile",
        away.as_secs_f64(),
        load.acked() - from
    );
    // The relay and rk go on past everything the primary had at the broker's return.
    let at = p.last_seq().await?;
    p.wait_counter("ringrep_relay_acked_seq", at as f64).await?;
    rk.wait_applied(at).await?;
    // A replica on an empty directory, started now, reads the replication topic from seq 1
    // and stops at a gap (a topic that lost its start or middle): converging, it shows the
    // records produced before the restart are still in the broker.
    let rk2 = c.kafka_replica("rk2", 4, &broker).await?;
    load.wait_more(100).await?;
    let history = load.stop().await?;
    watch.stop().await?;
    settle_and_check(&c, &p, 1, &[&rk, &rk2], &history, None).await?;
    // Every run of the relay found the stream in the topics: the first one (on the empty
    // broker) aside, each says the replication topic holds at least what was acknowledged
    // before the restart; and it took no snapshot after its first run's.
    let logs = p.logs()?;
    let starts: Vec<u64> = logs
        .lines()
        .filter(|l| l.contains("relay: exactly once"))
        .map(|l| {
            l.split(" holds seq ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|n| n.trim().parse().ok())
                .with_context(|| format!("no 'holds seq N' in the relay's line: {l}"))
        })
        .collect::<Result<_>>()?;
    if let Some(seq) = starts.iter().skip(1).find(|&&s| s < acked) {
        bail!("a relay run after the restart found the replication topic at seq {seq}, below the {acked} acknowledged before it: the broker lost records");
    }
    // Its first run, on the empty broker, sent the tables whole; a run finding the topics
    // empty would send them again.
    let snapshots = logs
        .lines()
        .filter(|l| l.contains("relay: snapshot at seq") && l.trim_end().ends_with(" done"))
        .count();
    if snapshots != 1 {
        bail!("the relay sent {snapshots} snapshots, not the one of its first run: it found the topics empty and began the stream again");
    }
    let again = &starts[starts.len().min(1)..];
    if again.is_empty() {
        println!("    the relay's one run went on through the restart (one snapshot, its first run's); rk2 applied the replication topic from seq 1");
    } else {
        println!("    the relay ran again {} times, finding the replication topic at seq {again:?} (one snapshot, its first run's); rk2 applied it from seq 1", again.len());
    }
    Ok(())
}

/// Failover across hosts: the replicas cut off from the primary, which goes on taking
/// writes, then the primary's container removed under load (its host gone), the
/// replica that applied more of it promoted (`STOP REPLICA; RESET REPLICA ALL`), the other
/// re-pointed to it (`CHANGE REPLICATION SOURCE TO`), writes going on on the new primary.
/// Replication is asynchronous: inserts the old primary acknowledged and never streamed are
/// the documented loss window, counted; everything the promoted replica had received stays,
/// on both nodes, and both agree.
async fn failover(c: Cluster) -> Result<()> {
    fail_over(c, false).await
}

/// The failover, with the old primary's host killed (SIGKILL) rather than removed: once the
/// new primary takes writes, the old primary's data directory (its volume) is served as a
/// replica of the new primary, keeping its server id. It holds the inserts it acknowledged
/// and never streamed, which the new primary lacks, so it must be provisioned from the new
/// primary, and end with exactly what the other nodes hold.
async fn old_primary_rejoins(c: Cluster) -> Result<()> {
    fail_over(c, true).await
}

/// The failover scenario; with `rejoin`, the old primary comes back as a replica.
async fn fail_over(c: Cluster, rejoin: bool) -> Result<()> {
    let p = c.primary().await?;
    let r1 = c.replica("r1", 2, &p).await?;
    let r2 = c.replica("r2", 3, &p).await?;
    let load = Load::start(&p, 0, WRITERS, USERS_PER_WRITER);
    load.wait_more(150).await?;
    r1.wait_metric("ringrep_replica_link_up", 1.0).await?;
    r2.wait_metric("ringrep_replica_link_up", 1.0).await?;
    // The replicas lose the primary first (cut off until each ends its silent link), while
    // it goes on acknowledging: at least those 50 inserts are the loss window, so the
    // checker has one to find. Then the primary's host is removed and the replicas come back
    // on the network.
    r1.disconnect(&c.name)?;
    r2.disconnect(&c.name)?;
    r1.wait_metric("ringrep_replica_link_up", 0.0).await?;
    r2.wait_metric("ringrep_replica_link_up", 0.0).await?;
    const UNSTREAMED: usize = 50;
    load.wait_more(UNSTREAMED).await?;
    if rejoin {
        p.kill()?;
    } else {
        p.remove()?;
    }
    let old = load.stop().await?;
    r1.reconnect(&c.name).await?;
    r2.reconnect(&c.name).await?;
    let (s1, s2) = (r1.applied_seq().await?, r2.applied_seq().await?);
    let ((new, new_id), other) = if s1 >= s2 {
        ((&r1, 2), &r2)
    } else {
        ((&r2, 3), &r1)
    };
    println!(
        "    old primary {}: r1 at seq {s1}, r2 at {s2}; promoting {}",
        if rejoin { "killed" } else { "removed" },
        new.short
    );
    new.sql(&["STOP REPLICA", "RESET REPLICA ALL"]).await?;
    // What the promoted node holds of the old primary, before anyone writes to it: a
    // prefix of each ring's inserts; the acknowledged ones beyond it are the loss window.
    let lossy = CheckOptions {
        ring_size: RING_SIZE,
        lossy_epoch: Some(0),
    };
    let before = history::check(&old, &new.rings().await?, lossy);
    println!("    at promotion: {before}");
    if !before.ok() {
        bail!("the promoted replica's rings do not fit the old primary's history");
    }
    println!(
        "    loss window: {} of {} acknowledged inserts (acknowledged by the old primary, never streamed to {})",
        before.lost,
        old.count(history::Outcome::Acked),
        new.short
    );
    if before.lost < UNSTREAMED {
        bail!(
            "loss window of {}: the old primary acknowledged at least {UNSTREAMED} inserts after both replicas were cut off",
            before.lost
        );
    }
    other
        .sql(&[
            "STOP REPLICA",
            &format!(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST='{}', SOURCE_PORT=3306, \
                 SOURCE_USER='root', SOURCE_PASSWORD='{PASSWORD}', SOURCE_HEARTBEAT_PERIOD=0.5, \
                 SOURCE_CONNECT_RETRY=1",
                new.host
            ),
            "START REPLICA",
        ])
        .await?;
    let load = Load::start(new, 1, WRITERS, USERS_PER_WRITER);
    load.wait_more(50).await?;
    // The old primary's volume, served as a replica of the new primary while it takes writes.
    let back = match rejoin {
        true => Some(c.replica_on_volume_of("old", 1, new, &p).await?),
        false => None,
    };
    load.wait_more(100).await?;
    verify_live(&c, new, other).await?;
    if let Some(back) = &back {
        verify_live(&c, new, back).await?;
    }
    let mut history = old;
    history.extend(load.stop().await?.writes().cloned());
    let mut replicas = vec![&**other];
    replicas.extend(back.as_deref());
    let reports = settle_and_check(&c, new, new_id, &replicas, &history, Some(0)).await?;
    if let Some(back) = &back {
        let logs = back.logs()?;
        let said = format!("provisioned from server {new_id}");
        if !logs.contains(&said) {
            bail!("the old primary rejoined without being provisioned, though it held {} inserts the new primary lacks (its log never says '{said}')", before.lost);
        }
        println!(
            "    the old primary rejoined: provisioned from {}, its {} unstreamed inserts gone",
            new.short, before.lost
        );
    }
    // Nothing the promoted replica had received was lost, on either node.
    for r in &reports {
        if r.held != before.held || r.lost != before.lost {
            bail!(
                "{}: holds other inserts of the old primary than {} did at promotion ({} lost, {} at promotion)",
                r.node,
                new.short,
                r.lost,
                before.lost
            );
        }
    }
    Ok(())
}
