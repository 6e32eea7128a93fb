//! The account statements: CREATE USER, ALTER USER, DROP USER, RENAME USER, SET PASSWORD,
//! GRANT, REVOKE and SHOW GRANTS. sqlparser does not parse MySQL's forms of these (privilege
//! names such as `REPLICATION SLAVE`, `'user'@'host'`), so they are read here from tokens.
//!
//! Each statement is one transaction on the account tables (after an implicit commit of the
//! session's open one, as MySQL does), so a replica applies it whole or not at all.

use binlog_format::{Key, Value};
use ringrep_engine::error::{code, Code, Error, Result};

use crate::accounts::store::{
    account_row, ensure_tables, grants_row, parse_hash_text, password_hash, routine_key,
    same_account, sha2_hash, table_grants_row, Account, Directory,
};
use crate::accounts::{AccountName, Grants, Level, Privs};
use crate::{Outcome, SqlSession};

/// MySQL's errors for account statements.
mod err {
    use super::Code;
    pub(super) const ER_CANNOT_USER: Code = Code::new(1396, "HY000");
    pub(super) const ER_NONEXISTING_GRANT: Code = Code::new(1141, "42000");
    pub(super) const ER_NONEXISTING_TABLE_GRANT: Code = Code::new(1147, "42000");
    pub(super) const ER_NONEXISTING_PROC_GRANT: Code = Code::new(1403, "42000");
    pub(super) const ER_CANT_CREATE_USER_WITH_GRANT: Code = Code::new(1410, "42000");
    pub(super) const ER_WRONG_USAGE: Code = Code::new(1221, "HY000");
    pub(super) const ER_ILLEGAL_GRANT_FOR_TABLE: Code = Code::new(1144, "42000");
    pub(super) const ER_PLUGIN_IS_NOT_LOADED: Code = Code::new(1524, "HY000");
    pub(super) const ER_PASSWORD_FORMAT: Code = Code::new(1827, "HY000");
    pub(super) const ER_USER_ALREADY_EXISTS: u16 = 3163;
    pub(super) const ER_USER_DOES_NOT_EXIST: u16 = 3162;
}

/// What an account keeps of its password: the hash of each method it can be checked with.
#[derive(Debug, Clone, Copy)]
struct Secret {
    hash: Option<[u8; 20]>,
    sha2: Option<[u8; 32]>,
}

impl Secret {
    fn of(password: &str) -> Secret {
        Secret {
            hash: password_hash(password),
            sha2: sha2_hash(password),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A bare word: upper-cased, and as written.
    Word(String, String),
    /// A quoted string or a backquoted name.
    Quoted(String),
    Sym(char),
}

fn tokens(text: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        let Some(c) = rest.chars().next() else {
            return Ok(out);
        };
        if c == '\'' || c == '"' {
            let (s, after) = crate::parse::lexer::take_string(rest).ok_or_else(|| {
                Error::syntax("You have an error in your SQL syntax; an unterminated string")
            })?;
            out.push(Tok::Quoted(s));
            rest = after;
        } else if c == '`' {
            let body = &rest[1..];
            let end = body.find('`').ok_or_else(|| {
                Error::syntax("You have an error in your SQL syntax; an unterminated name")
            })?;
            out.push(Tok::Quoted(body[..end].to_string()));
            rest = &body[end + 1..];
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(rest.len());
            let w = &rest[..end];
            out.push(Tok::Word(w.to_ascii_uppercase(), w.to_string()));
            rest = &rest[end..];
        } else {
            out.push(Tok::Sym(c));
            rest = &rest[c.len_utf8()..];
        }
    }
}

/// A cursor over a statement's tokens.
struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

fn near(p: &Parser) -> Error {
    let what = match p.toks.get(p.at) {
        None => "at the end".to_string(),
        Some(Tok::Word(_, w)) => format!("near '{w}'"),
        Some(Tok::Quoted(s)) => format!("near '{s}'"),
        Some(Tok::Sym(c)) => format!("near '{c}'"),
    };
    Error::syntax(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use {what}"
    ))
}

impl Parser {
    fn peek_word(&self) -> Option<&str> {
        match self.toks.get(self.at) {
            Some(Tok::Word(u, _)) => Some(u),
            _ => None,
        }
    }

    fn word(&mut self, w: &str) -> bool {
        if self.peek_word() == Some(w) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn words(&mut self, ws: &[&str]) -> bool {
        let save = self.at;
        for w in ws {
            if !self.word(w) {
                self.at = save;
                return false;
            }
        }
        true
    }

    fn expect(&mut self, w: &str) -> Result<()> {
        if self.word(w) {
            Ok(())
        } else {
            Err(near(self))
        }
    }

    fn sym(&mut self, c: char) -> bool {
        if self.toks.get(self.at) == Some(&Tok::Sym(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn done(&self) -> bool {
        self.at >= self.toks.len()
    }

    fn end(&self) -> Result<()> {
        if self.done() {
            Ok(())
        } else {
            Err(near(self))
        }
    }

    fn string(&mut self) -> Result<String> {
        match self.toks.get(self.at) {
            Some(Tok::Quoted(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(near(self)),
        }
    }

    /// A name: quoted, backquoted or bare.
    fn name(&mut self) -> Result<String> {
        match self.toks.get(self.at) {
            Some(Tok::Quoted(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            Some(Tok::Word(_, w)) => {
                let w = w.clone();
                self.at += 1;
                Ok(w)
            }
            _ => Err(near(self)),
        }
    }

    /// `user[@host]`, `CURRENT_USER[()]` or `USER()`; `me` is the session's account.
    fn account(&mut self, me: &AccountName) -> Result<AccountName> {
        if matches!(self.peek_word(), Some("CURRENT_USER" | "USER"))
            && !matches!(self.toks.get(self.at + 1), Some(Tok::Sym('@')))
        {
            let user_fn = self.peek_word() == Some("USER");
            self.at += 1;
            let parens = self.sym('(');
            if parens && !self.sym(')') {
                return Err(near(self));
            }
            if user_fn && !parens {
                // A user named `user`, bare.
                self.at -= 1;
            } else {
                return Ok(me.clone());
            }
        }
        let user = self.name()?;
        let host = if self.sym('@') {
            if self.sym('%') {
                "%".to_string()
            } else {
                let mut h = self.name()?;
                // A bare host such as 10.0.0.1 or db.example arrives in pieces.
                while self.toks.get(self.at) == Some(&Tok::Sym('.')) {
                    self.at += 1;
                    h.push('.');
                    if self.sym('%') {
                        h.push('%');
                    } else {
                        h.push_str(&self.name()?);
                    }
                }
                h
            }
        } else {
            "%".to_string()
        };
        // Host names compare without case, as MySQL's: kept in lower case, so that rows
        // are keyed one way.
        let host = host.to_lowercase();
        if user.chars().count() > 32 {
            return Err(Error::new(
                code::ER_WRONG_ARGUMENTS,
                format!("String '{user}' is too long for user name (should be no longer than 32)"),
            ));
        }
        if host.chars().count() > 255 {
            return Err(Error::new(
                code::ER_WRONG_ARGUMENTS,
                format!("String '{host}' is too long for host name (should be no longer than 255)"),
            ));
        }
        Ok(AccountName { user, host })
    }

    /// `IDENTIFIED BY 'pw' | IDENTIFIED WITH plugin [BY 'pw' | AS 'hash']`, if present:
    /// `Some(hash)`.
    fn identified(&mut self) -> Result<Option<Secret>> {
        if !self.word("IDENTIFIED") {
            return Ok(None);
        }
        if self.word("WITH") {
            let plugin = self.name()?;
            let native = plugin.eq_ignore_ascii_case("mysql_native_password");
            if !native && !plugin.eq_ignore_ascii_case("caching_sha2_password") {
                return Err(Error::new(
                    err::ER_PLUGIN_IS_NOT_LOADED,
                    format!("Plugin '{plugin}' is not loaded"),
                ));
            }
            if self.word("AS") {
                if !native {
                    // MySQL's stored form for caching_sha2_password ($A$005$...) is not ours.
                    return Err(Error::new(
                        err::ER_PASSWORD_FORMAT,
                        "The password hash doesn't have the expected format.",
                    ));
                }
                return self
                    .hash_literal()
                    .map(|hash| Some(Secret { hash, sha2: None }));
            }
            if !self.word("BY") {
                return Ok(Some(Secret::of("")));
            }
        } else {
            // MySQL 8 removed `IDENTIFIED BY PASSWORD 'hash'`: a syntax error there too.
            self.expect("BY")?;
        }
        Ok(Some(Secret::of(&self.string()?)))
    }

    fn hash_literal(&mut self) -> Result<Option<[u8; 20]>> {
        let text = self.string()?;
        parse_hash_text(&text).ok_or_else(|| {
            Error::new(
                err::ER_PASSWORD_FORMAT,
                "The password hash doesn't have the expected format.",
            )
        })
    }

    /// Privilege names up to ON: the privileges named alone, whether ALL was named, and each
    /// privilege named with a column list (`SELECT (a, b)`), in the order written.
    fn privileges(&mut self) -> Result<(Privs, bool, ColumnPrivs)> {
        let mut set = Privs::NONE;
        let mut all = false;
        let mut columns = Vec::new();
        loop {
            let mut words = Vec::new();
            while let Some(w) = self.peek_word() {
                if w == "ON" || (w == "FROM" && !words.is_empty()) {
                    break;
                }
                words.push(w.to_string());
                self.at += 1;
            }
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            let named = match refs.as_slice() {
                ["ALL"] | ["ALL", "PRIVILEGES"] => {
                    all = true;
                    None
                }
                ["USAGE"] => None,
                [] => return Err(near(self)),
                names => Some(Privs::parse(names).ok_or_else(|| {
                    Error::syntax(format!(
                        "You have an error in your SQL syntax; unknown privilege '{}'",
                        names.join(" ")
                    ))
                })?),
            };
            if self.sym('(') {
                // Only MySQL's column privileges take a column list; any other is a syntax
                // error there too.
                let p = named
                    .filter(|p| Privs::COLUMN.contains(*p))
                    .ok_or_else(|| {
                        self.at -= 1;
                        near(self)
                    })?;
                let mut cols = vec![self.name()?];
                while self.sym(',') {
                    cols.push(self.name()?);
                }
                if !self.sym(')') {
                    return Err(near(self));
                }
                columns.push((p, cols));
            } else if let Some(p) = named {
                set = set | p;
            }
            if !self.sym(',') {
                return Ok((set, all, columns));
            }
        }
    }

    /// After `ON`: `PROCEDURE [db.]name` (`Some(true)`), `FUNCTION [db.]name` (`Some(false)`),
    /// or `None` for a table or database level (not consumed).
    fn routine_level(
        &mut self,
        current_db: Option<&str>,
    ) -> Result<Option<(bool, String, String)>> {
        let procedure = if self.word("PROCEDURE") {
            true
        } else if self.word("FUNCTION") {
            false
        } else {
            return Ok(None);
        };
        let first = self.name()?;
        let (db, name) = if self.sym('.') {
            (first, self.name()?)
        } else {
            let db = current_db
                .ok_or_else(|| Error::new(code::ER_NO_DB_ERROR, "No database selected"))?;
            (db.to_string(), first)
        };
        Ok(Some((procedure, db, name)))
    }

    /// `*.*`, `*`, `db.*`, `db.table` or `table` (in the current database).
    fn level(&mut self, current_db: Option<&str>) -> Result<Level> {
        self.word("TABLE");
        let no_db = || Error::new(code::ER_NO_DB_ERROR, "No database selected");
        if self.sym('*') {
            if self.sym('.') {
                if !self.sym('*') {
                    return Err(near(self));
                }
                return Ok(Level::Global);
            }
            return Ok(Level::Database(current_db.ok_or_else(no_db)?.to_string()));
        }
        let first = self.name()?;
        if self.sym('.') {
            if self.sym('*') {
                return Ok(Level::Database(first));
            }
            return Ok(Level::Table(first, self.name()?));
        }
        Ok(Level::Table(
            current_db.ok_or_else(no_db)?.to_string(),
            first,
        ))
    }

    fn accounts(&mut self, me: &AccountName) -> Result<Vec<AccountName>> {
        let mut out = vec![self.account(me)?];
        while self.sym(',') {
            out.push(self.account(me)?);
        }
        Ok(out)
    }
}

/// Privileges granted on columns: each privilege with the columns named for it.
type ColumnPrivs = Vec<(Privs, Vec<String>)>;

/// Whether `text` is an account statement this module runs.
pub(crate) fn is_account_statement(first: &[String]) -> bool {
    let w = |i: usize| first.get(i).map(String::as_str).unwrap_or("");
    matches!(
        (w(0), w(1)),
        ("CREATE" | "ALTER" | "DROP" | "RENAME", "USER")
            | ("GRANT" | "REVOKE", _)
            | ("SET", "PASSWORD")
            | ("SHOW", "GRANTS")
    )
}

impl SqlSession {
    /// The account the session runs as (`root@localhost` for a session without a server).
    pub(crate) fn me(&self) -> AccountName {
        match &self.authority {
            Some(a) => a.account.clone(),
            None => AccountName {
                user: "root".into(),
                host: "localhost".into(),
            },
        }
    }

    fn my_grants(&self) -> Option<&Grants> {
        self.authority.as_ref().and_then(|a| a.grants.as_deref())
    }

    /// Needs a global privilege: 1227 otherwise.
    pub(crate) fn require_global(&self, p: Privs) -> Result<()> {
        match self.my_grants() {
            Some(g) if !g.global_has(p) => Err(Error::new(
                code::ER_SPECIFIC_ACCESS_DENIED_ERROR,
                format!(
                    "Access denied; you need (at least one of) the {} privilege(s) for this operation",
                    p.first_name()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Runs an account statement (see [`is_account_statement`]).
    pub(crate) fn account_statement(&mut self, text: &str) -> Result<Outcome> {
        let mut p = Parser {
            toks: tokens(text)?,
            at: 0,
        };
        let me = self.me();
        if p.words(&["SHOW", "GRANTS"]) {
            let who = if p.word("FOR") {
                p.account(&me)?
            } else {
                me.clone()
            };
            if p.word("USING") {
                return Err(Error::unsupported("roles"));
            }
            p.end()?;
            return self.show_grants(&who);
        }
        if self.engine().is_read_only() {
            return Err(Error::read_only());
        }
        if p.words(&["CREATE", "USER"]) {
            self.create_user(&mut p, &me)
        } else if p.words(&["ALTER", "USER"]) {
            self.alter_user(&mut p, &me)
        } else if p.words(&["DROP", "USER"]) {
            self.require_global(Privs::CREATE_USER)?;
            let if_exists = p.words(&["IF", "EXISTS"]);
            let names = p.accounts(&me)?;
            p.end()?;
            self.drop_users(&names, if_exists)
        } else if p.words(&["RENAME", "USER"]) {
            self.require_global(Privs::CREATE_USER)?;
            let mut pairs = Vec::new();
            loop {
                let from = p.account(&me)?;
                p.expect("TO")?;
                pairs.push((from, p.account(&me)?));
                if !p.sym(',') {
                    break;
                }
            }
            p.end()?;
            self.rename_users(&pairs)
        } else if p.words(&["SET", "PASSWORD"]) {
            let who = if p.word("FOR") {
                p.account(&me)?
            } else {
                me.clone()
            };
            if !p.sym('=') {
                return Err(near(&p));
            }
            // MySQL 8 removed PASSWORD('...'): only a string.
            let secret = Secret::of(&p.string()?);
            p.end()?;
            if !same_account(&who, &me) {
                self.require_global(Privs::CREATE_USER)?;
            }
            self.change_accounts("SET PASSWORD", &[who], false, |_, a| {
                a.hash = secret.hash;
                a.sha2 = secret.sha2;
                Ok(())
            })
        } else if p.word("GRANT") {
            self.grant(&mut p, &me, true)
        } else if p.word("REVOKE") {
            self.grant(&mut p, &me, false)
        } else {
            Err(near(&p))
        }
    }

    fn create_user(&mut self, p: &mut Parser, me: &AccountName) -> Result<Outcome> {
        self.require_global(Privs::CREATE_USER)?;
        let if_not_exists = p.words(&["IF", "NOT", "EXISTS"]);
        let mut new = Vec::new();
        loop {
            let name = p.account(me)?;
            let secret = p.identified()?.unwrap_or(Secret::of(""));
            new.push(Account {
                name,
                hash: secret.hash,
                sha2: secret.sha2,
                locked: false,
            });
            if !p.sym(',') {
                break;
            }
        }
        let locked = account_options(p)?;
        p.end()?;
        let dir = Directory::read(self.engine());
        let mut failed = Vec::new();
        let mut create = Vec::new();
        for mut a in new {
            if dir.get(&a.name).is_some()
                || create
                    .iter()
                    .any(|c: &Account| same_account(&c.name, &a.name))
            {
                if if_not_exists {
                    self.session.warn(
                        err::ER_USER_ALREADY_EXISTS,
                        format!("Authorization ID {} already exists.", a.name.quoted()),
                    );
                } else {
                    failed.push(a.name.quoted());
                }
                continue;
            }
            a.locked = locked.unwrap_or(false);
            create.push(a);
        }
        if !failed.is_empty() {
            return Err(Error::new(
                err::ER_CANNOT_USER,
                format!("Operation CREATE USER failed for {}", failed.join(",")),
            ));
        }
        self.account_transaction(|s, user, _| {
            for a in &create {
                s.raw_write(user, account_row(a))?;
            }
            Ok(())
        })
    }

    fn alter_user(&mut self, p: &mut Parser, me: &AccountName) -> Result<Outcome> {
        let if_exists = p.words(&["IF", "EXISTS"]);
        let mut changes = Vec::new();
        loop {
            let name = p.account(me)?;
            let hash = p.identified()?;
            changes.push((name, hash));
            if !p.sym(',') {
                break;
            }
        }
        let locked = account_options(p)?;
        p.end()?;
        if changes.iter().any(|(n, _)| !same_account(n, me)) || locked.is_some() {
            self.require_global(Privs::CREATE_USER)?;
        }
        let names: Vec<AccountName> = changes.iter().map(|(n, _)| n.clone()).collect();
        self.change_accounts("ALTER USER", &names, if_exists, |i, a| {
            if let Some(secret) = changes[i].1 {
                a.hash = secret.hash;
                a.sha2 = secret.sha2;
            }
            if let Some(l) = locked {
                a.locked = l;
            }
            Ok(())
        })
    }

    /// Changes each named account with `f` (given its place in `names`); 1396 naming the
    /// operation when one is missing, or with `if_exists` note 3162 and the others changed.
    fn change_accounts(
        &mut self,
        op: &str,
        names: &[AccountName],
        if_exists: bool,
        mut f: impl FnMut(usize, &mut Account) -> Result<()>,
    ) -> Result<Outcome> {
        let dir = Directory::read(self.engine());
        let mut changed = Vec::new();
        let mut missing = Vec::new();
        for (i, n) in names.iter().enumerate() {
            match dir.get(n) {
                Some(a) => {
                    let mut a = a.clone();
                    f(i, &mut a)?;
                    changed.push(a);
                }
                None if if_exists => self.session.warn(
                    err::ER_USER_DOES_NOT_EXIST,
                    format!("Authorization ID {} does not exist.", n.quoted()),
                ),
                None => missing.push(n.quoted()),
            }
        }
        if !missing.is_empty() {
            return Err(Error::new(
                err::ER_CANNOT_USER,
                format!("Operation {op} failed for {}", missing.join(",")),
            ));
        }
        self.account_transaction(|s, user, _| {
            for a in &changed {
                s.raw_write(user, account_row(a))?;
            }
            Ok(())
        })
    }

    fn drop_users(&mut self, names: &[AccountName], if_exists: bool) -> Result<Outcome> {
        let dir = Directory::read(self.engine());
        let missing: Vec<String> = names
            .iter()
            .filter(|n| dir.get(n).is_none())
            .map(AccountName::quoted)
            .collect();
        if !missing.is_empty() {
            if !if_exists {
                return Err(Error::new(
                    err::ER_CANNOT_USER,
                    format!("Operation DROP USER failed for {}", missing.join(",")),
                ));
            }
            for m in &missing {
                self.session.warn(
                    err::ER_USER_DOES_NOT_EXIST,
                    format!("Authorization ID {m} does not exist."),
                );
            }
        }
        let gone: Vec<Account> = names.iter().filter_map(|n| dir.get(n).cloned()).collect();
        self.account_transaction(|s, user, grants| {
            for a in &gone {
                s.raw_delete(user, account_key(&a.name))?;
                for key in grant_keys(s, grants, &a.name)? {
                    s.raw_delete(grants, key)?;
                }
            }
            Ok(())
        })
    }

    fn rename_users(&mut self, pairs: &[(AccountName, AccountName)]) -> Result<Outcome> {
        let dir = Directory::read(self.engine());
        let mut failed = Vec::new();
        for (from, to) in pairs {
            // A name differing from the account's own only in case is the account itself (the
            // key compares so): renaming to it respells the name.
            let taken = dir.get(to).is_some_and(|t| !same_account(&t.name, from));
            if dir.get(from).is_none() || taken {
                failed.push(from.quoted());
            }
        }
        if !failed.is_empty() {
            return Err(Error::new(
                err::ER_CANNOT_USER,
                format!("Operation RENAME USER failed for {}", failed.join(",")),
            ));
        }
        self.account_transaction(|s, user, grants| {
            for (from, to) in pairs {
                let mut a = dir.get(from).cloned().expect("checked above");
                // The rows are keyed by the stored name, whatever the statement's spelling.
                let stored = a.name.clone();
                s.raw_delete(user, account_key(&stored))?;
                a.name = to.clone();
                s.raw_write(user, account_row(&a))?;
                for key in grant_keys(s, grants, &stored)? {
                    let row = s.scan(grants, &key)?.into_iter().next().unwrap_or_default();
                    s.raw_delete(grants, key)?;
                    if row.len() == 5 {
                        let mut row = row;
                        row[0] = Value::Text(to.host.clone());
                        row[1] = Value::Text(to.user.clone());
                        s.raw_write(grants, row)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// GRANT (or, with `grant` false, REVOKE), after the keyword.
    fn grant(&mut self, p: &mut Parser, me: &AccountName, grant: bool) -> Result<Outcome> {
        let verb = if grant { "GRANT" } else { "REVOKE" };
        let (privs, all, column_privs) = p.privileges()?;
        // REVOKE ALL [PRIVILEGES], GRANT OPTION FROM ...: every level.
        if !grant
            && all
            && privs == Privs::GRANT_OPTION
            && column_privs.is_empty()
            && p.word("FROM")
        {
            let names = p.accounts(me)?;
            p.end()?;
            self.require_global(Privs::CREATE_USER)?;
            return self.revoke_everything(&names);
        }
        p.expect("ON")?;
        let db = self.session.vars.database.clone();
        let routine = p.routine_level(db.as_deref())?;
        let level = match &routine {
            Some((_, d, r)) => Level::Routine(d.clone(), r.clone()),
            None => p.level(db.as_deref())?,
        };
        p.expect(if grant { "TO" } else { "FROM" })?;
        let names = p.accounts(me)?;
        let mut with_grant = false;
        if grant && p.words(&["WITH", "GRANT", "OPTION"]) {
            with_grant = true;
        }
        p.end()?;
        let mut set = privs;
        if all {
            set = set | Privs::all_at(&level);
        }
        if with_grant {
            set = set | Privs::GRANT_OPTION;
        }
        let invalid = privs.invalid_at(&level);
        let columns_elsewhere = !column_privs.is_empty() && !matches!(level, Level::Table(..));
        if !invalid.is_empty() || columns_elsewhere {
            // Columns anywhere but on a table are 1144 too, as MySQL answers.
            return Err(match level {
                _ if columns_elsewhere => Error::new(
                    err::ER_ILLEGAL_GRANT_FOR_TABLE,
                    "Illegal GRANT/REVOKE command; please consult the manual to see which privileges can be used",
                ),
                Level::Table(..) | Level::Routine(..) => Error::new(
                    err::ER_ILLEGAL_GRANT_FOR_TABLE,
                    "Illegal GRANT/REVOKE command; please consult the manual to see which privileges can be used",
                ),
                _ => Error::new(
                    err::ER_WRONG_USAGE,
                    "Incorrect usage of DB GRANT and GLOBAL PRIVILEGES",
                ),
            });
        }
        // Column privileges name the columns as the table spells them; an unknown one is
        // MySQL's 1054, naming the table where a statement's would name its clause.
        let mut columns: Vec<(String, Privs)> = Vec::new();
        if let Level::Table(d, t) = &level {
            let Some(def) = self.engine().table_def(d, t) else {
                return Err(Error::new(
                    code::ER_NO_SUCH_TABLE,
                    format!("Table '{d}.{t}' doesn't exist"),
                ));
            };
            for (cp, names) in &column_privs {
                for n in names {
                    let Some(c) = def.columns.iter().find(|c| {
                        c.name.eq_ignore_ascii_case(n) && c.name != ringrep_engine::HIDDEN_ROW_ID
                    }) else {
                        return Err(Error::new(
                            code::ER_BAD_FIELD_ERROR,
                            format!("Unknown column '{n}' in '{t}'"),
                        ));
                    };
                    match columns.iter_mut().find(|(x, _)| *x == c.name) {
                        Some((_, have)) => *have = *have | *cp,
                        None => columns.push((c.name.clone(), *cp)),
                    }
                }
            }
        }
        if let (Some((procedure, d, r)), true) = (&routine, grant) {
            // ringrep has stored procedures only: a function never exists. As MySQL, only
            // GRANT asks (REVOKE answers 1403 for a grant it does not find).
            let exists = *procedure && self.procedure_exists(d, r)?;
            if !exists {
                let kind = if *procedure { "PROCEDURE" } else { "FUNCTION" };
                return Err(Error::new(
                    code::ER_SP_DOES_NOT_EXIST,
                    format!("{kind} {d}.{r} does not exist"),
                ));
            }
        }
        let column_set = columns.iter().fold(Privs::NONE, |a, (_, p)| a | *p);
        self.may_grant(verb, &level, set | column_set)?;
        let dir = Directory::read(self.engine());
        for n in &names {
            if dir.get(n).is_none() {
                return Err(if grant {
                    Error::new(
                        err::ER_CANT_CREATE_USER_WITH_GRANT,
                        "You are not allowed to create a user with GRANT",
                    )
                } else {
                    no_such_grant(n)
                });
            }
        }
        // Names fold to lower case as ringrep's tables do, so a level has one row.
        let (db_col, table_col) = match &level {
            Level::Global => (String::new(), String::new()),
            Level::Database(d) => (d.to_lowercase(), String::new()),
            Level::Table(d, t) => (d.to_lowercase(), t.to_lowercase()),
            Level::Routine(d, r) => (d.to_lowercase(), routine_key(r)),
        };
        let mut rows = Vec::new();
        for n in &names {
            // Keyed by the stored account's name, whatever the statement's spelling.
            let n = &dir.get(n).map_or_else(|| n.clone(), |a| a.name.clone());
            let grants = dir.grants_of(n);
            let held = held_at(&grants, &level);
            let held_columns = match &level {
                Level::Table(d, t) => grants.column_grants(d, t).to_vec(),
                _ => Vec::new(),
            };
            let (next, next_columns) = if grant {
                (held | set, merge_columns(held_columns, &columns))
            } else {
                // What the level holds: its own privileges and, for a table, its columns'.
                let held_any = held_columns.iter().fold(held, |a, (_, p)| a | *p);
                let table_part = !privs.is_empty() || all || column_privs.is_empty();
                if table_part && (held_any.is_empty() || (!all && !held_any.contains(privs))) {
                    return Err(match &level {
                        // MySQL names the routine without its database there.
                        Level::Routine(_, r) => no_such_routine_grant(n, r),
                        // MySQL names the table when it holds nothing there.
                        Level::Table(_, t) if held_any.is_empty() => no_such_table_grant(n, t),
                        _ => no_such_grant(n),
                    });
                }
                // A column privilege revoked must be held on that column (1147 otherwise).
                for (c, cp) in &columns {
                    let have = held_columns
                        .iter()
                        .find(|(x, _)| x.eq_ignore_ascii_case(c))
                        .map_or(Privs::NONE, |(_, p)| *p);
                    if !have.contains(*cp) {
                        let Level::Table(_, t) = &level else {
                            unreachable!("columns are a table's")
                        };
                        return Err(no_such_table_grant(n, t));
                    }
                }
                // As MySQL: a privilege revoked on the table leaves none of its columns
                // holding it either.
                let revoked = set.without(Privs::GRANT_OPTION);
                let remaining = held_columns
                    .into_iter()
                    .map(|(c, p)| {
                        let named = columns
                            .iter()
                            .find(|(x, _)| x.eq_ignore_ascii_case(&c))
                            .map_or(Privs::NONE, |(_, cp)| *cp);
                        (c, p.without(revoked).without(named))
                    })
                    .filter(|(_, p)| !p.is_empty())
                    .collect();
                (held.without(set), remaining)
            };
            rows.push((n.clone(), next, next_columns));
        }
        self.account_transaction(|s, _, grants| {
            for (n, next, cols) in &rows {
                if next.is_empty() && cols.is_empty() {
                    s.raw_delete(grants, grant_key(n, &db_col, &table_col))?;
                } else if cols.is_empty() {
                    s.raw_write(grants, grants_row(n, &db_col, &table_col, *next))?;
                } else {
                    s.raw_write(
                        grants,
                        table_grants_row(n, &db_col, &table_col, *next, cols),
                    )?;
                }
            }
            Ok(())
        })
    }

    /// GRANT and REVOKE need GRANT OPTION and the privileges themselves at the level.
    fn may_grant(&self, verb: &str, level: &Level, set: Privs) -> Result<()> {
        let Some(g) = self.my_grants() else {
            return Ok(());
        };
        let need = set | Privs::GRANT_OPTION;
        let ok = match level {
            Level::Global => g.global.contains(need),
            Level::Database(d) => g.allows(need, d, None),
            Level::Table(d, t) => g.allows(need, d, Some(t)),
            Level::Routine(d, r) => g.on_routine(d, r).contains(need),
        };
        if ok {
            return Ok(());
        }
        let a = self
            .authority
            .as_ref()
            .expect("grants come with an authority");
        let who = format!("'{}'@'{}'", a.account.user, a.client_host);
        Err(match level {
            Level::Global => Error::new(
                code::ER_ACCESS_DENIED_ERROR,
                format!("Access denied for user {who} (using password: YES)"),
            ),
            Level::Database(d) => Error::new(
                code::ER_DBACCESS_DENIED_ERROR,
                format!("Access denied for user {who} to database '{d}'"),
            ),
            Level::Table(_, t) => Error::new(
                code::ER_TABLEACCESS_DENIED_ERROR,
                format!("{verb} command denied to user {who} for table '{t}'"),
            ),
            Level::Routine(d, r) => self.routine_denied("grant", d, r),
        })
    }

    /// MySQL's `automatic_sp_privileges` (always on in ringrep) after CREATE PROCEDURE
    /// `db.name`: an account that could not both run and alter the procedure it made is
    /// granted EXECUTE and ALTER ROUTINE on it. The node's own accounts hold both already.
    pub(crate) fn grant_creator_routine(&mut self, db: &str, name: &str) -> Result<()> {
        let both = Privs::EXECUTE | Privs::ALTER_ROUTINE;
        let Some(g) = self.my_grants() else {
            return Ok(());
        };
        if g.on_routine(db, name).contains(both) {
            return Ok(());
        }
        let dir = Directory::read(self.engine());
        let me = self.me();
        let Some(account) = dir.get(&me) else {
            return Ok(());
        };
        let who = account.name.clone();
        let level = Level::Routine(db.to_string(), name.to_string());
        let held = held_at(&dir.grants_of(&who), &level);
        let (db_col, table_col) = (db.to_lowercase(), routine_key(name));
        self.account_transaction(|s, _, grants| {
            s.raw_write(grants, grants_row(&who, &db_col, &table_col, held | both))
        })
        .map(|_| ())
    }

    /// MySQL's `automatic_sp_privileges` after DROP PROCEDURE `db.name`: every account's
    /// grant on the procedure goes with it, so that one made later under the name starts
    /// with none.
    pub(crate) fn revoke_routine_grants(&mut self, db: &str, name: &str) -> Result<()> {
        let dir = Directory::read(self.engine());
        let (db_col, table_col) = (db.to_lowercase(), routine_key(name));
        let holders: Vec<AccountName> = dir
            .grants
            .iter()
            .filter(|(_, g)| {
                g.routines
                    .iter()
                    .any(|((d, r), _)| d.eq_ignore_ascii_case(db) && r.eq_ignore_ascii_case(name))
            })
            .map(|(n, _)| n.clone())
            .collect();
        if holders.is_empty() {
            return Ok(());
        }
        self.account_transaction(|s, _, grants| {
            for n in &holders {
                s.raw_delete(grants, grant_key(n, &db_col, &table_col))?;
            }
            Ok(())
        })
        .map(|_| ())
    }

    fn revoke_everything(&mut self, names: &[AccountName]) -> Result<Outcome> {
        let dir = Directory::read(self.engine());
        if let Some(n) = names.iter().find(|n| dir.get(n).is_none()) {
            return Err(Error::new(
                err::ER_CANNOT_USER,
                format!("Operation REVOKE ALL failed for {}", n.quoted()),
            ));
        }
        self.account_transaction(|s, _, grants| {
            for n in names {
                let n = dir.get(n).map_or(n, |a| &a.name);
                for key in grant_keys(s, grants, n)? {
                    s.raw_delete(grants, key)?;
                }
            }
            Ok(())
        })
    }

    fn show_grants(&mut self, who: &AccountName) -> Result<Outcome> {
        let me = self.me();
        if !same_account(who, &me) {
            if let Some(g) = self.my_grants() {
                if !g.allows(Privs::SELECT, ringrep_engine::SYSTEM_DB, None) {
                    let a = self
                        .authority
                        .as_ref()
                        .expect("grants come with an authority");
                    return Err(Error::new(
                        code::ER_DBACCESS_DENIED_ERROR,
                        format!(
                            "Access denied for user '{}'@'{}' to database 'mysql'",
                            a.account.user, a.client_host
                        ),
                    ));
                }
            }
        }
        let dir = Directory::read(self.engine());
        let lines = match (dir.get(who), &self.authority) {
            (Some(a), _) => dir.grants_of(&a.name).show(&a.name),
            // The session's own account from the node's configuration: every privilege.
            (None, auth)
                if same_account(who, &me) && auth.as_ref().is_none_or(|a| a.grants.is_none()) =>
            {
                Grants {
                    global: Privs::all_at(&Level::Global) | Privs::GRANT_OPTION,
                    ..Default::default()
                }
                .show(who)
            }
            (None, _) => return Err(no_such_grant(who)),
        };
        let title = format!("Grants for {}@{}", who.user, who.host);
        Ok(Outcome::text(
            &[title.as_str()],
            lines.into_iter().map(|l| vec![Some(l)]).collect(),
        ))
    }

    /// Runs `f` on the account tables as one transaction of its own.
    fn account_transaction(
        &mut self,
        f: impl FnOnce(
            &mut ringrep_engine::Session,
            &binlog_format::schema::TableDef,
            &binlog_format::schema::TableDef,
        ) -> Result<()>,
    ) -> Result<Outcome> {
        let s = &mut self.session;
        // An implicit commit first, as MySQL's account statements do.
        s.commit()?;
        let (user, grants) = ensure_tables(s)?;
        s.begin()?;
        match f(s, &user, &grants) {
            Ok(()) => {
                s.commit()?;
                Ok(Outcome::Ok)
            }
            Err(e) => {
                s.rollback();
                Err(e)
            }
        }
    }
}

/// `ACCOUNT LOCK | ACCOUNT UNLOCK` (and `REQUIRE NONE`, which changes nothing).
fn account_options(p: &mut Parser) -> Result<Option<bool>> {
    let mut locked = None;
    loop {
        if p.words(&["ACCOUNT", "LOCK"]) {
            locked = Some(true);
        } else if p.words(&["ACCOUNT", "UNLOCK"]) {
            locked = Some(false);
        } else if p.words(&["REQUIRE", "NONE"]) {
        } else if p.done() {
            return Ok(locked);
        } else {
            return Err(Error::unsupported(format!(
                "account option {}",
                p.peek_word().unwrap_or("?")
            )));
        }
    }
}

fn no_such_grant(n: &AccountName) -> Error {
    Error::new(
        err::ER_NONEXISTING_GRANT,
        format!(
            "There is no such grant defined for user '{}' on host '{}'",
            n.user, n.host
        ),
    )
}

fn no_such_table_grant(n: &AccountName, table: &str) -> Error {
    Error::new(
        err::ER_NONEXISTING_TABLE_GRANT,
        format!(
            "There is no such grant defined for user '{}' on host '{}' on table '{table}'",
            n.user, n.host
        ),
    )
}

fn no_such_routine_grant(n: &AccountName, routine: &str) -> Error {
    Error::new(
        err::ER_NONEXISTING_PROC_GRANT,
        format!(
            "There is no such grant defined for user '{}' on host '{}' on routine '{routine}'",
            n.user, n.host
        ),
    )
}

/// `held` with the column privileges `more` added.
fn merge_columns(mut held: Vec<(String, Privs)>, more: &[(String, Privs)]) -> Vec<(String, Privs)> {
    for (c, p) in more {
        match held.iter_mut().find(|(x, _)| x.eq_ignore_ascii_case(c)) {
            Some((_, have)) => *have = *have | *p,
            None => held.push((c.clone(), *p)),
        }
    }
    held
}

/// What `g` holds at exactly `level`.
fn held_at(g: &Grants, level: &Level) -> Privs {
    match level {
        Level::Global => g.global,
        Level::Database(d) => g
            .databases
            .iter()
            .find(|(x, _)| x.eq_ignore_ascii_case(d))
            .map_or(Privs::NONE, |(_, p)| *p),
        Level::Table(d, t) => g
            .tables
            .iter()
            .find(|((x, y), _)| x.eq_ignore_ascii_case(d) && y.eq_ignore_ascii_case(t))
            .map_or(Privs::NONE, |(_, p)| *p),
        Level::Routine(d, r) => g
            .routines
            .iter()
            .find(|((x, y), _)| x.eq_ignore_ascii_case(d) && y.eq_ignore_ascii_case(r))
            .map_or(Privs::NONE, |(_, p)| *p),
    }
}

fn account_key(n: &AccountName) -> Vec<Value> {
    vec![Value::Text(n.host.clone()), Value::Text(n.user.clone())]
}

fn grant_key(n: &AccountName, db: &str, table: &str) -> Vec<Value> {
    vec![
        Value::Text(n.host.clone()),
        Value::Text(n.user.clone()),
        Value::Text(db.into()),
        Value::Text(table.into()),
    ]
}

/// The keys of every grants row of `n`.
fn grant_keys(
    s: &ringrep_engine::Session,
    grants: &binlog_format::schema::TableDef,
    n: &AccountName,
) -> Result<Vec<Vec<Value>>> {
    let rows = s.scan(grants, &account_key(n))?;
    Ok(rows
        .into_iter()
        .map(|r| Key(r.into_iter().take(4).collect()).0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser(text: &str) -> Parser {
        Parser {
            toks: tokens(text).expect("tokens"),
            at: 0,
        }
    }

    #[test]
    fn column_lists_attach_to_their_privilege() {
        let mut p = parser("SELECT (a, `b c`), INSERT (a), DELETE, UPDATE (x) ON t");
        let (set, all, cols) = p.privileges().expect("parses");
        assert_eq!(set, Privs::DELETE);
        assert!(!all);
        assert_eq!(
            cols,
            [
                (Privs::SELECT, vec!["a".to_string(), "b c".to_string()]),
                (Privs::INSERT, vec!["a".to_string()]),
                (Privs::UPDATE, vec!["x".to_string()]),
            ]
        );
        assert!(p.word("ON"));
        // Only SELECT, INSERT, UPDATE and REFERENCES take columns (a syntax error otherwise,
        // as in MySQL's grammar), and a list is closed.
        assert_eq!(
            parser("DELETE (a) ON t")
                .privileges()
                .expect_err("refused")
                .code,
            1064
        );
        assert_eq!(
            parser("SELECT (a ON t")
                .privileges()
                .expect_err("refused")
                .code,
            1064
        );
        assert_eq!(
            parser("SELECT () ON t")
                .privileges()
                .expect_err("refused")
                .code,
            1064
        );
    }

    #[test]
    fn routine_levels_name_a_procedure_or_a_function() {
        let mut p = parser("PROCEDURE shop.p TO u");
        assert_eq!(
            p.routine_level(None).expect("parses"),
            Some((true, "shop".to_string(), "p".to_string()))
        );
        let mut p = parser("FUNCTION f TO u");
        assert_eq!(
            p.routine_level(Some("db")).expect("parses"),
            Some((false, "db".to_string(), "f".to_string()))
        );
        assert_eq!(
            parser("FUNCTION f")
                .routine_level(None)
                .expect_err("refused")
                .code,
            1046
        );
        assert_eq!(
            parser("shop.t TO u").routine_level(None).expect("parses"),
            None
        );
    }
}
