//! `soak`: a primary and its replica as processes for MINUTES under a mixed workload (ring
//! inserts that overwrite, updates, prefix deletes, a TTL ring that the purge empties, a table
//! created and dropped every minute), sampling each node's resident memory, open files and
//! binlog size; then the replica catches up and the verifier runs. With `--kafka-brokers`, the
//! primary also relays to Kafka. The figures are reported, not judged: the last line says
//! whether the nodes converged and how memory moved between the first sample after warm-up
//! and the last (exit 1 when they did not converge).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mysql_async::prelude::*;

use crate::peers::spawn_node;

/// What `soak` runs.
pub(crate) struct Soak {
    pub(crate) minutes: u64,
    pub(crate) rate: u64,
    pub(crate) kafka_brokers: Option<String>,
    pub(crate) bin_dir: PathBuf,
}

/// One node's figures at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rss_kib: u64,
    open_files: u64,
    binlog_bytes: u64,
}

fn sample(pid: u32, data: &Path) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let open_files = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let binlog_bytes = std::fs::read_dir(data.join("binlog"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    Sample {
        rss_kib,
        open_files,
        binlog_bytes,
    }
}

struct Nodes {
    children: Vec<Child>,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Counts of what the workload did.
#[derive(Default)]
struct Done {
    inserts: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
    ttl_inserts: AtomicU64,
    ddl: AtomicU64,
    errors: AtomicU64,
}

const PREFIXES: u64 = 2000;

/// What a replica applied of the primary (server 1).
const APPLIED: &str = "SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = 1";

async fn workload(
    addr: SocketAddr,
    rate: u64,
    stop: Arc<AtomicBool>,
    done: Arc<Done>,
    client: u64,
    clients: u64,
) -> anyhow::Result<()> {
    let mut c = mysql_async::Conn::new(root(addr, Some("test"))).await?;
    let per_client = (rate / clients).max(1);
    let period = Duration::from_secs_f64(1.0 / per_client as f64);
    let mut next = Instant::now();
    let mut n: u64 = client;
    let mut last_ddl = Instant::now();
    let mut ddl_round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += clients;
        let prefix = (n * 7919) % PREFIXES;
        let r = match n % 20 {
            0..=13 => c
                .exec_drop(
                    "INSERT INTO soak (user_id, payload) VALUES (?, ?)",
                    (prefix, format!("insert {n} {}", "s".repeat(100))),
                )
                .await
                .map(|()| &done.inserts),
            14 | 15 => c
                .exec_drop(
                    "UPDATE soak SET payload = ? WHERE user_id = ?",
                    (format!("update {n}"), prefix),
                )
                .await
                .map(|()| &done.updates),
            16 => c
                .exec_drop("DELETE FROM soak WHERE user_id = ?", (prefix,))
                .await
                .map(|()| &done.deletes),
            _ => c
                .exec_drop(
                    "INSERT INTO soak_ttl (user_id, payload) VALUES (?, ?)",
                    (prefix, format!("ttl {n}")),
                )
                .await
                .map(|()| &done.ttl_inserts),
        };
        match r {
            Ok(counter) => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                done.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("soak: client {client}: {e}");
            }
        }
        // DDL once a minute, from the first client: a table created, the previous one dropped.
        if client == 0 && last_ddl.elapsed() >= Duration::from_secs(60) {
            last_ddl = Instant::now();
            ddl_round += 1;
            c.query_drop(format!(
                "CREATE TABLE soak_ddl_{ddl_round} (id INT PRIMARY KEY, v VARCHAR(20))"
            ))
            .await?;
            c.query_drop(format!("INSERT INTO soak_ddl_{ddl_round} VALUES (1, 'x')"))
                .await?;
            if ddl_round > 1 {
                c.query_drop(format!("DROP TABLE soak_ddl_{}", ddl_round - 1))
                    .await?;
            }
            done.ddl.fetch_add(1, Ordering::Relaxed);
        }
        next += period;
        let now = Instant::now();
        if next > now {
            tokio::time::sleep(next - now).await;
        } else {
            next = now;
        }
    }
    Ok(())
}

/// Root's login at `addr`, in database `db`.
fn root(addr: SocketAddr, db: Option<&str>) -> mysql_async::OptsBuilder {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("root"))
        .db_name(db)
        .prefer_socket(false)
}

async fn query_u64(addr: SocketAddr, sql: &str) -> Option<u64> {
    let mut c = mysql_async::Conn::new(root(addr, None)).await.ok()?;
    c.query_first(sql).await.ok().flatten()
}

/// `ringrep-applier verify` of two nodes: whether they converged, and the report (with what
/// the verifier printed on standard error).
fn verify(
    bin_dir: &Path,
    primary: SocketAddr,
    replica: SocketAddr,
) -> anyhow::Result<(bool, String)> {
    let out = Command::new(bin_dir.join("ringrep-applier"))
        .args(["verify", "--primary", &format!("mysql://root@{primary}")])
        .args(["--replica", &format!("mysql://root@{replica}")])
        .output()
        .context("running the verifier")?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success() && report.contains("CONVERGED"), report))
}

/// `soak`: see the module's documentation.
pub(crate) fn soak(dir: &Path, s: &Soak) -> anyhow::Result<()> {
    let pdir = dir.join("soak-primary");
    let rdir = dir.join("soak-replica");
    for d in [&pdir, &rdir] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
    }
    let mut cmd = Command::new(s.bin_dir.join("ringrep-source"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(&pdir)
        .args(["--listen", "127.0.0.1:0"])
        // Bounded, so that a flat binlog size is something to see: 4 MiB segments, 64 MiB.
        .args([
            "--max-binlog-size",
            "4194304",
            "--binlog-retention-size",
            "67108864",
        ])
        .env_remove("RINGREP_ROOT_PASSWORD");
    if let Some(b) = &s.kafka_brokers {
        cmd.args(["--kafka-brokers", b]);
    }
    let (primary, paddr) = spawn_node(cmd, "listening on ", &dir.join("soak-primary.log"))?;
    let mut nodes = Nodes {
        children: vec![primary],
    };
    let mut cmd = Command::new(s.bin_dir.join("ringrep-applier"));
    cmd.arg("serve")
        .arg("--replica-dir")
        .arg(&rdir)
        .arg("--source")
        .arg(format!("mysql://root@{paddr}"))
        .args(["--listen", "127.0.0.1:0"])
        .args([
            "--max-binlog-size",
            "4194304",
            "--binlog-retention-size",
            "67108864",
        ])
        .env_remove("RINGREP_ROOT_PASSWORD");
    let (replica, raddr) = spawn_node(cmd, "replica listening on ", &dir.join("soak-replica.log"))?;
    nodes.children.push(replica);
    // With a broker, a second replica reads what the relay put there: the relay is checked
    // end to end, by the same verifier.
    let kdir = dir.join("soak-kafka-replica");
    if kdir.exists() {
        std::fs::remove_dir_all(&kdir)?;
    }
    let kafka_replica = match &s.kafka_brokers {
        Some(b) => {
            let mut cmd = Command::new(s.bin_dir.join("ringrep-applier"));
            cmd.arg("serve")
                .arg("--replica-dir")
                .arg(&kdir)
                .args(["--kafka-brokers", b, "--server-id", "3"])
                .args(["--listen", "127.0.0.1:0"])
                .env_remove("RINGREP_ROOT_PASSWORD");
            let (k, kaddr) = spawn_node(
                cmd,
                "replica listening on ",
                &dir.join("soak-kafka-replica.log"),
            )?;
            nodes.children.push(k);
            Some(kaddr)
        }
        None => None,
    };
    let (ppid, rpid) = (nodes.children[0].id(), nodes.children[1].id());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = mysql_async::Conn::new(root(paddr, Some("test"))).await?;
        c.query_drop(
            "CREATE TABLE soak (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), payload VARCHAR(256), PRIMARY KEY (user_id, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=8'",
        )
        .await?;
        c.query_drop(
            "CREATE TABLE soak_ttl (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), \
             payload VARCHAR(256), PRIMARY KEY (user_id, ring_idx), INDEX ttl_index (ts)) \
             COMMENT='NDB_TABLE=TTL=30@ts,MAX_ROWS_PER_PK=4'",
        )
        .await?;
        anyhow::Ok(())
    })
    .context("creating the soak tables")?;

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Done::default());
    let clients = 4;
    let load: Vec<_> = (0..clients)
        .map(|c| {
            rt.spawn(workload(
                paddr,
                s.rate,
                stop.clone(),
                done.clone(),
                c,
                clients,
            ))
        })
        .collect();
    println!(
        "soak: {} min, {} ops/s target over {clients} connections (70% ring inserts into {PREFIXES} rings of 8, 10% updates, 5% prefix deletes, 15% inserts into a TTL ring of 30 s; a table created and dropped each minute){}",
        s.minutes,
        s.rate,
        if s.kafka_brokers.is_some() { "; relay to Kafka on" } else { "; no relay (no --kafka-brokers)" }
    );
    println!("| minute | primary RSS MiB | primary files | primary binlog MiB | replica RSS MiB | replica files | replica binlog MiB | replica behind (tx) | Kafka replica behind (tx) | ops done |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let started = Instant::now();
    let total = Duration::from_secs(s.minutes * 60);
    let every = Duration::from_secs(30).min(total);
    let mut samples: Vec<(Sample, Sample)> = Vec::new();
    let mut at = Duration::ZERO;
    while at < total {
        at += every;
        std::thread::sleep((started + at).saturating_duration_since(Instant::now()));
        let (p, r) = (sample(ppid, &pdir), sample(rpid, &rdir));
        let pseq = rt
            .block_on(query_u64(paddr, "SELECT @@ringrep_last_seq"))
            .unwrap_or(0);
        let rseq = rt.block_on(query_u64(raddr, APPLIED)).unwrap_or(0);
        let ops = done.inserts.load(Ordering::Relaxed)
            + done.updates.load(Ordering::Relaxed)
            + done.deletes.load(Ordering::Relaxed)
            + done.ttl_inserts.load(Ordering::Relaxed);
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let relay = match kafka_replica {
            Some(k) => {
                let kseq = rt.block_on(query_u64(k, APPLIED)).unwrap_or(0);
                pseq.saturating_sub(kseq).to_string()
            }
            None => "-".into(),
        };
        println!(
            "| {:.1} | {:.1} | {} | {:.1} | {:.1} | {} | {:.1} | {} | {relay} | {ops} |",
            at.as_secs_f64() / 60.0,
            p.rss_kib as f64 / 1024.0,
            p.open_files,
            mib(p.binlog_bytes),
            r.rss_kib as f64 / 1024.0,
            r.open_files,
            mib(r.binlog_bytes),
            pseq.saturating_sub(rseq),
        );
        samples.push((p, r));
    }
    stop.store(true, Ordering::Relaxed);
    for l in load {
        rt.block_on(l)??;
    }
    // The replica catches up, then the verifier compares. The TTL purge goes on committing
    // deletes until the last TTL rows expire: the verifier needs a quiet node, so it is tried
    // again (after the replica catches up again) while the primary moves under it.
    let deadline = Instant::now() + Duration::from_secs(300);
    let (converged, report, pseq) = loop {
        let pseq = rt
            .block_on(query_u64(paddr, "SELECT @@ringrep_last_seq"))
            .context("the primary's last seq")?;
        loop {
            let rseq = rt.block_on(query_u64(raddr, APPLIED)).unwrap_or(0);
            if rseq >= pseq {
                break;
            }
            if Instant::now() > deadline {
                bail!("the replica stayed at seq {rseq} of {pseq}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let (converged, report) = verify(&s.bin_dir, paddr, raddr)?;
        if report.contains("while it was read") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_secs(5));
            continue;
        }
        break (converged, report, pseq);
    };
    // The replica fed by the relay through Kafka converges too.
    let kafka_converged = match kafka_replica {
        None => true,
        Some(k) => {
            let deadline = Instant::now() + Duration::from_secs(300);
            while rt.block_on(query_u64(k, APPLIED)).unwrap_or(0) < pseq {
                if Instant::now() > deadline {
                    bail!("the Kafka-fed replica did not reach seq {pseq}");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let (ok, _) = verify(&s.bin_dir, paddr, k)?;
            println!(
                "soak: the replica fed by the relay through Kafka: {}",
                if ok { "CONVERGED" } else { "DIFFERENT" }
            );
            ok
        }
    };
    // Memory from the first sample after a warm-up (a quarter of the run) to the last.
    let warm = samples.len() / 4;
    let (first, last) = (
        samples[warm.min(samples.len() - 1)],
        samples[samples.len() - 1],
    );
    println!(
        "soak: {} inserts, {} updates, {} prefix deletes, {} TTL inserts, {} DDL rounds, {} errors; primary at seq {pseq}",
        done.inserts.load(Ordering::Relaxed),
        done.updates.load(Ordering::Relaxed),
        done.deletes.load(Ordering::Relaxed),
        done.ttl_inserts.load(Ordering::Relaxed),
        done.ddl.load(Ordering::Relaxed),
        done.errors.load(Ordering::Relaxed),
    );
    println!(
        "soak: primary RSS {:.1} -> {:.1} MiB, files {} -> {}; replica RSS {:.1} -> {:.1} MiB, files {} -> {} (from minute {:.1} to the end)",
        first.0.rss_kib as f64 / 1024.0,
        last.0.rss_kib as f64 / 1024.0,
        first.0.open_files,
        last.0.open_files,
        first.1.rss_kib as f64 / 1024.0,
        last.1.rss_kib as f64 / 1024.0,
        first.1.open_files,
        last.1.open_files,
        (warm + 1) as f64 * every.as_secs_f64() / 60.0,
    );
    println!(
        "soak: verifier: {}",
        if converged {
            "CONVERGED"
        } else {
            "DIFFERENT (below)"
        }
    );
    drop(nodes);
    if !kafka_converged {
        bail!("the Kafka-fed replica did not converge");
    }
    if !converged {
        println!("{report}");
        bail!("the replica did not converge");
    }
    Ok(())
}
