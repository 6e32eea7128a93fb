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
//!
//! Column and routine privileges came later and keep the table's columns, so rows written
//! before them read as they did:
//!
//! - A table's row lists its column privileges after its own, each as the privilege's name
//!   and its columns backquoted in parentheses: ``SELECT,SELECT (`a`,`b`),INSERT (`c`)``
//!   (MySQL's `tables_priv.Table_priv` and `columns_priv` in one text). A row may hold column
//!   privileges only. A version without column privileges skips those entries as unknown
//!   names, so it grants less, never more.
//! - A stored procedure's row has `Table_name` `` procedure `name` `` (see `routine_key`):
//!   no table is named so unless made on purpose, and a version without routine privileges
//!   reads it as a grant on a table that does not exist.

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
    grants_row_text(who, db, table, p.stored())
}

/// The grants row of `who` on table `db.table` with column privileges `columns`.
pub(crate) fn table_grants_row(
    who: &AccountName,
    db: &str,
    table: &str,
    p: Privs,
    columns: &[(String, Privs)],
) -> Vec<Value> {
    grants_row_text(who, db, table, table_privileges_text(p, columns))
}

fn grants_row_text(who: &AccountName, db: &str, table: &str, privileges: String) -> Vec<Value> {
    vec![
        Value::Text(who.host.clone()),
        Value::Text(who.user.clone()),
        Value::Text(db.into()),
        Value::Text(table.into()),
        Value::Text(privileges),
    ]
}

/// The `Table_name` of a grant on stored procedure `name` (in lower case, as names are kept):
/// `` procedure `name` ``.
pub(crate) fn routine_key(name: &str) -> String {
    format!("procedure {}", super::quote_ident(&name.to_lowercase()))
}

/// The procedure a `Table_name` (in lower case) names, if it is a routine grant's.
fn routine_of_key(table: &str) -> Option<String> {
    let quoted = table.strip_prefix("procedure `")?.strip_suffix('`')?;
    Some(quoted.replace("``", "`"))
}

/// A table row's `Privileges`: the table's privileges, then each column privilege with its
/// columns (``SELECT,INSERT (`a`,`b`)``), in MySQL's order of privileges.
pub(crate) fn table_privileges_text(p: Privs, columns: &[(String, Privs)]) -> String {
    let mut parts = Vec::new();
    if !p.is_empty() {
        parts.push(p.stored());
    }
    for bit in [
        Privs::SELECT,
        Privs::INSERT,
        Privs::UPDATE,
        Privs::REFERENCES,
    ] {
        let cols: Vec<String> = columns
            .iter()
            .filter(|(_, cp)| cp.contains(bit))
            .map(|(c, _)| super::quote_ident(&escape_commas(c)))
            .collect();
        if !cols.is_empty() {
            parts.push(format!("{} ({})", bit.first_name(), cols.join(",")));
        }
    }
    parts.join(",")
}

/// A column name with no comma in it: `\` and `,` written `\x5c` and `\x2c`. A version
/// without column privileges splits the text at every comma, and must find no privilege's
/// name between two (a column named `` a`,SUPER,`b `` would otherwise read as SUPER there).
fn escape_commas(name: &str) -> String {
    name.replace('\\', "\\x5c").replace(',', "\\x2c")
}

fn unescape_commas(name: &str) -> String {
    name.replace("\\x2c", ",").replace("\\x5c", "\\")
}

/// What a table row's `Privileges` says: the table's privileges and each column's.
pub(crate) fn parse_table_privileges(text: &str) -> (Privs, Vec<(String, Privs)>) {
    let mut table = Privs::NONE;
    let mut columns: Vec<(String, Privs)> = Vec::new();
    for item in split_items(text) {
        let Some(open) = item.find('(') else {
            table = table | Privs::from_stored(&item);
            continue;
        };
        let Some(p) = Privs::parse(&item[..open].split_whitespace().collect::<Vec<_>>()) else {
            // A privilege this version does not know: left out, as from_stored does.
            continue;
        };
        for c in backquoted_names(&item[open..])
            .iter()
            .map(|c| unescape_commas(c))
        {
            match columns.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(&c)) {
                Some((_, have)) => *have = *have | p,
                None => columns.push((c, p)),
            }
        }
    }
    (table, columns)
}

/// `text` split at the commas outside backquotes and parentheses.
fn split_items(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut quoted, mut cur) = (0usize, false, String::new());
    for c in text.chars() {
        match c {
            '`' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            ',' if !quoted && depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

/// The backquoted names in `text` (a doubled backquote is one backquote of the name).
fn backquoted_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '`' {
            continue;
        }
        let mut name = String::new();
        while let Some(c) = chars.next() {
            if c == '`' {
                if chars.peek() == Some(&'`') {
                    chars.next();
                    name.push('`');
                    continue;
                }
                break;
            }
            name.push(c);
        }
        names.push(name);
    }
    names
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
                    let (p, columns) = parse_table_privileges(&text(row.get(4)));
                    let g = dir.grants.entry(who).or_default();
                    // Rows written by hand may repeat a level in another case: one entry each.
                    let (db, table) = (db.to_lowercase(), table.to_lowercase());
                    if let (false, Some(routine)) = (db.is_empty(), routine_of_key(&table)) {
                        let key = (db, routine);
                        match g.routines.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, have)) => *have = *have | p,
                            None => g.routines.push((key, p)),
                        }
                        continue;
                    }
                    if !db.is_empty() && !table.is_empty() && !columns.is_empty() {
                        let key = (db.clone(), table.clone());
                        match g.columns.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, have)) => have.extend(columns),
                            None => g.columns.push((key, columns)),
                        }
                    }
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
    fn column_privileges_share_the_table_rows_text_and_old_rows_read_the_same() {
        let cols = vec![
            ("a".to_string(), Privs::SELECT | Privs::UPDATE),
            ("b,`c)".to_string(), Privs::SELECT),
            ("d".to_string(), Privs::INSERT),
        ];
        let text = table_privileges_text(Privs::DELETE | Privs::SELECT, &cols);
        assert_eq!(
            text,
            "SELECT,DELETE,SELECT (`a`,`b\\x2c``c)`),INSERT (`d`),UPDATE (`a`)"
        );
        let (p, back) = parse_table_privileges(&text);
        assert_eq!(p, Privs::SELECT | Privs::DELETE);
        assert_eq!(back, cols);
        // A row written before column privileges, and one with columns only.
        assert_eq!(
            parse_table_privileges("SELECT,INSERT"),
            (Privs::SELECT | Privs::INSERT, vec![])
        );
        assert_eq!(
            parse_table_privileges(&table_privileges_text(Privs::NONE, &cols[2..])),
            (Privs::NONE, cols[2..].to_vec())
        );
        // What a version without column privileges makes of the text: the table's only.
        assert_eq!(Privs::from_stored(&text), Privs::SELECT | Privs::DELETE);
        let sneaky = vec![("a`,SUPER,`b\\x2c".to_string(), Privs::SELECT)];
        let text = table_privileges_text(Privs::NONE, &sneaky);
        assert_eq!(Privs::from_stored(&text), Privs::NONE);
        assert_eq!(parse_table_privileges(&text).1, sneaky);
        assert_eq!(routine_key("Add`One"), "procedure `add``one`");
        assert_eq!(
            routine_of_key(&routine_key("Add`One")).as_deref(),
            Some("add`one")
        );
        assert_eq!(routine_of_key("orders"), None);
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
