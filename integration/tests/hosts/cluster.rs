//! Nodes as containers on a private network, the client load that records every write, and
//! the end of every scenario: replicas caught up, the verifier's CONVERGED, the history
//! checked on every node.
//!
//! Each scenario gets a network of its own (`ringrep-hosts-PID-SCENARIO`) and names its
//! containers after it, so nodes reach each other by name (`...-primary:3306`) at addresses
//! of their own. The test process reaches each node's MySQL port through a port published on
//! 127.0.0.1 only, and nothing else.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use integration::history::{
    self, CheckOptions, History, NodeRings, Outcome, Report, RingRow, Write,
};
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use testcontainers::bollard::models::PortBinding;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::task::JoinHandle;

use crate::docker::docker;

/// Root's password on every node (they listen beyond loopback, which needs one).
pub(crate) const PASSWORD: &str = "ringrep";
/// Rows per ring prefix: small, so that the load overwrites every ring many times.
pub(crate) const RING_SIZE: u32 = 5;
/// The label every container of a run carries (value: the scenario's cluster name).
pub(crate) const LABEL: &str = "ringrep.test.hosts";
/// The image the nodes run (`.ci/images` builds it; never pulled).
pub(crate) const IMAGE: (&str, &str) = ("ringrep", "latest");
/// The broker's image: tansu 0.6.0, a Kafka-compatible broker (`.ci/images` builds it).
pub(crate) const BROKER_IMAGE: (&str, &str) = ("ringrep-tansu", "0.6.0");
/// The broker's S3 storage: moto's server, an S3 endpoint (`.ci/images` builds it).
pub(crate) const S3_IMAGE: (&str, &str) = ("ringrep-s3", "moto-5.2.6");
/// The bucket the broker keeps its topics in, on the S3 endpoint.
const BUCKET: &str = "tansu";
/// Heartbeat period the replicas ask for: three silent periods (1.5 s) end a link.
pub(crate) const HEARTBEAT_MS: u64 = 500;
/// The bound on every wait of a scenario (a node starting, a replica catching up).
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// The containers of one scenario.
pub(crate) struct Cluster {
    /// `ringrep-hosts-PID-SCENARIO`: the network's name and every container's prefix.
    pub(crate) name: String,
    /// A container that only runs the verifier (`docker exec`), started on first use.
    tools: tokio::sync::Mutex<Option<ContainerAsync<GenericImage>>>,
}

/// The Kafka-compatible broker of a scenario, reached by the nodes at `HOST:9092`.
pub(crate) struct Broker {
    /// The container's name, its host name on the network.
    pub(crate) host: String,
    _container: ContainerAsync<GenericImage>,
}

impl Broker {
    /// `host:9092`, as the nodes' `--kafka-brokers` give it.
    pub(crate) fn address(&self) -> String {
        format!("{}:9092", self.host)
    }

    /// Waits until the broker's port takes connections.
    async fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            let (code, _) = exec(
                &self.host,
                &["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9092"],
            )
            .await?;
            if code == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the broker {} never took connections on 9092", self.host);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The broker's address on the scenario's network.
    pub(crate) fn ip(&self) -> Result<String> {
        container_ip(&self.host)
    }

    /// Cuts the broker off the cluster's network (`docker network disconnect`).
    pub(crate) fn disconnect(&self, network: &str) -> Result<()> {
        docker(&["network", "disconnect", network, &self.host]).map(drop)
    }

    /// Connects the broker to the network again; its name resolves as before.
    pub(crate) fn reconnect(&self, network: &str) -> Result<()> {
        docker(&["network", "connect", network, &self.host]).map(drop)
    }

    /// Restarts the broker gracefully: `docker stop` (SIGTERM, and SIGKILL only if it is
    /// still running 30 s later, which fails here), then `docker start` of the same container,
    /// and waits until its port takes connections again. Returns how long it was away. Never
    /// SIGKILL: tansu 0.6.0 killed while it takes produce requests can lose batches it has
    /// acknowledged (docs/testing-hosts.md).
    pub(crate) async fn restart(&self) -> Result<Duration> {
        let began = Instant::now();
        let host = self.host.clone();
        let code = tokio::task::spawn_blocking(move || -> Result<String> {
            docker(&["stop", "-t", "30", &host])?;
            docker(&["inspect", "--format", "{{.State.ExitCode}}", &host])
        })
        .await??;
        // 137 is 128 + SIGKILL: docker stop's grace ran out.
        if code.trim() == "137" {
            bail!(
                "the broker {} did not stop within 30 s of SIGTERM and was killed",
                self.host
            );
        }
        let host = self.host.clone();
        tokio::task::spawn_blocking(move || docker(&["start", &host])).await??;
        self.wait_ready().await?;
        Ok(began.elapsed())
    }
}

/// The S3 endpoint of a scenario (moto's server) at `http://HOST:5000`, holding the bucket
/// the broker on S3 keeps its topics in. moto keeps the bucket in its own memory, so it must
/// outlive every restart of the broker; nothing restarts it.
pub(crate) struct S3 {
    /// The container's name, its host name on the network.
    pub(crate) host: String,
    _container: ContainerAsync<GenericImage>,
}

impl S3 {
    /// `http://HOST:5000`, the endpoint the broker is given.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}:5000", self.host)
    }
}

/// One node: its container and the address its MySQL port is published on.
pub(crate) struct Node {
    /// The short name (`primary`, `r1`), for reports.
    pub(crate) short: String,
    /// The container's name, which is its host name on the network.
    pub(crate) host: String,
    container: ContainerAsync<GenericImage>,
    addr: Mutex<SocketAddr>,
}

impl Cluster {
    /// A cluster for `scenario`; nothing is started yet.
    pub(crate) fn new(scenario: &str) -> Cluster {
        Cluster {
            name: Cluster::name_for(scenario),
            tools: tokio::sync::Mutex::new(None),
        }
    }

    /// The cluster (network) name of `scenario` in this run.
    pub(crate) fn name_for(scenario: &str) -> String {
        format!("ringrep-hosts-{}-{scenario}", std::process::id())
    }

    async fn container(
        &self,
        short: &str,
        cmd: Vec<String>,
    ) -> Result<ContainerAsync<GenericImage>> {
        self.container_on(short, cmd, None).await
    }

    /// [`Cluster::container`] on the volumes of the (stopped) container `volumes_of`, when
    /// given: the same data directory, under another command.
    async fn container_on(
        &self,
        short: &str,
        cmd: Vec<String>,
        volumes_of: Option<&str>,
    ) -> Result<ContainerAsync<GenericImage>> {
        let host = format!("{}-{short}", self.name);
        let volumes_from = volumes_of.map(|h| vec![h.to_string()]);
        GenericImage::new(IMAGE.0, IMAGE.1)
            .with_container_name(&host)
            .with_network(&self.name)
            .with_label(LABEL, &self.name)
            .with_env_var("RINGREP_ROOT_PASSWORD", PASSWORD)
            .with_env_var("RINGREP_LOG", "info")
            .with_cmd(cmd)
            .with_host_config_modifier(move |hc| {
                // Published on loopback only (testcontainers would publish on every address).
                hc.publish_all_ports = Some(false);
                hc.volumes_from = volumes_from.clone();
                hc.port_bindings = Some(HashMap::from([(
                    "3306/tcp".to_string(),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(String::new()),
                    }]),
                )]));
            })
            .start()
            .await
            .with_context(|| format!("start container {host}"))
    }

    async fn node(&self, short: &str, cmd: Vec<String>) -> Result<Arc<Node>> {
        self.node_on(short, cmd, None).await
    }

    async fn node_on(
        &self,
        short: &str,
        cmd: Vec<String>,
        volumes_of: Option<&str>,
    ) -> Result<Arc<Node>> {
        let container = self.container_on(short, cmd, volumes_of).await?;
        let node = Node {
            short: short.into(),
            host: format!("{}-{short}", self.name),
            container,
            addr: Mutex::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
        };
        node.refresh_addr().await?;
        node.wait_ready().await?;
        Ok(Arc::new(node))
    }

    /// Starts the broker (tansu, memory storage) as host `broker`, and waits until its port
    /// takes connections. Nothing of it is published: only the nodes reach it. A restart
    /// empties it.
    pub(crate) async fn broker(&self) -> Result<Broker> {
        self.broker_with("memory://tansu/", Vec::new()).await
    }

    /// Starts the S3 endpoint (moto's server) as host `s3`, and makes the broker's bucket.
    /// Nothing of it is published.
    pub(crate) async fn s3(&self) -> Result<S3> {
        let host = format!("{}-s3", self.name);
        let container = GenericImage::new(S3_IMAGE.0, S3_IMAGE.1)
            .with_container_name(&host)
            .with_network(&self.name)
            .with_label(LABEL, &self.name)
            .start()
            .await
            .with_context(|| format!("start container {host}"))?;
        // The bucket, made from inside the container once the server answers (200).
        let put = format!("http://127.0.0.1:5000/{BUCKET}");
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, out) = exec(
                &host,
                &[
                    "curl",
                    "-s",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "-X",
                    "PUT",
                    &put,
                ],
            )
            .await?;
            if out.trim() == "200" {
                break;
            }
            if Instant::now() > deadline {
                bail!("{host}: PUT {put} never answered 200 (last: {out:?})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(S3 {
            host,
            _container: container,
        })
    }

    /// Starts the broker as [`Cluster::broker`] does, its storage the bucket on `s3`: it
    /// keeps its topics, their offsets and its consumer groups across a restart
    /// ([`Broker::restart`]).
    pub(crate) async fn broker_on_s3(&self, s3: &S3) -> Result<Broker> {
        // moto takes any key; the region must be named, and the endpoint is plain HTTP.
        let env = [
            ("AWS_ACCESS_KEY_ID", "minioadmin".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "minioadmin".to_string()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT", s3.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ];
        self.broker_with(&format!("s3://{BUCKET}/"), env.to_vec())
            .await
    }

    /// Starts tansu as host `broker` on `storage` (its `--storage-engine`), with `env`, and
    /// waits until its port takes connections.
    async fn broker_with(&self, storage: &str, env: Vec<(&str, String)>) -> Result<Broker> {
        let host = format!("{}-broker", self.name);
        let mut image = GenericImage::new(BROKER_IMAGE.0, BROKER_IMAGE.1)
            .with_entrypoint("tansu")
            .with_container_name(&host)
            .with_network(&self.name)
            .with_label(LABEL, &self.name)
            // tansu's info level logs every request.
            .with_env_var("RUST_LOG", "warn");
        for (k, v) in env {
            image = image.with_env_var(k, v);
        }
        let container = image
            .with_cmd(args(&[
                "broker",
                "--listener-url",
                "tcp://0.0.0.0:9092",
                "--advertised-listener-url",
                &format!("tcp://{host}:9092"),
                "--storage-engine",
                storage,
            ]))
            .start()
            .await
            .with_context(|| format!("start container {host}"))?;
        let broker = Broker {
            host,
            _container: container,
        };
        broker.wait_ready().await?;
        Ok(broker)
    }

    /// Starts a replica (`ringrep-applier serve`) that reads the primary's replication topic
    /// from `broker`, serving reads, with its metrics on its own loopback.
    pub(crate) async fn kafka_replica(
        &self,
        short: &str,
        server_id: u32,
        broker: &Broker,
    ) -> Result<Arc<Node>> {
        self.node(
            short,
            args(&[
                "ringrep-applier",
                "serve",
                "--replica-dir",
                "/data",
                "--listen",
                "0.0.0.0:3306",
                "--server-id",
                &server_id.to_string(),
                "--kafka-brokers",
                &broker.address(),
                "--metrics-listen",
                "127.0.0.1:9100",
            ]),
        )
        .await
    }

    /// Starts the primary (`ringrep-source serve`, server id 1) and creates the ring table.
    pub(crate) async fn primary(&self) -> Result<Arc<Node>> {
        self.primary_with(&[]).await
    }

    /// [`Cluster::primary`] with more flags for `serve`.
    pub(crate) async fn primary_with(&self, extra: &[&str]) -> Result<Arc<Node>> {
        let mut cmd = args(&[
            "ringrep-source",
            "serve",
            "--data-dir",
            "/data",
            "--listen",
            "0.0.0.0:3306",
            "--server-id",
            "1",
        ]);
        cmd.extend(args(extra));
        let node = self.node("primary", cmd).await?;
        let mut c = node.conn().await?;
        c.query_drop(format!(
            "CREATE TABLE test.events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), payload VARCHAR(64), PRIMARY KEY (user_id, ring_idx)) \
             COMMENT='NDB_TABLE=MAX_ROWS_PER_PK={RING_SIZE}'"
        ))
        .await
        .context("create the ring table")?;
        Ok(node)
    }

    /// Starts a replica (`ringrep-applier serve`) of `source` over the network, serving
    /// reads, with its metrics on its own loopback (read by `docker exec`, which works while
    /// the replica is cut off).
    pub(crate) async fn replica(
        &self,
        short: &str,
        server_id: u32,
        source: &Node,
    ) -> Result<Arc<Node>> {
        self.replica_on(short, server_id, source, None).await
    }

    /// [`Cluster::replica`] on the data directory of the stopped node `old` (its volume):
    /// the old primary rejoining after a failover.
    pub(crate) async fn replica_on_volume_of(
        &self,
        short: &str,
        server_id: u32,
        source: &Node,
        old: &Node,
    ) -> Result<Arc<Node>> {
        self.replica_on(short, server_id, source, Some(&old.host))
            .await
    }

    async fn replica_on(
        &self,
        short: &str,
        server_id: u32,
        source: &Node,
        volumes_of: Option<&str>,
    ) -> Result<Arc<Node>> {
        let source_url = format!("mysql://root:{PASSWORD}@{}:3306", source.host);
        self.node_on(
            short,
            args(&[
                "ringrep-applier",
                "serve",
                "--replica-dir",
                "/data",
                "--listen",
                "0.0.0.0:3306",
                "--server-id",
                &server_id.to_string(),
                "--source",
                &source_url,
                "--source-heartbeat-ms",
                &HEARTBEAT_MS.to_string(),
                "--source-connect-retry",
                "1",
                "--metrics-listen",
                "127.0.0.1:9100",
            ]),
            volumes_of,
        )
        .await
    }

    /// `ringrep-applier verify` of two nodes, run on a host of its own on the network: its
    /// report when it says CONVERGED (exit 0), else an error with the report.
    pub(crate) async fn verify(&self, primary: &Node, replica: &Node) -> Result<String> {
        self.run_verify(primary, replica, false).await
    }

    /// `ringrep-applier verify --live`: the same while the primary takes writes, both sides
    /// read through their replication streams at one sequence number.
    pub(crate) async fn verify_live(&self, primary: &Node, replica: &Node) -> Result<String> {
        self.run_verify(primary, replica, true).await
    }

    async fn run_verify(&self, primary: &Node, replica: &Node, live: bool) -> Result<String> {
        let mut tools = self.tools.lock().await;
        if tools.is_none() {
            *tools = Some(
                self.container("verifier", args(&["sleep", "infinity"]))
                    .await?,
            );
        }
        let (p, r) = (
            format!("mysql://root:{PASSWORD}@{}:3306", primary.host),
            format!("mysql://root:{PASSWORD}@{}:3306", replica.host),
        );
        let mut cmd = vec![
            "ringrep-applier",
            "verify",
            "--primary",
            &p,
            "--replica",
            &r,
        ];
        if live {
            cmd.push("--live");
        }
        let (code, out) = exec(&format!("{}-verifier", self.name), &cmd).await?;
        if code != 0 || !out.lines().any(|l| l.trim() == "CONVERGED") {
            bail!(
                "verify{} {} against {}: exit {code}\n{out}",
                if live { " --live" } else { "" },
                replica.short,
                primary.short
            );
        }
        Ok(out)
    }
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Runs `cmd` in the container named `host` to its end (`docker exec`): exit code, standard
/// output then standard error. The CLI rather than testcontainers' exec, whose result
/// cannot be held across an await in a task that may move between threads.
async fn exec(host: &str, cmd: &[&str]) -> Result<(i32, String)> {
    let mut args = vec!["exec".to_string(), host.to_string()];
    args.extend(cmd.iter().map(|s| s.to_string()));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("docker").args(&args).output()
    })
    .await?
    .with_context(|| format!("docker exec {host} {cmd:?}"))?;
    Ok((
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

impl Node {
    /// The published address of the node's MySQL port (read again after a restart).
    pub(crate) fn addr(&self) -> SocketAddr {
        *self.addr.lock().expect("addr")
    }

    async fn refresh_addr(&self) -> Result<()> {
        let port = self
            .container
            .get_host_port_ipv4(3306)
            .await
            .with_context(|| format!("{}: published port", self.short))?;
        *self.addr.lock().expect("addr") = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        Ok(())
    }

    /// A root connection, given up after 10 s.
    pub(crate) async fn conn(&self) -> Result<Conn> {
        let addr = self.addr();
        tokio::time::timeout(Duration::from_secs(10), Conn::new(opts(addr)))
            .await
            .map_err(|_| anyhow!("{}: connect to {addr} timed out", self.short))?
            .with_context(|| format!("{}: connect to {addr}", self.short))
    }

    /// Waits until the node answers a query.
    pub(crate) async fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            let last = match self.conn().await {
                Ok(mut c) => match c.query_drop("SELECT 1").await {
                    Ok(()) => return Ok(()),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                bail!("{} not ready after {WAIT:?}: {last}", self.short);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One number from `sql`.
    pub(crate) async fn query_u64(&self, sql: &str) -> Result<Option<u64>> {
        let mut c = self.conn().await?;
        Ok(c.query_first(sql).await?)
    }

    /// The node's last binlog sequence number.
    pub(crate) async fn last_seq(&self) -> Result<u64> {
        self.query_u64("SELECT @@ringrep_last_seq")
            .await?
            .context("no @@ringrep_last_seq")
    }

    /// How far a replica has applied the primary's (server 1's) transactions.
    pub(crate) async fn applied_seq(&self) -> Result<u64> {
        self.applied_seq_of(1).await
    }

    /// How far a replica has applied the transactions of server `id` (0 when none).
    pub(crate) async fn applied_seq_of(&self, id: u32) -> Result<u64> {
        Ok(self
            .query_u64(&format!(
                "SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = {id}"
            ))
            .await?
            .unwrap_or(0))
    }

    /// Waits until the replica has applied the primary's transactions up to `seq`.
    pub(crate) async fn wait_applied(&self, seq: u64) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.applied_seq().await?;
            if got >= seq {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} at seq {got}, never {seq}", self.short);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs `statements` one after another as root.
    pub(crate) async fn sql(&self, statements: &[&str]) -> Result<()> {
        let mut c = self.conn().await?;
        for s in statements {
            c.query_drop(*s)
                .await
                .with_context(|| format!("{}: {s}", self.short))?;
        }
        Ok(())
    }

    /// The node's rings, meta rows included.
    pub(crate) async fn rings(&self) -> Result<NodeRings> {
        let mut c = self.conn().await?;
        c.query_drop("SET ndb_ring_buffer_show_meta = ON").await?;
        let rows: Vec<RingRow> = c
            .query("SELECT user_id, ring_idx, ring_meta, payload FROM test.events")
            .await
            .with_context(|| format!("{}: read the rings", self.short))?;
        NodeRings::from_rows(self.short.clone(), rows).map_err(|e| anyhow!("{}: {e}", self.short))
    }

    /// One value of the replica's metrics (`--metrics-listen 127.0.0.1:9100`), read inside
    /// its container, so it answers while the replica is cut off from every network.
    pub(crate) async fn metric(&self, name: &str) -> Result<Option<f64>> {
        let (code, out) = exec(
            &self.host,
            &[
                "bash",
                "-c",
                "exec 3<>/dev/tcp/127.0.0.1/9100 && printf 'GET /metrics HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' >&3 && cat <&3",
            ],
        )
        .await?;
        if code != 0 {
            bail!("{}: metrics: exit {code}: {out}", self.short);
        }
        Ok(out.lines().find_map(|l| {
            let (n, v) = l.split_once(' ')?;
            (n == name).then(|| v.trim().parse().ok()).flatten()
        }))
    }

    /// Waits until the metric `name` is `value`.
    pub(crate) async fn wait_metric(&self, name: &str, value: f64) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.metric(name).await?;
            if got == Some(value) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{}: {name} is {got:?}, never {value}", self.short);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (at most [`WAIT`]) until the counter `name` is at least `min`: for a count that
    /// a background task may raise more than once (retention runs every 10 s).
    pub(crate) async fn wait_counter(&self, name: &str, min: f64) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.metric(name).await?;
            if got.is_some_and(|v| v >= min) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{}: {name} is {got:?}, never {min} or more", self.short);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Freezes every process of the node (`docker pause`: the cgroup freezer, as SIGSTOP).
    pub(crate) async fn pause(&self) -> Result<()> {
        Ok(self.container.pause().await?)
    }

    /// Thaws the node.
    pub(crate) async fn unpause(&self) -> Result<()> {
        Ok(self.container.unpause().await?)
    }

    /// SIGKILL to the node's process (`docker kill`); its volume stays.
    pub(crate) fn kill(&self) -> Result<()> {
        docker(&["kill", "--signal", "KILL", &self.host]).map(drop)
    }

    /// Starts the stopped container again, on the same volume, and waits until it answers.
    pub(crate) async fn restart(&self) -> Result<()> {
        self.container.start().await?;
        self.refresh_addr().await?;
        self.wait_ready().await
    }

    /// What the node's process wrote to standard error and output (`docker logs`).
    pub(crate) fn logs(&self) -> Result<String> {
        let out = std::process::Command::new("docker")
            .args(["logs", &self.host])
            .output()
            .with_context(|| format!("docker logs {}", self.host))?;
        Ok(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    /// Runs `cmd` in the node's network namespace from this host (`nsenter`, as root): the
    /// container's own image has no `tc` or `iptables`, and needs no privileges.
    fn in_netns(&self, cmd: &[&str]) -> Result<()> {
        let pid = docker(&["inspect", "--format", "{{.State.Pid}}", &self.host])?;
        let out = std::process::Command::new("nsenter")
            .args(["-t", pid.trim(), "-n", "--"])
            .args(cmd)
            .output()
            .with_context(|| format!("nsenter {cmd:?} for {}", self.host))?;
        if !out.status.success() {
            bail!(
                "{}: {} failed (root and iproute2/iptables on the host are needed): {}",
                self.host,
                cmd.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// The node's address on the scenario's network.
    fn ip(&self) -> Result<String> {
        container_ip(&self.host)
    }

    /// Slows what this node sends to `to` down to `rate` (e.g. `256kbit`), leaving its other
    /// traffic (the test's clients) as it was: an HTB class for `to`'s address, chosen by a
    /// u32 filter (a tbf at the root would shape the clients' replies too). netem, which
    /// would add delay, is not in the kernel of these machines ("Specified qdisc kind is
    /// unknown").
    pub(crate) fn slow_link_to(&self, to: &Node, rate: &str) -> Result<()> {
        let dst = format!("{}/32", to.ip()?);
        self.in_netns(&[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10",
        ])?;
        self.in_netns(&[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
            "10gbit",
        ])?;
        self.in_netns(&[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate",
            rate, "ceil", rate,
        ])?;
        self.in_netns(&[
            "tc", "filter", "add", "dev", "eth0", "protocol", "ip", "parent", "1:0", "prio", "1",
            "u32", "match", "ip", "dst", &dst, "flowid", "1:20",
        ])
    }

    /// Drops each packet the node receives with probability `loss` (iptables' statistic
    /// match).
    pub(crate) fn drop_incoming(&self, loss: f64) -> Result<()> {
        self.in_netns(&[
            "iptables",
            "-A",
            "INPUT",
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            &loss.to_string(),
            "-j",
            "DROP",
        ])
    }

    /// Cuts the link between this node and the host at `ip` alone: every packet between the
    /// two addresses dropped in this node's namespace, its other links (the test's clients,
    /// its replicas) untouched.
    pub(crate) fn cut_from(&self, ip: &str) -> Result<()> {
        self.in_netns(&["iptables", "-A", "INPUT", "-s", ip, "-j", "DROP"])?;
        self.in_netns(&["iptables", "-A", "OUTPUT", "-d", ip, "-j", "DROP"])
    }

    /// Undoes [`Node::slow_link_to`], [`Node::drop_incoming`] and [`Node::cut_from`].
    pub(crate) fn heal(&self) -> Result<()> {
        // No shaping set is no error here: the default qdisc is back either way.
        let _ = self.in_netns(&["tc", "qdisc", "del", "dev", "eth0", "root"]);
        self.in_netns(&["iptables", "-F", "INPUT"])?;
        self.in_netns(&["iptables", "-F", "OUTPUT"])
    }

    /// Removes the node's container and its volume (`docker rm -f -v`): the host is gone.
    pub(crate) fn remove(&self) -> Result<()> {
        docker(&["rm", "-f", "-v", &self.host]).map(drop)
    }

    /// Cuts the node off the cluster's network (`docker network disconnect`).
    pub(crate) fn disconnect(&self, network: &str) -> Result<()> {
        docker(&["network", "disconnect", network, &self.host]).map(drop)
    }

    /// Connects the node to the network again; its name resolves as before.
    pub(crate) async fn reconnect(&self, network: &str) -> Result<()> {
        docker(&["network", "connect", network, &self.host])?;
        self.refresh_addr().await
    }
}

/// A container's address on the scenario's network.
fn container_ip(host: &str) -> Result<String> {
    let ip = docker(&[
        "inspect",
        "--format",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        host,
    ])?;
    Ok(ip.trim().to_string())
}

fn opts(addr: SocketAddr) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .db_name(Some("test"))
        .prefer_socket(false)
}

/// Writers inserting into the ring table through the primary's published port, each owning
/// its prefixes, recording every insert and how it ended.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    target: (SocketAddr, u32),
    tasks: Vec<JoinHandle<Vec<Write>>>,
}

/// An insert with no answer after this long is of unknown outcome (no scenario holds a
/// node still for that long, so an acknowledged write is never given up on).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Each writer's pause between inserts: about 4 x 100 inserts/s at most, which keeps two
/// cores free enough for the nodes.
const PACE: Duration = Duration::from_millis(10);

impl Load {
    /// Starts `writers` writers on `primary`, each with `users` prefixes of its own, their
    /// inserts marked as of `epoch`.
    pub(crate) fn start(primary: &Node, epoch: u32, writers: u32, users: u32) -> Load {
        let load = Load {
            stop: Arc::new(AtomicBool::new(false)),
            acked: Arc::new(AtomicUsize::new(0)),
            target: (primary.addr(), epoch),
            tasks: Vec::new(),
        };
        let tasks = (0..writers)
            .map(|w| {
                let mine: Vec<u32> = (0..users).map(|u| 1 + w + u * writers).collect();
                tokio::spawn(writer(
                    w,
                    mine,
                    load.stop.clone(),
                    load.acked.clone(),
                    load.target,
                ))
            })
            .collect();
        Load { tasks, ..load }
    }

    /// Inserts acknowledged so far.
    pub(crate) fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    /// Waits until `more` inserts past the current count are acknowledged.
    pub(crate) async fn wait_more(&self, more: usize) -> Result<()> {
        let want = self.acked() + more;
        let deadline = Instant::now() + WAIT;
        while self.acked() < want {
            if Instant::now() > deadline {
                bail!("load: {} inserts acknowledged, never {want}", self.acked());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Stops the writers and returns what they sent.
    pub(crate) async fn stop(self) -> Result<History> {
        self.stop.store(true, Ordering::Relaxed);
        let mut h = History::default();
        for t in self.tasks {
            h.extend(t.await.context("a writer panicked")?);
        }
        Ok(h)
    }
}

async fn writer(
    w: u32,
    users: Vec<u32>,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    (addr, epoch): (SocketAddr, u32),
) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut conn: Option<Conn> = None;
    // Prefixes whose last insert's outcome is unknown get no more inserts in this epoch, so
    // that each prefix's applied order is the order sent (history.rs).
    let mut unknown: BTreeSet<u32> = BTreeSet::new();
    let mut n = 0u64;
    let mut turn = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let live: Vec<u32> = users
            .iter()
            .copied()
            .filter(|u| !unknown.contains(u))
            .collect();
        if live.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let user = live[turn % live.len()];
        turn += 1;
        if conn.is_none() {
            match tokio::time::timeout(Duration::from_secs(10), Conn::new(opts(addr))).await {
                Ok(Ok(c)) => conn = Some(c),
                _ => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        let payload = format!("w{w}-u{user}-e{epoch}-{n}");
        n += 1;
        let r = tokio::time::timeout(
            WRITE_TIMEOUT,
            c.exec_drop(
                "INSERT INTO test.events (user_id, payload) VALUES (?, ?)",
                (user, payload.as_str()),
            ),
        )
        .await;
        let outcome = match r {
            Ok(Ok(())) => Outcome::Acked,
            // The server answered with an error: an autocommit insert that wrote nothing.
            Ok(Err(mysql_async::Error::Server(_))) => Outcome::Failed,
            _ => {
                conn = None;
                unknown.insert(user);
                Outcome::Unknown
            }
        };
        if outcome == Outcome::Acked {
            acked.fetch_add(1, Ordering::Relaxed);
        }
        writes.push(Write {
            user,
            epoch,
            payload,
            outcome,
        });
        tokio::time::sleep(PACE).await;
    }
    writes
}

/// Watches that replicas' applied positions never go backwards while the load runs.
pub(crate) struct SeqWatch {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<String>>,
    forget: Arc<Mutex<BTreeSet<String>>>,
}

impl SeqWatch {
    /// Polls each of `nodes` every 100 ms (a node that does not answer is skipped).
    pub(crate) fn start(nodes: Vec<Arc<Node>>) -> SeqWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let forget: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let (s, f) = (stop.clone(), forget.clone());
        let task = tokio::spawn(async move {
            let mut last: BTreeMap<String, u64> = BTreeMap::new();
            let mut problems = Vec::new();
            while !s.load(Ordering::Relaxed) {
                for n in &nodes {
                    if f.lock().expect("forget").remove(&n.short) {
                        last.remove(&n.short);
                    }
                    let Ok(Ok(seq)) =
                        tokio::time::timeout(Duration::from_secs(2), n.applied_seq()).await
                    else {
                        continue;
                    };
                    let before = last.insert(n.short.clone(), seq).unwrap_or(0);
                    if seq < before {
                        problems.push(format!(
                            "{}: applied seq went back from {before} to {seq}",
                            n.short
                        ));
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            problems
        });
        SeqWatch { stop, task, forget }
    }

    /// Starts `node` afresh: a replica killed with SIGKILL may lose the last few
    /// milliseconds it applied (its deferred fsync, docs/operations.md) and fetch them
    /// again, so its position may step back once across the crash.
    pub(crate) fn forget(&self, node: &Node) {
        self.forget
            .lock()
            .expect("forget")
            .insert(node.short.clone());
    }

    /// Stops watching; fails with every step back seen.
    pub(crate) async fn stop(mut self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let problems = (&mut self.task).await?;
        if !problems.is_empty() {
            bail!("sequence numbers went backwards:\n{}", problems.join("\n"));
        }
        Ok(())
    }
}

impl Drop for SeqWatch {
    /// A scenario that fails before `stop` still ends the watcher, which holds the nodes:
    /// their containers are removed when it lets go of them.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The end of every scenario: the load stopped, every replica caught up with the primary's
/// last sequence number (as `mysql.ringrep_apply_status` counts server `primary_id`'s), the
/// verifier's CONVERGED for each, and the history checked on every node (with `lossy_epoch`
/// after a failover). Returns the reports, printed; fails when any node fails.
pub(crate) async fn settle_and_check(
    cluster: &Cluster,
    primary: &Node,
    primary_id: u32,
    replicas: &[&Node],
    history: &History,
    lossy_epoch: Option<u32>,
) -> Result<Vec<Report>> {
    let seq = primary.last_seq().await?;
    for r in replicas {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = r.applied_seq_of(primary_id).await.unwrap_or(0);
            if got == seq {
                break;
            }
            if got > seq {
                bail!("{} applied {got}, past the primary's {seq}", r.short);
            }
            if Instant::now() > deadline {
                bail!(
                    "{} at {got}, never caught up with the primary's {seq}",
                    r.short
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for r in replicas {
        let out = cluster.verify(primary, r).await?;
        let summary = out
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        println!(
            "    verify {} against {}: CONVERGED ({summary})",
            r.short, primary.short
        );
    }
    let opts = CheckOptions {
        ring_size: RING_SIZE,
        lossy_epoch,
    };
    let mut reports = Vec::new();
    for n in std::iter::once(primary).chain(replicas.iter().copied()) {
        reports.push(history::check(history, &n.rings().await?, opts));
    }
    for r in &reports {
        println!("    {r}");
    }
    if reports.iter().any(|r| !r.ok()) {
        bail!("the history check failed (reports above)");
    }
    let acked = history.count(Outcome::Acked);
    if let Some(r) = reports.iter().find(|r| r.acked_held + r.lost != acked) {
        bail!(
            "{}: {} acknowledged inserts held and {} lost, of {acked} acknowledged",
            r.node,
            r.acked_held,
            r.lost
        );
    }
    Ok(reports)
}
