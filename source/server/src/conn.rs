//! One client connection: a SQL session behind the MySQL protocol.
//!
//! Statements run on tokio's blocking pool (the engine waits on row locks), one at a time per
//! connection, in the order the client sends them. Their commits are awaited here, on the
//! connection's task, until durable (`Engine::wait_durable_async`); only then is the client
//! answered.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use opensrv_mysql::{
    AsyncMysqlShim, Column, ColumnFlags, ColumnType, InitWriter, OkResponse, ParamParser,
    QueryResultWriter, StatementMetaWriter, StatusFlags,
};
use tokio::io::AsyncWrite;

use super::wire::{self, Cell};
use super::Shared;
use ringrep_engine::error::{code, Error};
use ringrep_sql::{count_placeholders, Outcome, SqlSession};

pub(super) struct Conn {
    shared: Arc<Shared>,
    id: u32,
    salt: [u8; 20],
    /// `None` only while a statement runs on the blocking pool.
    sql: Option<SqlSession>,
    /// Prepared statements (protocol-level) by id: their text and placeholder count.
    statements: HashMap<u32, (String, usize)>,
    next_statement: u32,
    /// Parameter descriptions handed to the client at PREPARE (all sent as strings).
    param_columns: Vec<Column>,
}

impl Conn {
    pub(super) fn new(shared: Arc<Shared>, id: u32, salt: [u8; 20]) -> Conn {
        let mut sql = SqlSession::new(&shared.engine);
        // Commits return once logged; `run_with` awaits their durability before replying, so
        // no thread sleeps in the group commit per statement.
        sql.session.defer_durability = true;
        Conn {
            shared,
            id,
            salt,
            sql: Some(sql),
            statements: HashMap::new(),
            next_statement: 1,
            param_columns: Vec::new(),
        }
    }

    /// Runs one statement on the blocking pool.
    async fn run(&mut self, text: String) -> Result<(Outcome, OkResponse), Error> {
        self.run_with(text, None).await
    }

    /// Runs one statement on the blocking pool; with `params`, `text` is a prepared statement
    /// and they fill its placeholders.
    async fn run_with(
        &mut self,
        text: String,
        params: Option<Vec<binlog_format::Value>>,
    ) -> Result<(Outcome, OkResponse), Error> {
        let mut sql = self
            .sql
            .take()
            .ok_or_else(|| Error::internal("the session was lost by an earlier failure"))?;
        let busy = self.shared.busy.clone();
        // Held until the reply is ready, durability wait included: shutdown waits for it.
        let _busy = self.shared.busy.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let _busy = busy;
            let r = match &params {
                Some(values) => sql.execute_bound(&text, values),
                None => sql.execute(&text),
            };
            let pending = sql.session.take_pending_lsn();
            (sql, r, pending)
        })
        .await;
        let (sql, mut r, pending) =
            joined.map_err(|e| Error::internal(format!("statement failed: {e}")))?;
        // Nothing is acknowledged before what it committed is durable. (Also after an error:
        // an earlier statement of the same text may have committed.)
        if let Some(lsn) = pending {
            if let Err(e) = self.shared.engine.wait_durable_async(lsn).await {
                r = Err(e);
            }
        }
        let mut status = StatusFlags::empty();
        if sql.session.vars.autocommit {
            status |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if sql.session.in_transaction() {
            status |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        let ok = OkResponse {
            status_flags: status,
            last_insert_id: sql.last_insert_id,
            ..Default::default()
        };
        self.sql = Some(sql);
        r.map(|o| (o, ok))
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared
            .connections
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Sends a statement's outcome in whichever protocol the writer speaks.
async fn reply<W: AsyncWrite + Send + Unpin>(
    outcome: Result<(Outcome, OkResponse), Error>,
    w: QueryResultWriter<'_, W>,
) -> io::Result<()> {
    match outcome {
        Ok((Outcome::Rows(rs), _)) => {
            let (columns, encodings) = wire::columns(&rs);
            let mut rows = w.start(&columns).await?;
            for row in &rs.rows {
                for (i, value) in row.iter().enumerate() {
                    rows.write_col(Cell {
                        value,
                        encoding: encodings[i],
                        rs: &rs,
                        column: i,
                    })?;
                }
                rows.end_row().await?;
            }
            rows.finish().await
        }
        // The info line (`Records: 3  Duplicates: 0 ...`) is left out: opensrv-mysql writes it
        // unprefixed to clients without CLIENT_SESSION_TRACK, which such clients (mysql_async)
        // then fail to parse, losing the affected-row count with it.
        Ok((Outcome::Affected { rows, info: _ }, ok)) => {
            w.completed(OkResponse {
                affected_rows: rows,
                ..ok
            })
            .await
        }
        Ok((Outcome::Ok, ok)) => w.completed(ok).await,
        Err(e) => {
            let (kind, msg) = wire::error(&e);
            w.error(kind, msg.as_bytes()).await
        }
    }
}

#[async_trait]
impl<W: AsyncWrite + Send + Unpin> AsyncMysqlShim<W> for Conn {
    type Error = io::Error;

    fn version(&self) -> String {
        format!("8.0.36-ringrep-{}", env!("CARGO_PKG_VERSION"))
    }

    fn connect_id(&self) -> u32 {
        self.id
    }

    fn salt(&self) -> [u8; 20] {
        self.salt
    }

    async fn authenticate(
        &self,
        auth_plugin: &str,
        username: &[u8],
        salt: &[u8],
        auth_data: &[u8],
    ) -> bool {
        let user = String::from_utf8_lossy(username);
        let ok = auth_plugin == "mysql_native_password"
            && self.shared.accounts.check(&user, salt, auth_data);
        if ok {
            tracing::debug!(connection = self.id, %user, "authenticated");
        } else {
            tracing::warn!(connection = self.id, %user, "authentication failed");
        }
        ok
    }

    async fn on_prepare<'a>(
        &'a mut self,
        query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> io::Result<()> {
        let params = count_placeholders(query);
        let id = self.next_statement;
        self.next_statement += 1;
        self.statements.insert(id, (query.to_string(), params));
        while self.param_columns.len() < params {
            self.param_columns.push(Column {
                table: String::new(),
                column: "?".into(),
                coltype: ColumnType::MYSQL_TYPE_VAR_STRING,
                colflags: ColumnFlags::empty(),
            });
        }
        let this: &'a Conn = self;
        info.reply(id, &this.param_columns[..params], &[]).await
    }

    async fn on_execute<'a>(
        &'a mut self,
        id: u32,
        params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let Some((text, count)) = self.statements.get(&id).cloned() else {
            let e = Error::new(
                code::ER_UNKNOWN_STMT_HANDLER,
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            );
            return reply(Err(e), results).await;
        };
        let values: Vec<_> = params
            .into_iter()
            .map(|p| wire::param(p.value.into_inner()))
            .collect();
        if values.len() != count {
            let e = Error::new(
                code::ER_WRONG_ARGUMENTS,
                "Incorrect arguments to mysqld_stmt_execute",
            );
            return reply(Err(e), results).await;
        }
        let outcome = self.run_with(text, Some(values)).await;
        reply(outcome, results).await
    }

    async fn on_close<'a>(&'a mut self, stmt: u32)
    where
        W: 'async_trait,
    {
        self.statements.remove(&stmt);
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        tracing::trace!(connection = self.id, query, "query");
        let outcome = self.run(query.to_string()).await;
        reply(outcome, results).await
    }

    async fn on_init<'a>(&'a mut self, db: &'a str, w: InitWriter<'a, W>) -> io::Result<()> {
        match self.run(format!("USE `{}`", db.replace('`', "``"))).await {
            Ok(_) => w.ok().await,
            Err(e) => {
                let (kind, msg) = wire::error(&e);
                w.error(kind, msg.as_bytes()).await
            }
        }
    }
}
