//! Accounts and privileges, as MySQL has them: `'user'@'host'` accounts with a
//! `mysql_native_password` hash, and privileges granted globally (`*.*`), per database
//! (`db.*`), per table (`db.t`), per column (`SELECT (a, b) ON db.t`) or per stored
//! procedure (`EXECUTE ON PROCEDURE db.p`).
//!
//! Accounts live in two ordinary tables of database `mysql` ([`store`]): `mysql.user` (one row
//! per account) and `mysql.ringrep_grants` (one row per account and level, the privileges as
//! a list). Being ordinary tables, they are in the binlog: durable on the primary and
//! replicated to every replica, whose clients then log in with the same accounts. Account
//! statements (`exec::accounts`) are the way to change them; an account with the privileges
//! may also write the tables directly, as MySQL's root can, and the change takes effect at the
//! next statement like any other (the server notices every change to the tables).
//!
//! A session runs with an [`Authority`]: who it is and, unless it is an account of the
//! node's own configuration (root and `[[users]]`, which hold every privilege), the
//! [`Grants`] each statement is checked against (`exec::authorize`).

pub mod store;
pub(crate) mod visible;

use std::fmt::Write as _;

/// One privilege's bit in [`Privs`], in MySQL's order (the order SHOW GRANTS lists them in).
const NAMES: [(&str, u8); 33] = [
    ("SELECT", GDT),
    ("INSERT", GDT),
    ("UPDATE", GDT),
    ("DELETE", GDT),
    ("CREATE", GDT),
    ("DROP", GDT),
    ("RELOAD", G),
    ("SHUTDOWN", G),
    ("PROCESS", G),
    ("FILE", G),
    ("REFERENCES", GDT),
    ("INDEX", GDT),
    ("ALTER", GDT),
    ("SHOW DATABASES", G),
    ("SUPER", G),
    ("CREATE TEMPORARY TABLES", GD),
    ("LOCK TABLES", GD),
    ("EXECUTE", GD | R),
    ("REPLICATION SLAVE", G),
    ("REPLICATION CLIENT", G),
    ("CREATE VIEW", GDT),
    ("SHOW VIEW", GDT),
    ("CREATE ROUTINE", GD),
    ("ALTER ROUTINE", GD | R),
    ("CREATE USER", G),
    ("EVENT", GD),
    ("TRIGGER", GDT),
    ("CREATE TABLESPACE", G),
    ("CREATE ROLE", G),
    ("DROP ROLE", G),
    // MySQL 8's dynamic privilege for CHANGE REPLICATION SOURCE, START and STOP REPLICA.
    ("REPLICATION_SLAVE_ADMIN", G | DYNAMIC),
    ("GRANT OPTION", GDT | R),
    // MySQL 8's dynamic privilege for PURGE BINARY LOGS.
    ("BINLOG_ADMIN", G | DYNAMIC),
];

/// Levels a privilege can be granted at, and whether it is one of MySQL 8's dynamic ones.
const G: u8 = 1;
const D: u8 = 2;
const T: u8 = 4;
const GD: u8 = G | D;
const GDT: u8 = G | D | T;
const DYNAMIC: u8 = 8;
/// A stored routine (`ON PROCEDURE db.p`): EXECUTE, ALTER ROUTINE and GRANT OPTION only.
const R: u8 = 16;

/// A set of privileges (a bit per entry of MySQL's list).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Privs(pub u64);

#[allow(missing_docs)]
impl Privs {
    pub const NONE: Privs = Privs(0);
    pub const SELECT: Privs = Privs(1 << 0);
    pub const INSERT: Privs = Privs(1 << 1);
    pub const UPDATE: Privs = Privs(1 << 2);
    pub const DELETE: Privs = Privs(1 << 3);
    pub const CREATE: Privs = Privs(1 << 4);
    pub const DROP: Privs = Privs(1 << 5);
    pub const RELOAD: Privs = Privs(1 << 6);
    pub const PROCESS: Privs = Privs(1 << 8);
    pub const FILE: Privs = Privs(1 << 9);
    pub const REFERENCES: Privs = Privs(1 << 10);
    pub const INDEX: Privs = Privs(1 << 11);
    pub const ALTER: Privs = Privs(1 << 12);
    pub const SHOW_DATABASES: Privs = Privs(1 << 13);
    pub const SUPER: Privs = Privs(1 << 14);
    pub const CREATE_TEMPORARY_TABLES: Privs = Privs(1 << 15);
    pub const LOCK_TABLES: Privs = Privs(1 << 16);
    pub const EXECUTE: Privs = Privs(1 << 17);
    pub const CREATE_VIEW: Privs = Privs(1 << 20);
    pub const SHOW_VIEW: Privs = Privs(1 << 21);
    pub const CREATE_ROUTINE: Privs = Privs(1 << 22);
    pub const ALTER_ROUTINE: Privs = Privs(1 << 23);
    pub const REPLICATION_SLAVE: Privs = Privs(1 << 18);
    pub const REPLICATION_CLIENT: Privs = Privs(1 << 19);
    pub const CREATE_USER: Privs = Privs(1 << 24);
    pub const EVENT: Privs = Privs(1 << 25);
    pub const TRIGGER: Privs = Privs(1 << 26);
    pub const REPLICATION_SLAVE_ADMIN: Privs = Privs(1 << 30);
    pub const GRANT_OPTION: Privs = Privs(1 << 31);
    pub const BINLOG_ADMIN: Privs = Privs(1 << 32);

    /// MySQL's `DB_OP_ACLS`: the privileges that act on a database's objects. Held globally
    /// they open every database to the catalog; REPLICATION SLAVE, RELOAD and the other
    /// global-only privileges open none.
    pub const DB_OP: Privs = Privs(
        Privs::SELECT.0
            | Privs::INSERT.0
            | Privs::UPDATE.0
            | Privs::DELETE.0
            | Privs::CREATE.0
            | Privs::DROP.0
            | Privs::REFERENCES.0
            | Privs::INDEX.0
            | Privs::ALTER.0
            | Privs::CREATE_TEMPORARY_TABLES.0
            | Privs::LOCK_TABLES.0
            | Privs::EXECUTE.0
            | Privs::CREATE_VIEW.0
            | Privs::SHOW_VIEW.0
            | Privs::CREATE_ROUTINE.0
            | Privs::ALTER_ROUTINE.0
            | Privs::EVENT.0
            | Privs::TRIGGER.0,
    );
    /// MySQL's `TABLE_OP_ACLS`: the privileges that act on a table; any of them shows the
    /// table in the catalog.
    pub const TABLE_OP: Privs = Privs(
        Privs::SELECT.0
            | Privs::INSERT.0
            | Privs::UPDATE.0
            | Privs::DELETE.0
            | Privs::CREATE.0
            | Privs::DROP.0
            | Privs::REFERENCES.0
            | Privs::INDEX.0
            | Privs::ALTER.0
            | Privs::CREATE_VIEW.0
            | Privs::SHOW_VIEW.0
            | Privs::TRIGGER.0,
    );
    /// MySQL's `COL_ACLS`: the privileges a column can have; any of them shows the column.
    pub const COLUMN: Privs =
        Privs(Privs::SELECT.0 | Privs::INSERT.0 | Privs::UPDATE.0 | Privs::REFERENCES.0);
    /// What lets an account see a stored procedure's other properties, not its body.
    pub const ROUTINE_OP: Privs =
        Privs(Privs::CREATE_ROUTINE.0 | Privs::ALTER_ROUTINE.0 | Privs::EXECUTE.0);
}

/// Where a privilege is granted: `*.*`, `db.*` or `db.table`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// `*.*`.
    Global,
    /// `db.*`.
    Database(String),
    /// `db.table`.
    Table(String, String),
    /// `PROCEDURE db.name`.
    Routine(String, String),
}

impl Level {
    fn mask(&self) -> u8 {
        match self {
            Level::Global => G,
            Level::Database(_) => D,
            Level::Table(..) => T,
            Level::Routine(..) => R,
        }
    }

    /// As SHOW GRANTS writes it: `*.*`, `` `db`.* ``, `` `db`.`t` ``,
    /// `` PROCEDURE `db`.`p` ``.
    pub fn text(&self) -> String {
        match self {
            Level::Global => "*.*".into(),
            Level::Database(d) => format!("{}.*", quote_ident(d)),
            Level::Table(d, t) => format!("{}.{}", quote_ident(d), quote_ident(t)),
            Level::Routine(d, r) => format!("PROCEDURE {}.{}", quote_ident(d), quote_ident(r)),
        }
    }
}

/// `` `name` ``, a backquote doubled inside, as SHOW GRANTS quotes names.
pub(crate) fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

impl std::ops::BitOr for Privs {
    type Output = Privs;
    fn bitor(self, o: Privs) -> Privs {
        Privs(self.0 | o.0)
    }
}

impl Privs {
    /// Whether every privilege of `other` is in `self`.
    pub fn contains(self, other: Privs) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `self` holds any privilege of `other`.
    pub fn intersects(self, other: Privs) -> bool {
        self.0 & other.0 != 0
    }

    /// `self` without `other`.
    pub fn without(self, other: Privs) -> Privs {
        Privs(self.0 & !other.0)
    }

    /// Every privilege `ALL [PRIVILEGES]` means at `level` (not GRANT OPTION).
    pub fn all_at(level: &Level) -> Privs {
        let m = level.mask();
        let mut bits = 0;
        for (i, (name, levels)) in NAMES.iter().enumerate() {
            if levels & m != 0 && *name != "GRANT OPTION" {
                bits |= 1u64 << i;
            }
        }
        Privs(bits)
    }

    /// The privileges of `self` that cannot be granted at `level`.
    pub fn invalid_at(self, level: &Level) -> Privs {
        let m = level.mask();
        let mut bits = 0;
        for (i, (_, levels)) in NAMES.iter().enumerate() {
            if self.0 & (1u64 << i) != 0 && levels & m == 0 {
                bits |= 1u64 << i;
            }
        }
        Privs(bits)
    }

    /// The privilege named `words` (upper case, one word each; `REPLICATION REPLICA` is
    /// `REPLICATION SLAVE`).
    pub fn parse(words: &[&str]) -> Option<Privs> {
        let name = words.join(" ");
        let name = match name.as_str() {
            "REPLICATION REPLICA" => "REPLICATION SLAVE",
            "REPLICATION_REPLICA_ADMIN" => "REPLICATION_SLAVE_ADMIN",
            n => n,
        };
        NAMES
            .iter()
            .position(|(n, _)| *n == name)
            .map(|i| Privs(1u64 << i))
    }

    /// MySQL 8's dynamic privileges (listed apart by SHOW GRANTS).
    fn dynamic() -> Privs {
        let mut bits = 0;
        for (i, (_, levels)) in NAMES.iter().enumerate() {
            if levels & DYNAMIC != 0 {
                bits |= 1u64 << i;
            }
        }
        Privs(bits)
    }

    /// The names of the privileges, in MySQL's order (GRANT OPTION left out); dynamic ones
    /// apart.
    pub(crate) fn names(self) -> (Vec<&'static str>, Vec<&'static str>) {
        let mut fixed = Vec::new();
        let mut dynamic = Vec::new();
        for (i, (name, levels)) in NAMES.iter().enumerate() {
            if self.0 & (1u64 << i) != 0 && *name != "GRANT OPTION" {
                if levels & DYNAMIC != 0 {
                    dynamic.push(*name);
                } else {
                    fixed.push(*name);
                }
            }
        }
        // SHOW GRANTS lists dynamic privileges alphabetically.
        dynamic.sort_unstable();
        (fixed, dynamic)
    }

    /// The list stored in `mysql.ringrep_grants`: names joined by commas.
    pub fn stored(self) -> String {
        NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1u64 << i) != 0)
            .map(|(_, (n, _))| *n)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The set a stored list names (unknown names, from a newer version, are left out).
    pub fn from_stored(text: &str) -> Privs {
        let mut p = Privs::NONE;
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let words: Vec<&str> = name.split(' ').collect();
            if let Some(one) = Privs::parse(&words) {
                p = p | one;
            }
        }
        p
    }

    /// The first privilege of the set, by name (for error messages).
    pub fn first_name(self) -> &'static str {
        NAMES
            .iter()
            .enumerate()
            .find(|(i, _)| self.0 & (1u64 << i) != 0)
            .map_or("USAGE", |(_, (n, _))| n)
    }
}

/// An account: `user@host`, where the host is a name, an address, or a pattern with `%` and `_`
/// (`%` alone: any host; `localhost`: a loopback address).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountName {
    /// The user name.
    pub user: String,
    /// The host pattern.
    pub host: String,
}

impl AccountName {
    /// `'user'@'host'`, as MySQL's messages quote it.
    pub fn quoted(&self) -> String {
        format!("'{}'@'{}'", self.user, self.host)
    }

    /// `` `user`@`host` ``, as SHOW GRANTS writes it.
    pub fn backquoted(&self) -> String {
        format!("{}@{}", quote_ident(&self.user), quote_ident(&self.host))
    }
}

/// The columns of one table granted to an account, each with its privileges.
pub(crate) type ColumnGrants = Vec<(String, Privs)>;

/// What an account may do: its privileges at each level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Granted on `*.*`.
    pub global: Privs,
    /// Granted on `db.*`, by database name in lower case.
    pub databases: Vec<(String, Privs)>,
    /// Granted on `db.table`, by (database, table) in lower case.
    pub tables: Vec<((String, String), Privs)>,
    /// Granted on columns of `db.table`, by (database, table) in lower case: each column (as
    /// the table spelt it when granted) with its privileges (SELECT, INSERT, UPDATE,
    /// REFERENCES).
    pub columns: Vec<((String, String), ColumnGrants)>,
    /// Granted on stored procedure `db.name`, by (database, name) in lower case.
    pub routines: Vec<((String, String), Privs)>,
}

impl Grants {
    /// Whether `p` (every privilege in it) is granted for table `db.table` (or, without a
    /// table, for the database), at any level.
    pub fn allows(&self, p: Privs, db: &str, table: Option<&str>) -> bool {
        let mut have = self.global;
        if let Some((_, d)) = self
            .databases
            .iter()
            .find(|(d, _)| d.eq_ignore_ascii_case(db))
        {
            have = have | *d;
        }
        if let Some(t) = table {
            if let Some((_, tp)) = self
                .tables
                .iter()
                .find(|((d, n), _)| d.eq_ignore_ascii_case(db) && n.eq_ignore_ascii_case(t))
            {
                have = have | *tp;
            }
        }
        have.contains(p)
    }

    /// What the account holds on database `db` as a whole: its global privileges and those
    /// granted on `db.*` (MySQL's `db_access`).
    pub fn on_database(&self, db: &str) -> Privs {
        self.databases
            .iter()
            .filter(|(d, _)| d.eq_ignore_ascii_case(db))
            .fold(self.global, |have, (_, p)| have | *p)
    }

    /// What the account holds on table `db.table`, at every level.
    pub fn on_table(&self, db: &str, table: &str) -> Privs {
        self.table_grant(db, table)
            .map_or(self.on_database(db), |t| self.on_database(db) | t)
    }

    /// What is granted on `db.table` itself, if a table-level grant exists.
    fn table_grant(&self, db: &str, table: &str) -> Option<Privs> {
        self.tables
            .iter()
            .find(|((d, t), p)| {
                d.eq_ignore_ascii_case(db) && t.eq_ignore_ascii_case(table) && !p.is_empty()
            })
            .map(|(_, p)| *p)
    }

    /// The column grants of `db.table` (empty when it has none).
    pub fn column_grants(&self, db: &str, table: &str) -> &[(String, Privs)] {
        self.columns
            .iter()
            .find(|((d, t), _)| d.eq_ignore_ascii_case(db) && t.eq_ignore_ascii_case(table))
            .map_or(&[], |(_, cols)| cols.as_slice())
    }

    /// Whether some column of `db.table` is granted `p` (MySQL's `GRANT_TABLE::cols`): a
    /// statement wanting `p` on the table then has its columns checked one by one instead
    /// of failing on the table (1142).
    pub fn has_column_grant(&self, p: Privs, db: &str, table: &str) -> bool {
        self.column_grants(db, table)
            .iter()
            .any(|(_, cp)| cp.intersects(p))
    }

    /// What the account holds on column `column` of `db.table`: the column privileges it
    /// holds on the table at any level, and those granted on the column itself.
    pub fn on_column(&self, db: &str, table: &str, column: &str) -> Privs {
        let granted = self
            .column_grants(db, table)
            .iter()
            .filter(|(c, _)| c.eq_ignore_ascii_case(column))
            .fold(Privs::NONE, |have, (_, p)| have | *p);
        Privs(self.on_table(db, table).0 & Privs::COLUMN.0) | granted
    }

    /// What is granted on stored procedure `db.name` itself.
    fn routine_grant(&self, db: &str, name: &str) -> Privs {
        self.routines
            .iter()
            .filter(|((d, r), _)| d.eq_ignore_ascii_case(db) && r.eq_ignore_ascii_case(name))
            .fold(Privs::NONE, |have, (_, p)| have | *p)
    }

    /// What the account holds on stored procedure `db.name`, at every level.
    pub fn on_routine(&self, db: &str, name: &str) -> Privs {
        self.on_database(db) | self.routine_grant(db, name)
    }

    /// Whether a table (or one of its columns) or a stored procedure of `db` has a grant of
    /// its own (MySQL's `check_grant_db`, which looks at routine grants too).
    fn has_table_grant_in(&self, db: &str) -> bool {
        self.tables
            .iter()
            .any(|((d, _), p)| d.eq_ignore_ascii_case(db) && !p.is_empty())
            || self
                .columns
                .iter()
                .any(|((d, _), cols)| d.eq_ignore_ascii_case(db) && !cols.is_empty())
            || self
                .routines
                .iter()
                .any(|((d, _), p)| d.eq_ignore_ascii_case(db) && !p.is_empty())
    }

    /// Whether SHOW DATABASES and information_schema.SCHEMATA list `db` (MySQL's
    /// `CAN_ACCESS_DATABASE`): a global privilege that acts on databases' objects or SHOW
    /// DATABASES, any privilege on `db.*`, or a grant on one of its tables.
    pub fn can_access_database(&self, db: &str) -> bool {
        self.global.intersects(Privs::DB_OP | Privs::SHOW_DATABASES)
            || self
                .databases
                .iter()
                .any(|(d, p)| d.eq_ignore_ascii_case(db) && !p.is_empty())
            || self.has_table_grant_in(db)
    }

    /// Whether USE may make `db` the current database (MySQL's `mysql_change_db`): a
    /// privilege acting on its objects, globally or on `db.*`, or a grant on one of its tables.
    /// SHOW DATABASES alone lists a database without opening it.
    pub fn can_use_database(&self, db: &str) -> bool {
        self.on_database(db).intersects(Privs::DB_OP) || self.has_table_grant_in(db)
    }

    /// Whether SHOW TABLES, SHOW TABLE STATUS and SHOW TRIGGERS may look into `db` (MySQL's
    /// `check_show_access`): any privilege at all globally or on `db.*`, or a grant on one of
    /// its tables; else error 1044. What they then list is filtered table by table.
    pub fn can_list_database(&self, db: &str) -> bool {
        !self.on_database(db).is_empty() || self.has_table_grant_in(db)
    }

    /// Whether the catalog lists table `db.table` (MySQL's `CAN_ACCESS_TABLE`): a privilege
    /// that acts on tables, at any level.
    pub fn can_access_table(&self, db: &str, table: &str) -> bool {
        self.on_table(db, table).intersects(Privs::TABLE_OP)
            || self.has_column_grant(Privs::COLUMN, db, table)
    }

    /// Whether SHOW COLUMNS, DESCRIBE and SHOW INDEX may describe `db.table` (MySQL's
    /// `check_grant` for SHOW): SELECT globally or on `db.*`, or any grant on the table itself
    /// or on one of its columns.
    pub fn can_describe_table(&self, db: &str, table: &str) -> bool {
        self.on_database(db).contains(Privs::SELECT)
            || self.table_grant(db, table).is_some()
            || self.has_column_grant(Privs::COLUMN, db, table)
    }

    /// Whether SHOW CREATE TABLE may show `db.table` (MySQL's `SHOW_CREATE_TABLE_ACLS`): a
    /// privilege acting on tables, or GRANT OPTION, at any level.
    pub fn can_show_create_table(&self, db: &str, table: &str) -> bool {
        self.on_table(db, table)
            .intersects(Privs::TABLE_OP | Privs::GRANT_OPTION)
    }

    /// The privileges the account has on the columns of `db.table` (MySQL's column grant,
    /// which information_schema.COLUMNS and SHOW FULL COLUMNS list; none hides the columns).
    pub fn column_privileges(&self, db: &str, table: &str) -> Privs {
        Privs(self.on_table(db, table).0 & Privs::COLUMN.0)
    }

    /// Whether the account may see the stored routines of `db` other than by being their
    /// definer: CREATE ROUTINE, ALTER ROUTINE or EXECUTE globally or on `db.*`. Their bodies
    /// need more ([`Grants::can_read_routine_bodies`]).
    pub fn can_see_routines(&self, db: &str) -> bool {
        self.on_database(db).intersects(Privs::ROUTINE_OP)
    }

    /// Whether the account may see stored procedure `db.name` other than by being its
    /// definer (MySQL's `check_some_routine_access`): [`Grants::can_see_routines`] of its
    /// database, or any privilege granted on the procedure itself.
    pub fn can_see_routine(&self, db: &str, name: &str) -> bool {
        self.can_see_routines(db) || !self.routine_grant(db, name).is_empty()
    }

    /// Whether the account may read every routine's body (SHOW CREATE PROCEDURE's text,
    /// information_schema.ROUTINES.ROUTINE_DEFINITION): global SELECT, as in MySQL; a routine's
    /// definer reads its own.
    pub fn can_read_routine_bodies(&self) -> bool {
        self.global.contains(Privs::SELECT)
    }

    /// Whether the account has a global privilege.
    pub fn global_has(&self, p: Privs) -> bool {
        self.global.contains(p)
    }

    /// SHOW GRANTS' lines for `account`, as MySQL 8 writes them.
    pub fn show(&self, account: &AccountName) -> Vec<String> {
        let mut lines = Vec::new();
        let who = account.backquoted();
        let line = |p: Privs, level: &Level, lines: &mut Vec<String>| {
            let (fixed, dynamic) = p.names();
            let grant_option = if p.contains(Privs::GRANT_OPTION) {
                " WITH GRANT OPTION"
            } else {
                ""
            };
            let dynamic_bits = Privs::dynamic().0;
            let static_all = Privs(Privs::all_at(level).0 & !dynamic_bits);
            // A routine's line names its privileges even when they are all it can have.
            let all = Privs(p.0 & !Privs::GRANT_OPTION.0 & !dynamic_bits) == static_all
                && !matches!(level, Level::Routine(..));
            let listed = if all {
                "ALL PRIVILEGES".to_string()
            } else if fixed.is_empty() {
                "USAGE".to_string()
            } else {
                fixed.join(", ")
            };
            if !fixed.is_empty() || dynamic.is_empty() || *level != Level::Global {
                let mut s = String::new();
                let _ = write!(
                    s,
                    "GRANT {listed} ON {} TO {who}{grant_option}",
                    level.text()
                );
                lines.push(s);
            }
            if !dynamic.is_empty() {
                lines.push(format!(
                    "GRANT {} ON *.* TO {who}{grant_option}",
                    dynamic.join(",")
                ));
            }
        };
        line(self.global, &Level::Global, &mut lines);
        for (d, p) in &self.databases {
            if !p.is_empty() {
                line(*p, &Level::Database(d.clone()), &mut lines);
            }
        }
        // A table's line holds its column privileges too: `SELECT, INSERT (`c`) ON ...`.
        let mut tables: Vec<&(String, String)> = self
            .tables
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(k, _)| k)
            .collect();
        for (k, cols) in &self.columns {
            if !cols.is_empty() && !tables.contains(&k) {
                tables.push(k);
            }
        }
        for (d, t) in tables {
            let p = self.table_grant(d, t).unwrap_or_default();
            let cols = self.column_grants(d, t);
            if cols.is_empty() {
                line(p, &Level::Table(d.clone(), t.clone()), &mut lines);
            } else {
                lines.push(table_line_with_columns(p, cols, d, t, &who));
            }
        }
        for ((d, r), p) in &self.routines {
            if !p.is_empty() {
                line(*p, &Level::Routine(d.clone(), r.clone()), &mut lines);
            }
        }
        lines
    }
}

/// SHOW GRANTS' line for a table with column grants, as MySQL 8 writes it: each privilege in
/// MySQL's order, the table-level one by its name and the column-level one by its name and
/// its columns in parentheses (both when the table and some columns have it:
/// `SELECT, SELECT (`a`)`); ALL PRIVILEGES at the table hides the columns.
fn table_line_with_columns(
    table: Privs,
    columns: &[(String, Privs)],
    db: &str,
    name: &str,
    who: &str,
) -> String {
    let level = Level::Table(db.into(), name.into());
    let grant_option = if table.contains(Privs::GRANT_OPTION) {
        " WITH GRANT OPTION"
    } else {
        ""
    };
    let table_only = table.without(Privs::GRANT_OPTION);
    let listed = if table_only == Privs::all_at(&level) {
        "ALL PRIVILEGES".to_string()
    } else {
        let mut parts = Vec::new();
        for (i, (pname, _)) in NAMES.iter().enumerate() {
            let bit = Privs(1u64 << i);
            if bit == Privs::GRANT_OPTION {
                continue;
            }
            if table_only.contains(bit) {
                parts.push((*pname).to_string());
            }
            let cols: Vec<String> = columns
                .iter()
                .filter(|(_, p)| p.contains(bit))
                .map(|(c, _)| quote_ident(c))
                .collect();
            if !cols.is_empty() {
                parts.push(format!("{pname} ({})", cols.join(", ")));
            }
        }
        parts.join(", ")
    };
    format!("GRANT {listed} ON {} TO {who}{grant_option}", level.text())
}

/// Who a session runs as: the account it logged in with (and the client's host, for
/// messages) and, for an account of `mysql.user`, its grants. An account of the node's
/// configuration (`grants: None`) holds every privilege.
#[derive(Debug, Clone)]
pub struct Authority {
    /// The account matched at login (CURRENT_USER()).
    pub account: AccountName,
    /// The client's host as the server saw it (USER() and error messages).
    pub client_host: String,
    /// The account's grants; `None` for every privilege.
    pub grants: Option<std::sync::Arc<Grants>>,
}

impl Authority {
    /// An account of the node's configuration (every privilege), logged in from `client_host`.
    pub fn superuser(user: &str, client_host: &str) -> Authority {
        Authority {
            account: AccountName {
                user: user.into(),
                host: "%".into(),
            },
            client_host: client_host.into(),
            grants: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privilege_names_round_trip_and_levels_are_checked() {
        let p = Privs::parse(&["REPLICATION", "SLAVE"]).expect("known");
        assert_eq!(p, Privs::REPLICATION_SLAVE);
        assert_eq!(Privs::parse(&["REPLICATION", "REPLICA"]), Some(p));
        assert_eq!(Privs::parse(&["SELECTT"]), None);
        let set = Privs::SELECT | Privs::INSERT | Privs::GRANT_OPTION;
        assert_eq!(Privs::from_stored(&set.stored()), set);
        assert!(Privs::REPLICATION_SLAVE
            .invalid_at(&Level::Database("d".into()))
            .contains(Privs::REPLICATION_SLAVE));
        assert!(Privs::SELECT
            .invalid_at(&Level::Table("d".into(), "t".into()))
            .is_empty());
        assert!(!Privs::all_at(&Level::Global).contains(Privs::GRANT_OPTION));
    }

    #[test]
    fn column_and_routine_grants_are_checked_and_shown_as_mysql_does() {
        let g = Grants {
            tables: vec![(("shop".into(), "t".into()), Privs::SELECT)],
            columns: vec![
                (
                    ("shop".into(), "t".into()),
                    vec![
                        ("a".into(), Privs::SELECT | Privs::UPDATE),
                        ("b".into(), Privs::INSERT),
                    ],
                ),
                (
                    ("shop".into(), "u".into()),
                    vec![("c".into(), Privs::REFERENCES)],
                ),
            ],
            routines: vec![(
                ("shop".into(), "p".into()),
                Privs::EXECUTE | Privs::ALTER_ROUTINE,
            )],
            ..Default::default()
        };
        assert_eq!(g.on_column("SHOP", "T", "A"), Privs::SELECT | Privs::UPDATE);
        assert_eq!(g.on_column("shop", "t", "b"), Privs::SELECT | Privs::INSERT);
        assert_eq!(g.on_column("shop", "u", "d"), Privs::NONE);
        assert!(g.has_column_grant(Privs::INSERT, "shop", "t"));
        assert!(!g.has_column_grant(Privs::DELETE, "shop", "t"));
        // A column grant shows the table and opens the database, as a table grant does.
        assert!(g.can_access_table("shop", "u"));
        assert!(g.can_describe_table("shop", "u"));
        assert!(!g.can_access_table("shop", "v"));
        assert!(g.can_use_database("shop"));
        assert!(g.can_see_routine("shop", "P"));
        assert!(!g.can_see_routine("shop", "q"));
        assert!(g.on_routine("shop", "p").contains(Privs::EXECUTE));
        assert!(!g.on_routine("shop", "q").contains(Privs::EXECUTE));
        let who = AccountName {
            user: "u".into(),
            host: "%".into(),
        };
        assert_eq!(
            g.show(&who),
            [
                "GRANT USAGE ON *.* TO `u`@`%`",
                "GRANT SELECT, SELECT (`a`), INSERT (`b`), UPDATE (`a`) ON `shop`.`t` TO `u`@`%`",
                "GRANT REFERENCES (`c`) ON `shop`.`u` TO `u`@`%`",
                "GRANT EXECUTE, ALTER ROUTINE ON PROCEDURE `shop`.`p` TO `u`@`%`",
            ]
        );
        let routine = Level::Routine("shop".into(), "p".into());
        assert_eq!(
            Privs::all_at(&routine),
            Privs::EXECUTE | Privs::ALTER_ROUTINE
        );
        assert!(Privs::SELECT.invalid_at(&routine).contains(Privs::SELECT));
        assert!(Privs::GRANT_OPTION.invalid_at(&routine).is_empty());
    }

    #[test]
    fn grants_combine_levels_and_show_as_mysql_does() {
        let g = Grants {
            global: Privs::REPLICATION_SLAVE,
            databases: vec![("app".into(), Privs::SELECT | Privs::INSERT)],
            tables: vec![(("app".into(), "log".into()), Privs::DELETE)],
            ..Default::default()
        };
        assert!(g.allows(Privs::SELECT, "APP", Some("t")));
        assert!(g.allows(Privs::DELETE | Privs::SELECT, "app", Some("log")));
        assert!(!g.allows(Privs::DELETE, "app", Some("t")));
        assert!(!g.allows(Privs::SELECT, "other", Some("t")));
        assert!(g.can_access_database("app"));
        assert!(
            !g.can_access_database("other"),
            "REPLICATION SLAVE opens no database"
        );
        let who = AccountName {
            user: "u".into(),
            host: "%".into(),
        };
        assert_eq!(
            g.show(&who),
            [
                "GRANT REPLICATION SLAVE ON *.* TO `u`@`%`",
                "GRANT SELECT, INSERT ON `app`.* TO `u`@`%`",
                "GRANT DELETE ON `app`.`log` TO `u`@`%`",
            ]
        );
        let all = Grants {
            global: Privs::all_at(&Level::Global) | Privs::GRANT_OPTION,
            ..Default::default()
        };
        assert_eq!(
            all.show(&who),
            [
                "GRANT ALL PRIVILEGES ON *.* TO `u`@`%` WITH GRANT OPTION",
                "GRANT BINLOG_ADMIN,REPLICATION_SLAVE_ADMIN ON *.* TO `u`@`%` WITH GRANT OPTION",
            ]
        );
        assert_eq!(
            Grants::default().show(&who),
            ["GRANT USAGE ON *.* TO `u`@`%`"]
        );
    }
}
