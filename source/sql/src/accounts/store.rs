//! The account tables, `mysql.user` and `mysql.ringrep_grants`, and what is read from them:
//! the account a client logs in as ([`Directory::login`]) and its [`Grants`].
//!
//! ```text
//! mysql.user            (Host, User) -> plugin, authentication_string, account_locked
//! mysql.ringrep_grants  (Host, User, Db, Table_name) -> Privileges
//! ```
//!
//! `authentication_string` is MySQL's: `*` and the upper-case hex of SHA1(SHA1(password)),
//! empty for no password. A grants row with `Db = ''` is global (`*.*`), with `Table_name =
//! ''` database-wide (`db.*`); `Privileges` lists names as SHOW GRANTS spells them, joined by
//! commas.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use binlog_format::schema::{ColumnDef, ColumnDefault, ColumnType, TableDef};
use binlog_format::Value;
use ringrep_engine::ddl::system_table;
use ringrep_engine::error::Result;
use ringrep_engine::{Engine, Session, SYSTEM_DB};

use super::{AccountName, Grants, Privs};

/// The accounts table.
pub const USER_TABLE: &str = "user";
/// The grants table.
pub const GRANTS_TABLE: &str = "ringrep_grants";

/// One account of `mysql.user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// `user@host`.
    pub name: AccountName,
    /// SHA1(SHA1(password)); `None` for no password.
    pub hash: Option<[u8; 20]>,
    /// SHA256(SHA256(password)), for `caching_sha2_password` clients; `None` when only the
    /// native hash is known (an account made `AS '*HASH'`: such clients are asked for
    /// `mysql_native_password` instead) or there is no password.
    pub sha2: Option<[u8; 32]>,
    /// `ACCOUNT LOCK`: logins are refused.
    pub locked: bool,
}

/// SHA1(SHA1(password)), what `mysql_native_password` keeps; `None` for an empty password.
pub fn password_hash(password: &str) -> Option<[u8; 20]> {
    if password.is_empty() {
        return None;
    }
    let stage1 = sha1_smol::Sha1::from(password.as_bytes()).digest().bytes();
    Some(sha1_smol::Sha1::from(stage1).digest().bytes())
}

/// SHA256(SHA256(password)), what `caching_sha2_password`'s fast authentication checks;
/// `None` for an empty password.
pub fn sha2_hash(password: &str) -> Option<[u8; 32]> {
    use sha2::Digest;
    if password.is_empty() {
        return None;
    }
    let once: [u8; 32] = sha2::Sha256::digest(password.as_bytes()).into();
    Some(sha2::Sha256::digest(once).into())
}

/// `*` and 40 upper-case hex digits, or empty.
pub fn hash_text(hash: Option<[u8; 20]>) -> String {
    match hash {
        None => String::new(),
        Some(h) => {
            let mut s = String::from("*");
            for b in h {
                s.push_str(&format!("{b:02X}"));
            }
            s
        }
    }
}

/// The hash an `authentication_string` holds (`Some(None)` for no password), or `None` for
/// text that is not one.
pub fn parse_hash_text(text: &str) -> Option<Option<[u8; 20]>> {
    if text.is_empty() {
        return Some(None);
    }
    let hex = text.strip_prefix('*')?;
    if hex.len() != 40 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(Some(out))
}

fn varchar(name: &str, len: u32) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        ty: ColumnType::VarChar { len },
        nullable: false,
        default: ColumnDefault::Value(Value::Text(String::new())),
        on_update_now: false,
        auto_increment: false,
        comment: String::new(),
    }
}

fn user_def() -> TableDef {
    system_table(
        USER_TABLE,
        vec![
            varchar("Host", 255),
            varchar("User", 32),
            varchar("plugin", 64),
            varchar("authentication_string", 64),
            varchar("account_locked", 1),
            varchar("ringrep_sha2", 64),
        ],
        2,
    )
}

fn grants_def() -> TableDef {
    system_table(
        GRANTS_TABLE,
        vec![
            varchar("Host", 255),
            varchar("User", 32),
            varchar("Db", 64),
            varchar("Table_name", 64),
            varchar("Privileges", 1024),
        ],
        4,
    )
}

/// The two tables' definitions, created (with database `mysql`) the first time.
pub(crate) fn ensure_tables(session: &mut Session) -> Result<(TableDef, TableDef)> {
    if !session.engine().with_state(|st| st.has_database(SYSTEM_DB)) {
        session.create_database(SYSTEM_DB, true)?;
    }
    let mut defs = Vec::new();
    for def in [user_def(), grants_def()] {
        let name = def.name.clone();
        if session.engine().table_def(SYSTEM_DB, &name).is_none() {
            session.create_table(def, true)?;
        }
        defs.push(session.table_def(Some(SYSTEM_DB), &name)?);
    }
    let grants = defs.pop().expect("two tables");
    let user = defs.pop().expect("two tables");
    Ok((user, grants))
}

/// The account row of `a`.
pub(crate) fn account_row(a: &Account) -> Vec<Value> {
    vec![
        Value::Text(a.name.host.clone()),
        Value::Text(a.name.user.clone()),
        Value::Text("mysql_native_password".into()),
        Value::Text(hash_text(a.hash)),
        Value::Text(if a.locked { "Y" } else { "N" }.into()),
        Value::Text(a.sha2.map(|h| hex(&h)).unwrap_or_default()),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The grants row of `who` at level (`db`, `table`), `""` standing for `*`.
pub(crate) fn grants_row(who: &AccountName, db: &str, table: &str, p: Privs) -> Vec<Value> {
    vec![
        Value::Text(who.host.clone()),
        Value::Text(who.user.clone()),
        Value::Text(db.into()),
        Value::Text(table.into()),
        Value::Text(p.stored()),
    ]
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::Text(s)) => s.clone(),
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

/// Which versions of the two tables a [`Directory`] was read at: (table id, version), `None`
/// where the table did not exist.
type Versions = [Option<(u64, u64)>; 2];

/// Everything the account tables say, read at one moment.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    /// The accounts, most specific host first (the order logins are matched in).
    pub accounts: Vec<Account>,
    /// Each account's grants.
    pub grants: BTreeMap<AccountName, Grants>,
    versions: Versions,
}

impl Directory {
    /// Reads both tables.
    pub fn read(engine: &Engine) -> Directory {
        engine.with_state(|st| {
            let mut dir = Directory::default();
            if let Some(t) = st.table(SYSTEM_DB, USER_TABLE) {
                dir.versions[0] = Some((t.def.id, t.version()));
                for (_, row) in t.iter() {
                    let name = AccountName {
                        host: text(row.first()),
                        user: text(row.get(1)),
                    };
                    dir.accounts.push(Account {
                        hash: parse_hash_text(&text(row.get(3))).unwrap_or(Some([0; 20])),
                        sha2: unhex32(&text(row.get(5))),
                        locked: text(row.get(4)) == "Y",
                        name,
                    });
                }
            }
            if let Some(t) = st.table(SYSTEM_DB, GRANTS_TABLE) {
                dir.versions[1] = Some((t.def.id, t.version()));
                for (_, row) in t.iter() {
                    let who = AccountName {
                        host: text(row.first()),
                        user: text(row.get(1)),
                    };
                    let (db, table) = (text(row.get(2)), text(row.get(3)));
                    let p = Privs::from_stored(&text(row.get(4)));
                    let g = dir.grants.entry(who).or_default();
                    // Rows written by hand may repeat a level in another case: one entry each.
                    let (db, table) = (db.to_lowercase(), table.to_lowercase());
                    match (db.is_empty(), table.is_empty()) {
                        (true, _) => g.global = g.global | p,
                        (false, true) => match g.databases.iter_mut().find(|(d, _)| *d == db) {
                            Some((_, have)) => *have = *have | p,
                            None => g.databases.push((db, p)),
                        },
                        (false, false) => {
                            let key = (db, table);
                            match g.tables.iter_mut().find(|(k, _)| *k == key) {
                                Some((_, have)) => *have = *have | p,
                                None => g.tables.push((key, p)),
                            }
                        }
                    }
                }
            }
            dir.accounts
                .sort_by_key(|a| (host_rank(&a.name.host), a.name.clone()));
            dir
        })
    }

    /// Whether the tables are as they were when this was read.
    pub fn is_current(&self, engine: &Engine) -> bool {
        engine.with_state(|st| {
            [USER_TABLE, GRANTS_TABLE]
                .iter()
                .zip(self.versions)
                .all(|(name, v)| match v {
                    Some((id, version)) => {
                        st.tables.get(&id).is_some_and(|t| t.version() == version)
                    }
                    None => st.table(SYSTEM_DB, name).is_none(),
                })
        })
    }

    /// The account `user` logs in as from `peer`: the most specific host that matches.
    pub fn login(&self, user: &str, peer: IpAddr) -> Option<&Account> {
        self.accounts
            .iter()
            .find(|a| a.name.user == user && host_matches(&a.name.host, peer))
    }

    /// The account named exactly `name`.
    pub fn get(&self, name: &AccountName) -> Option<&Account> {
        self.accounts.iter().find(|a| same_account(&a.name, name))
    }

    /// The grants of `name` (none when it has no row).
    pub fn grants_of(&self, name: &AccountName) -> Grants {
        self.grants
            .iter()
            .find(|(n, _)| same_account(n, name))
            .map(|(_, g)| g.clone())
            .unwrap_or_default()
    }
}

/// Whether two account names are one account: hosts compare without case, as MySQL's do;
/// users by the text collation, without case or accents, as the accounts table's key does
/// (MySQL compares them exactly). So `'bob'` beside `'Bob'` is the same account for CREATE
/// USER (1396) and GRANT, while a login still gives the stored name exactly.
pub(crate) fn same_account(a: &AccountName, b: &AccountName) -> bool {
    binlog_format::collation::eq(&a.user, &b.user) && a.host.eq_ignore_ascii_case(&b.host)
}

/// How specific a host pattern is; lower sorts first: literal hosts, then patterns by the
/// length of their literal start, then `%` alone.
fn host_rank(host: &str) -> (u8, std::cmp::Reverse<usize>) {
    match host.find(['%', '_']) {
        None => (0, std::cmp::Reverse(host.len())),
        Some(_) if host == "%" || host.is_empty() => (2, std::cmp::Reverse(0)),
        Some(i) => (1, std::cmp::Reverse(i)),
    }
}

/// Whether the host pattern admits a client at `peer`. Names are not resolved (as with
/// MySQL's `skip_name_resolve`): `localhost` stands for the loopback addresses, any other
/// name matches nothing.
pub fn host_matches(pattern: &str, peer: IpAddr) -> bool {
    if pattern.is_empty() || pattern == "%" {
        return true;
    }
    if pattern.eq_ignore_ascii_case("localhost") {
        return peer.is_loopback();
    }
    let ip = match peer {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        IpAddr::V4(v4) => v4.to_string(),
    };
    like(pattern.as_bytes(), ip.as_bytes())
}

/// SQL LIKE without escapes: `%` any run, `_` one character.
fn like(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'%', rest)) => (0..=s.len()).any(|i| like(rest, &s[i..])),
        Some((b'_', rest)) => !s.is_empty() && like(rest, &s[1..]),
        Some((c, rest)) => {
            s.first().is_some_and(|x| x.eq_ignore_ascii_case(c)) && like(rest, &s[1..])
        }
    }
}

/// The account tables as last read, read again when either table changes (its version
/// moves on every write, on the primary through account statements and on a replica through
/// the applier). Shared by a server's connections.
#[derive(Debug, Default)]
pub struct Cache {
    current: Mutex<Option<Arc<Directory>>>,
}

impl Cache {
    /// The directory as the tables stand now.
    pub fn get(&self, engine: &Engine) -> Arc<Directory> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        match current.as_ref() {
            Some(d) if d.is_current(engine) => d.clone(),
            _ => {
                let fresh = Arc::new(Directory::read(engine));
                *current = Some(fresh.clone());
                fresh
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_as_mysql_patterns_do() {
        let lo: IpAddr = "127.0.0.1".parse().expect("ip");
        let other: IpAddr = "10.1.2.3".parse().expect("ip");
        assert!(host_matches("%", other));
        assert!(host_matches("localhost", lo));
        assert!(host_matches("localhost", "::1".parse().expect("ip")));
        assert!(!host_matches("localhost", other));
        assert!(host_matches("10.1.%", other));
        assert!(host_matches("10.1.2._", other));
        assert!(!host_matches("10.2.%", other));
        assert!(host_matches(
            "127.0.0.1",
            "::ffff:127.0.0.1".parse().expect("ip")
        ));
        assert!(!host_matches("db.example", other), "names are not resolved");
        let mut hosts = vec!["%", "10.1.%", "localhost", "10.%"];
        hosts.sort_by_key(|h| host_rank(h));
        assert_eq!(hosts, ["localhost", "10.1.%", "10.%", "%"]);
    }

    #[test]
    fn hashes_are_mysqls() {
        // SELECT PASSWORD('secret') on MySQL 5.7.
        assert_eq!(
            hash_text(password_hash("secret")),
            "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
        );
        assert_eq!(hash_text(password_hash("")), "");
        let h = password_hash("x");
        assert_eq!(parse_hash_text(&hash_text(h)), Some(h));
        assert!(parse_hash_text("*12").is_none());
        assert!(parse_hash_text("plain").is_none());
    }
}
