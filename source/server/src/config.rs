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
    /// Serve `GET /metrics` (Prometheus' text format) on this address [config:
    /// metrics_listen]. A replica serves it when it also serves clients (--listen).
    #[arg(long, env = "RINGREP_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
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
    /// root's password; without one root has none and the node serves loopback only.
    pub root_password: Option<String>,
    /// PEM certificate chain and private key: clients may then connect with TLS.
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key that goes with `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Transactions between automatic snapshots (0: never).
    pub snapshot_every: Option<u64>,
    /// Where `GET /metrics` is served (`--metrics-listen`).
    pub metrics_listen: Option<SocketAddr>,
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
