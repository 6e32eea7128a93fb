//! Server settings from flags, environment variables and a TOML file, in that order of
//! precedence, over documented defaults (docs/operations.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio_rustls::rustls::ServerConfig;

use super::Accounts;

/// The server flags both nodes take.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on (a primary's default is 127.0.0.1:3306; a replica serves clients
    /// only when this is given, 127.0.0.1:3307 being the usual choice; port 0 picks a free
    /// port).
    #[arg(long, env = "RINGREP_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Password of the `root` account. Without one, root has no password and the server
    /// listens on loopback only.
    #[arg(long, env = "RINGREP_ROOT_PASSWORD", hide_env_values = true)]
    pub root_password: Option<String>,
    /// Most client connections at once (default 151, as MySQL); one more gets error 1040.
    #[arg(long, env = "RINGREP_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Seconds a reply may wait for a client that does not read it before the connection is
    /// closed (its transaction rolled back), as MySQL's net_write_timeout (default 60)
    /// [config: net_write_timeout].
    #[arg(long, env = "RINGREP_NET_WRITE_TIMEOUT")]
    pub net_write_timeout: Option<u64>,
    /// A TOML configuration file (see docs/operations.md).
    #[arg(long, env = "RINGREP_CONFIG")]
    pub config: Option<PathBuf>,
    /// PEM certificate chain for TLS; with --tls-key, clients may connect with TLS.
    #[arg(long, env = "RINGREP_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "RINGREP_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Take an automatic snapshot after this many transactions (default 100000; 0: never),
    /// which bounds how much binlog a restart replays [config: snapshot_every].
    #[arg(long, env = "RINGREP_SNAPSHOT_EVERY")]
    pub snapshot_every: Option<u64>,
    /// ...and not before the binlog written since the last snapshot is this percentage of
    /// that snapshot's size (default 100; 0: by --snapshot-every alone), so that snapshots of
    /// a large state cost no more writing than the binlog [config: snapshot_log_percent].
    #[arg(long, env = "RINGREP_SNAPSHOT_LOG_PERCENT")]
    pub snapshot_log_percent: Option<u64>,
    /// Serve `GET /metrics` (Prometheus' text format) on this address [config:
    /// metrics_listen]. A replica serves it when it also serves clients (--listen).
    #[arg(long, env = "RINGREP_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// The size at which the binlog starts a new segment file, in bytes, with an optional K,
    /// M or G (default 64M) [config: max_binlog_size].
    #[arg(long, env = "RINGREP_MAX_BINLOG_SIZE")]
    pub max_binlog_size: Option<String>,
    /// Binlog segments last written longer ago than this many seconds are removed (default
    /// 2592000, 30 days, as MySQL; 0: no age limit) [config: binlog_expire_logs_seconds].
    #[arg(long, env = "RINGREP_BINLOG_EXPIRE_LOGS_SECONDS")]
    pub binlog_expire_logs_seconds: Option<u64>,
    /// While the binlog is larger than this (bytes, K, M or G), its oldest segments are
    /// removed (default 8G; 0: no size limit); those a connected replica or the Kafka relay
    /// still needs are kept up to twice this [config: binlog_retention_size].
    #[arg(long, env = "RINGREP_BINLOG_RETENTION_SIZE")]
    pub binlog_retention_size: Option<String>,
}

/// A byte count as flags and the file give it: a number, or text with K, M or G.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ByteSize {
    /// A plain number of bytes.
    Bytes(u64),
    /// `512K`, `64M`, `8G` (or a number as text).
    Text(String),
}

/// Parses `64M`-style sizes (K, M, G: powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (a number, with K, M or G)"))?;
    let mul: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(format!("{text:?} is not a size (a number, with K, M or G)")),
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("{text:?} is too large"))
}

impl ByteSize {
    fn bytes(&self) -> Result<u64, String> {
        match self {
            ByteSize::Bytes(n) => Ok(*n),
            ByteSize::Text(t) => parse_size(t),
        }
    }
}

impl ServeArgs {
    /// The binlog's segment size and retention: flags over the file over the defaults.
    pub fn binlog(&self, file: &FileConfig) -> Result<(u64, ringrep_engine::Retention), String> {
        let size = |flag: &Option<String>, key: &Option<ByteSize>| -> Result<Option<u64>, String> {
            match (flag, key) {
                (Some(f), _) => parse_size(f).map(Some),
                (None, Some(k)) => k.bytes().map(Some),
                (None, None) => Ok(None),
            }
        };
        let segment = size(&self.max_binlog_size, &file.max_binlog_size)?
            .unwrap_or(binlog_format::format::DEFAULT_SEGMENT_BYTES);
        // MySQL's bounds for max_binlog_size: 4 KiB to 1 GiB.
        if !(4096..=1 << 30).contains(&segment) {
            return Err(format!(
                "max_binlog_size must be between 4096 and 1G bytes, not {segment}"
            ));
        }
        let mut retention = ringrep_engine::Retention::default();
        if let Some(secs) = self
            .binlog_expire_logs_seconds
            .or(file.binlog_expire_logs_seconds)
        {
            retention.expire = (secs > 0).then(|| std::time::Duration::from_secs(secs));
        }
        if let Some(bytes) = size(&self.binlog_retention_size, &file.binlog_retention_size)? {
            retention.max_bytes = (bytes > 0).then_some(bytes);
            retention.hard_cap_bytes = (bytes > 0).then_some(bytes.saturating_mul(2));
        }
        Ok((segment, retention))
    }
}

impl ServeArgs {
    /// `--metrics-listen`, else the file's `metrics_listen`.
    pub fn metrics_listen(&self, file: &FileConfig) -> Option<SocketAddr> {
        self.metrics_listen.or(file.metrics_listen)
    }
}

impl ServeArgs {
    /// `--snapshot-every`, else the file's `snapshot_every`; `None` keeps the engine's default.
    pub fn snapshot_every(&self, file: &FileConfig) -> Option<u64> {
        self.snapshot_every.or(file.snapshot_every)
    }

    /// `--snapshot-log-percent`, else the file's `snapshot_log_percent`.
    pub fn snapshot_log_percent(&self, file: &FileConfig) -> Option<u64> {
        self.snapshot_log_percent.or(file.snapshot_log_percent)
    }
}

/// The TOML file. Every key is optional; flags and environment variables win over it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The data directory (`--data-dir`).
    pub data_dir: Option<PathBuf>,
    /// The address to serve the MySQL protocol on (`--listen`).
    pub listen: Option<SocketAddr>,
    /// This node's server id (`--server-id`), the origin of its binlog records.
    pub server_id: Option<u32>,
    /// Binlog sync policy: "commit", "never" or a number of milliseconds.
    pub sync: Option<String>,
    /// Client connections served at once; more are refused with error 1040.
    pub max_connections: Option<usize>,
    /// Seconds a reply may wait for a client that does not read it (`--net-write-timeout`).
    pub net_write_timeout: Option<u64>,
    /// root's password; without one root has none and the node serves loopback only.
    pub root_password: Option<String>,
    /// PEM certificate chain and private key: clients may then connect with TLS.
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key that goes with `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Transactions between automatic snapshots (0: never).
    pub snapshot_every: Option<u64>,
    /// The binlog an automatic snapshot also waits for, in percent of the last one's size.
    pub snapshot_log_percent: Option<u64>,
    /// Where `GET /metrics` is served (`--metrics-listen`).
    pub metrics_listen: Option<SocketAddr>,
    /// The binlog segment size (`--max-binlog-size`): bytes, or text such as "64M".
    pub max_binlog_size: Option<ByteSize>,
    /// Age in seconds after which binlog segments go (`--binlog-expire-logs-seconds`).
    pub binlog_expire_logs_seconds: Option<u64>,
    /// The binlog size past which its oldest segments go (`--binlog-retention-size`).
    pub binlog_retention_size: Option<ByteSize>,
    /// More accounts: `[[users]]` tables with `name` and `password`.
    #[serde(default)]
    pub users: Vec<UserConfig>,
}

/// One account of the `[[users]]` list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// The user name.
    pub name: String,
    /// The password (empty: none).
    #[serde(default)]
    pub password: String,
}

impl FileConfig {
    /// The file `--config` names, or an empty configuration without one.
    pub fn for_args(args: &ServeArgs) -> Result<FileConfig, String> {
        args.config
            .as_deref()
            .map_or_else(|| Ok(FileConfig::default()), FileConfig::load)
    }

    /// Reads and parses the TOML file at `path`; unknown keys are errors.
    pub fn load(path: &Path) -> Result<FileConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading config {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("config {}: {e}", path.display()))
    }
}

/// What the server runs with.
#[derive(Clone)]
pub struct ServerSettings {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The accounts clients log in with.
    pub accounts: Accounts,
    /// Client connections served at once.
    pub max_connections: usize,
    /// How long a reply may wait for a client that does not read it.
    pub net_write_timeout: std::time::Duration,
    /// Offered to clients that ask for TLS.
    pub tls: Option<Arc<ServerConfig>>,
}

impl std::fmt::Debug for ServerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSettings")
            .field("listen", &self.listen)
            .field("max_connections", &self.max_connections)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// A rustls server configuration from PEM files.
pub fn load_tls(cert: &Path, key: &Path) -> Result<ServerConfig, String> {
    let open = |p: &Path| {
        std::fs::File::open(p)
            .map(std::io::BufReader::new)
            .map_err(|e| format!("TLS: reading {}: {e}", p.display()))
    };
    let certs = rustls_pemfile::certs(&mut open(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("TLS: {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("TLS: no certificate in {}", cert.display()));
    }
    let key_der = rustls_pemfile::private_key(&mut open(key)?)
        .map_err(|e| format!("TLS: {}: {e}", key.display()))?
        .ok_or_else(|| format!("TLS: no private key in {}", key.display()))?;
    ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("TLS: {} and {}: {e}", cert.display(), key.display()))
}

/// MySQL's default `net_write_timeout`.
pub const DEFAULT_NET_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// MySQL's default `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 151;

impl ServerSettings {
    /// Where a primary listens by default: loopback, MySQL's port.
    pub const DEFAULT_PRIMARY_LISTEN: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 3306);
    /// Where a replica listens by default: loopback, the port after MySQL's.
    pub const DEFAULT_REPLICA_LISTEN: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 3307);

    /// Loopback on `port`, root without a password: for tests and the demo.
    pub fn local(port: u16) -> ServerSettings {
        let mut accounts = Accounts::default();
        accounts.add("root", "");
        ServerSettings {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            accounts,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            net_write_timeout: DEFAULT_NET_WRITE_TIMEOUT,
            tls: None,
        }
    }

    /// Flags (and their environment variables) over the file over the defaults.
    pub fn resolve(
        args: &ServeArgs,
        file: &FileConfig,
        default_listen: SocketAddr,
    ) -> Result<ServerSettings, String> {
        let mut accounts = Accounts::default();
        for u in &file.users {
            if u.name.is_empty() {
                return Err("config: a [[users]] entry has an empty name".into());
            }
            if u.name == "root" {
                return Err("config: set root's password with root_password, not [[users]]".into());
            }
            accounts.add(&u.name, &u.password);
        }
        let root = args
            .root_password
            .as_deref()
            .or(file.root_password.as_deref())
            .unwrap_or("");
        accounts.add("root", root);
        let max_connections = args
            .max_connections
            .or(file.max_connections)
            .unwrap_or(DEFAULT_MAX_CONNECTIONS);
        if max_connections == 0 {
            return Err("max_connections must be at least 1".into());
        }
        let net_write_timeout = match args.net_write_timeout.or(file.net_write_timeout) {
            None => DEFAULT_NET_WRITE_TIMEOUT,
            Some(0) => return Err("net_write_timeout must be at least 1 second".into()),
            Some(s) => std::time::Duration::from_secs(s),
        };
        let tls = match (
            args.tls_cert.as_ref().or(file.tls_cert.as_ref()),
            args.tls_key.as_ref().or(file.tls_key.as_ref()),
        ) {
            (Some(c), Some(k)) => Some(Arc::new(load_tls(c, k)?)),
            (None, None) => None,
            _ => return Err("TLS needs both a certificate and a key (tls_cert, tls_key)".into()),
        };
        Ok(ServerSettings {
            listen: args.listen.or(file.listen).unwrap_or(default_listen),
            accounts,
            max_connections,
            net_write_timeout,
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let file: FileConfig = toml::from_str(
            "listen = \"127.0.0.1:4000\"\nmax_connections = 5\nroot_password = \"f\"\n[[users]]\nname = \"app\"\npassword = \"p\"\n",
        )
        .expect("toml");
        let default = SocketAddr::from(([127, 0, 0, 1], 3306));
        let s = ServerSettings::resolve(&ServeArgs::default(), &file, default).expect("resolve");
        assert_eq!(s.listen.port(), 4000);
        assert_eq!(s.max_connections, 5);
        assert!(!s.accounts.passwordless("root"));
        let args = ServeArgs {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 5000))),
            max_connections: Some(9),
            ..Default::default()
        };
        let s = ServerSettings::resolve(&args, &file, default).expect("resolve");
        assert_eq!((s.listen.port(), s.max_connections), (5000, 9));
        let s = ServerSettings::resolve(&ServeArgs::default(), &FileConfig::default(), default)
            .expect("resolve");
        assert_eq!(s.listen, default);
        assert!(s.accounts.passwordless("root"));
    }

    #[test]
    fn snapshot_interval_comes_from_the_flag_then_the_file() {
        let file: FileConfig = toml::from_str("snapshot_every = 50").expect("toml");
        assert_eq!(ServeArgs::default().snapshot_every(&file), Some(50));
        let args = ServeArgs {
            snapshot_every: Some(0),
            ..Default::default()
        };
        assert_eq!(args.snapshot_every(&file), Some(0));
        assert_eq!(
            ServeArgs::default().snapshot_every(&FileConfig::default()),
            None
        );
    }

    #[test]
    fn binlog_sizes_and_retention_from_flags_and_file() {
        let file: FileConfig = toml::from_str(
            "max_binlog_size = \"1M\"\nbinlog_expire_logs_seconds = 60\nbinlog_retention_size = 1048576000\n",
        )
        .expect("toml");
        let (segment, r) = ServeArgs::default().binlog(&file).expect("binlog");
        assert_eq!(segment, 1 << 20);
        assert_eq!(r.expire, Some(std::time::Duration::from_secs(60)));
        assert_eq!(r.max_bytes, Some(1_048_576_000));
        assert_eq!(r.hard_cap_bytes, Some(2_097_152_000));
        let args = ServeArgs {
            max_binlog_size: Some("8k".into()),
            binlog_expire_logs_seconds: Some(0),
            binlog_retention_size: Some("0".into()),
            ..Default::default()
        };
        let (segment, r) = args.binlog(&file).expect("binlog");
        assert_eq!(segment, 8192);
        assert_eq!(
            (r.expire, r.max_bytes, r.hard_cap_bytes),
            (None, None, None)
        );
        let (segment, r) = ServeArgs::default()
            .binlog(&FileConfig::default())
            .expect("defaults");
        assert_eq!(segment, 64 << 20);
        assert_eq!(r, ringrep_engine::Retention::default());
        let bad = ServeArgs {
            max_binlog_size: Some("12X".into()),
            ..Default::default()
        };
        assert!(bad.binlog(&FileConfig::default()).is_err());
        let small = ServeArgs {
            max_binlog_size: Some("100".into()),
            ..Default::default()
        };
        assert!(small.binlog(&FileConfig::default()).is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(toml::from_str::<FileConfig>("lisen = \"x\"").is_err());
        assert!(toml::from_str::<FileConfig>("listen = \"nowhere\"").is_err());
        let zero = FileConfig {
            max_connections: Some(0),
            ..Default::default()
        };
        let d = SocketAddr::from(([127, 0, 0, 1], 1));
        assert!(ServerSettings::resolve(&ServeArgs::default(), &zero, d).is_err());
    }
}
