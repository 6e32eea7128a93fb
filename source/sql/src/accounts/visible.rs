//! What a session's account may see of the catalog, by MySQL 8's rules (its
//! `CAN_ACCESS_DATABASE`, `CAN_ACCESS_TABLE`, `CAN_ACCESS_COLUMN`, `CAN_ACCESS_TRIGGER`,
//! `CAN_ACCESS_VIEW` and `CAN_ACCESS_ROUTINE`, and the checks of its SHOW statements), and
//! the errors it gets where MySQL refuses. The rules themselves are [`Grants`]'; this puts
//! them on the session, for the floors that list the catalog (`objects`, `catalog`) and
//! check statements (`exec`). A session without grants sees everything.

use ringrep_engine::error::{code, Code, Error, Result};

use crate::accounts::{Grants, Privs};
use crate::SqlSession;

/// MySQL's 1143: a column the statement uses is not granted.
pub(crate) const ER_COLUMNACCESS_DENIED_ERROR: Code = Code::new(1143, "42000");
/// MySQL's 1370: a stored routine the statement runs or changes is not granted.
pub(crate) const ER_PROCACCESS_DENIED_ERROR: Code = Code::new(1370, "42000");

/// Databases every account sees and reads: their rows are filtered by what the account may
/// see, or they hold nothing of anyone's.
pub(crate) fn always_visible(db: &str) -> bool {
    db.eq_ignore_ascii_case("information_schema") || db.eq_ignore_ascii_case("performance_schema")
}

impl SqlSession {
    /// The grants statements are checked against; `None` holds every privilege.
    pub(crate) fn restricted(&self) -> Option<&Grants> {
        self.authority.as_ref().and_then(|a| a.grants.as_deref())
    }

    /// `'user'@'client host'`, as MySQL's access errors name the session.
    pub(crate) fn who(&self) -> String {
        self.authority.as_ref().map_or_else(
            || "'root'@'localhost'".into(),
            |a| format!("'{}'@'{}'", a.account.user, a.client_host),
        )
    }

    /// Error 1044 for database `db`.
    pub(crate) fn database_denied(&self, db: &str) -> Error {
        Error::new(
            code::ER_DBACCESS_DENIED_ERROR,
            format!("Access denied for user {} to database '{db}'", self.who()),
        )
    }

    /// Error 1142: `verb` (MySQL's command word: SELECT, SHOW, SHOW VIEW, ...) on `table`.
    pub(crate) fn table_denied(&self, verb: &str, table: &str) -> Error {
        Error::new(
            code::ER_TABLEACCESS_DENIED_ERROR,
            format!(
                "{verb} command denied to user {} for table '{table}'",
                self.who()
            ),
        )
    }

    /// Error 1143: `verb` (SELECT, INSERT, UPDATE, REFERENCES) on column `column` of `table`.
    pub(crate) fn column_denied(&self, verb: &str, column: &str, table: &str) -> Error {
        Error::new(
            ER_COLUMNACCESS_DENIED_ERROR,
            format!(
                "{verb} command denied to user {} for column '{column}' in table '{table}'",
                self.who()
            ),
        )
    }

    /// Error 1370: `verb` (MySQL writes `execute`, `alter routine` in lower case) on stored
    /// procedure `db.name`. MySQL names the account here (its host pattern), not the client.
    pub(crate) fn routine_denied(&self, verb: &str, db: &str, name: &str) -> Error {
        let account = self.authority.as_ref().map_or_else(
            || "'root'@'localhost'".into(),
            |a| format!("'{}'@'{}'", a.account.user, a.account.host),
        );
        Error::new(
            ER_PROCACCESS_DENIED_ERROR,
            format!("{verb} command denied to user {account} for routine '{db}.{name}'"),
        )
    }

    /// Whether SHOW DATABASES and information_schema.SCHEMATA list `db`.
    pub(crate) fn may_see_database(&self, db: &str) -> bool {
        always_visible(db) || self.restricted().is_none_or(|g| g.can_access_database(db))
    }

    /// Whether SHOW CREATE DATABASE may print `db` (MySQL's `mysqld_show_create_db`): a
    /// privilege acting on its objects, globally or on `db.*`, or a grant on one of its
    /// tables. SHOW DATABASES alone lists the database but is not one: error 1044.
    pub(crate) fn may_show_create_database(&self, db: &str) -> bool {
        always_visible(db) || self.restricted().is_none_or(|g| g.can_use_database(db))
    }

    /// Whether the catalog lists table (or view) `db.table`.
    pub(crate) fn may_see_table(&self, db: &str, table: &str) -> bool {
        always_visible(db)
            || self
                .restricted()
                .is_none_or(|g| g.can_access_table(db, table))
    }

    /// The privileges the session has on column `column` of `db.table`, as
    /// information_schema.COLUMNS.PRIVILEGES and SHOW FULL COLUMNS write them
    /// (`select,insert,update,references`); empty hides the column.
    pub(crate) fn privileges_of_column(&self, db: &str, table: &str, column: &str) -> String {
        let have = match self.restricted() {
            Some(g) if !always_visible(db) => g.on_column(db, table, column),
            _ => Privs::COLUMN,
        };
        column_privilege_names(have)
    }

    /// Whether the session sees the triggers of table `db.table`: those need TRIGGER on it.
    pub(crate) fn may_see_triggers_of(&self, db: &str, table: &str) -> bool {
        self.restricted()
            .is_none_or(|g| g.on_table(db, table).contains(Privs::TRIGGER))
    }

    /// Whether the session sees the definition of view `db.name` defined by `definer`
    /// (`user@host`): its definer does, and so does an account with SELECT and SHOW VIEW on
    /// it; information_schema.VIEWS shows others an empty definition.
    pub(crate) fn may_read_view(&self, db: &str, name: &str, definer: &str) -> bool {
        let Some(g) = self.restricted() else {
            return true;
        };
        self.is_definer(definer)
            || g.on_table(db, name)
                .contains(Privs::SELECT | Privs::SHOW_VIEW)
    }

    /// Whether the session sees stored routine `db.name` defined by `definer` at all (its
    /// other properties), and whether it reads its body, as MySQL decides both.
    pub(crate) fn routine_access(&self, db: &str, name: &str, definer: &str) -> (bool, bool) {
        let Some(g) = self.restricted() else {
            return (true, true);
        };
        let body = self.is_definer(definer) || g.can_read_routine_bodies();
        (body || g.can_see_routine(db, name), body)
    }

    /// Whether `definer` (`user@host`, as stored) names the session's account.
    fn is_definer(&self, definer: &str) -> bool {
        self.authority.as_ref().is_some_and(|a| {
            definer.split_once('@').is_some_and(|(u, h)| {
                u == a.account.user && h.eq_ignore_ascii_case(&a.account.host)
            })
        })
    }

    /// SHOW TABLES, SHOW TABLE STATUS and SHOW TRIGGERS looking into `db`: error 1044 unless
    /// the account holds something there (what they list is then filtered table by table).
    pub(crate) fn require_listing(&self, db: &str) -> Result<()> {
        match self.restricted() {
            Some(g) if !always_visible(db) && !g.can_list_database(db) => {
                Err(self.database_denied(db))
            }
            _ => Ok(()),
        }
    }

    /// SHOW COLUMNS, DESCRIBE and SHOW INDEX of `db.table`: error 1142 (SELECT) unless the
    /// account may describe it.
    pub(crate) fn require_describe(&self, db: &str, table: &str) -> Result<()> {
        match self.restricted() {
            Some(g) if !always_visible(db) && !g.can_describe_table(db, table) => {
                Err(self.table_denied("SELECT", table))
            }
            _ => Ok(()),
        }
    }
}

/// `select,insert,update,references`, the names of those of `have` a column can hold, as
/// information_schema.COLUMNS.PRIVILEGES writes them.
fn column_privilege_names(have: Privs) -> String {
    [
        (Privs::SELECT, "select"),
        (Privs::INSERT, "insert"),
        (Privs::UPDATE, "update"),
        (Privs::REFERENCES, "references"),
    ]
    .iter()
    .filter(|(p, _)| have.contains(*p))
    .map(|(_, n)| *n)
    .collect::<Vec<_>>()
    .join(",")
}
