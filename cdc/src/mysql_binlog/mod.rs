//! ringrep's binlog as MySQL's binary log events (binlog v4, row based), for the tools that
//! read MySQL's replication protocol: Debezium, Maxwell, Canal, go-mysql,
//! python-mysql-replication, ZongJi.
//!
//! A transaction of row events becomes `QUERY "BEGIN"`, a `TABLE_MAP` before the first rows
//! of each table (with `binlog_row_metadata=FULL`'s optional metadata: column names,
//! signedness, charsets, primary key), `WRITE_ROWS`/`UPDATE_ROWS`/`DELETE_ROWS` v2 events with
//! the rows, and an `XID`. DDL becomes `QUERY` events with a statement. As the spec says, an
//! overwrite of a ring slot is a row write (`WRITE_ROWS`), a TTL purge a row delete, and meta
//! rows are rows of their table like any other. A row update logged as a write
//! (`ndb_log_update_as_write`, RonDB's default) is a `WRITE_ROWS` event, as NDB logs it; a
//! delete's image has every column, the primary key's values and NULL for the others (the
//! binlog keeps only the key of a removed row).
//!
//! Positions: MySQL's `(file, position)` are ringrep's segment name and the byte position in
//! the MySQL encoding of that segment, as if it were a MySQL binlog file with CRC32 checksums:
//! 4 bytes of magic, the FORMAT_DESCRIPTION, each transaction's events one after the other,
//! and a ROTATE at the end of a full file. Each event's position is where the next one
//! starts, so `position - size` is the event's own start, as the tools compute it. The layout
//! is a function of the segment's contents, so it can be computed again to find where a
//! position is ([`Encoder::transaction`] gives the events of one transaction from a start).

mod types;

use std::collections::HashSet;

use crate::sql_text::{create_table_sql, quote_ident, sql_literal, CreateStyle};
use binlog_format::events::{DdlEvent, Event, RowChange, RowEvent, Transaction};
use binlog_format::schema::{Schema, TableDef, HIDDEN_ROW_ID};

/// MySQL's event type codes used here.
pub mod event_type {
    /// A statement (DDL, or BEGIN before a transaction's rows).
    pub const QUERY: u8 = 2;
    /// The next binlog file and where in it the stream goes on.
    pub const ROTATE: u8 = 4;
    /// The format of the events that follow.
    pub const FORMAT_DESCRIPTION: u8 = 15;
    /// The commit of a transaction.
    pub const XID: u8 = 16;
    /// A table's id, names and column types, before its rows.
    pub const TABLE_MAP: u8 = 19;
    /// Nothing new: the source is alive.
    pub const HEARTBEAT: u8 = 27;
    /// Inserted rows (version 2).
    pub const WRITE_ROWS: u8 = 30;
    /// Updated rows, before and after image (version 2).
    pub const UPDATE_ROWS: u8 = 31;
    /// Deleted rows (version 2).
    pub const DELETE_ROWS: u8 = 32;
}

/// Bytes of an event header.
pub const HEADER_LEN: usize = 19;
/// `LOG_EVENT_ARTIFICIAL_F`: an event made up for the stream, not in any file.
const ARTIFICIAL: u16 = 0x20;
/// `STMT_END_F` in a rows event's flags: the statement's last.
const STMT_END: u16 = 0x0001;
/// Rows per event are cut at about this many bytes, as MySQL cuts them.
const ROWS_EVENT_BYTES: usize = 8 * 1024;

/// The post-header length of each event type 1..=41, as MySQL 8.0 declares them.
const POST_HEADER_LENGTHS: [u8; 41] = [
    56, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10,
    10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0,
];

/// Writes events: the header with the source's server id, and the CRC32 footer when the
/// client asked for checksums (`SET @master_binlog_checksum`).
#[derive(Debug, Clone)]
pub struct EventWriter {
    /// The source's server id, in every header.
    pub server_id: u32,
    /// Whether each event ends with its CRC32.
    pub checksum: bool,
    /// What FORMAT_DESCRIPTION says the server is.
    pub server_version: String,
}

/// A length-encoded integer, as MySQL's protocol writes them.
fn lenenc(n: u64, out: &mut Vec<u8>) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// A bitmap of `n` bits, bit `i` (least significant first) set when `set(i)`.
fn bitmap(n: usize, set: impl Fn(usize) -> bool, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + n.div_ceil(8), 0);
    for i in (0..n).filter(|&i| set(i)) {
        out[start + i / 8] |= 1 << (i % 8);
    }
}

impl EventWriter {
    /// One event: header, body and, with checksums, the CRC32 of both.
    pub fn event(&self, ty: u8, timestamp: u32, log_pos: u32, flags: u16, body: &[u8]) -> Vec<u8> {
        let size = HEADER_LEN + body.len() + if self.checksum { 4 } else { 0 };
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&timestamp.to_le_bytes());
        out.push(ty);
        out.extend_from_slice(&self.server_id.to_le_bytes());
        out.extend_from_slice(&(size as u32).to_le_bytes());
        out.extend_from_slice(&log_pos.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(body);
        if self.checksum {
            let crc = crc32fast::hash(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        out
    }

    /// ROTATE to `file` at `position`: artificial at the start of a stream (where it is),
    /// real at the end of a file (where the stream goes on).
    pub fn rotate(&self, file: &str, position: u64, artificial: bool, log_pos: u32) -> Vec<u8> {
        let mut body = position.to_le_bytes().to_vec();
        body.extend_from_slice(file.as_bytes());
        let flags = if artificial { ARTIFICIAL } else { 0 };
        self.event(event_type::ROTATE, 0, log_pos, flags, &body)
    }

    /// FORMAT_DESCRIPTION: binlog version 4, this server, the post-header lengths and the
    /// checksum algorithm (0 none, 1 CRC32).
    pub fn format_description(&self, timestamp: u32, log_pos: u32) -> Vec<u8> {
        let mut body = Vec::with_capacity(100);
        body.extend_from_slice(&4u16.to_le_bytes());
        let mut version = [0u8; 50];
        let v = self.server_version.as_bytes();
        version[..v.len().min(49)].copy_from_slice(&v[..v.len().min(49)]);
        body.extend_from_slice(&version);
        body.extend_from_slice(&timestamp.to_le_bytes());
        body.push(HEADER_LEN as u8);
        body.extend_from_slice(&POST_HEADER_LENGTHS);
        body.push(u8::from(self.checksum));
        self.event(event_type::FORMAT_DESCRIPTION, timestamp, log_pos, 0, &body)
    }

    /// HEARTBEAT: the stream is alive; `file` and `log_pos` say where it stands.
    pub fn heartbeat(&self, file: &str, log_pos: u32) -> Vec<u8> {
        self.event(event_type::HEARTBEAT, 0, log_pos, 0, file.as_bytes())
    }
}

/// The columns a MySQL client sees: all but the hidden row id of a table without a primary
/// key.
fn visible(table: &TableDef) -> Vec<usize> {
    (0..table.columns.len())
        .filter(|&i| table.columns[i].name != HIDDEN_ROW_ID)
        .collect()
}

/// TABLE_MAP's body for `table`.
fn table_map_body(table: &TableDef) -> Vec<u8> {
    let cols = visible(table);
    let mut b = Vec::new();
    b.extend_from_slice(&table.id.to_le_bytes()[..6]);
    b.extend_from_slice(&1u16.to_le_bytes());
    for name in [&table.database, &table.name] {
        let n = &name.as_bytes()[..name.len().min(255)];
        b.push(n.len() as u8);
        b.extend_from_slice(n);
        b.push(0);
    }
    lenenc(cols.len() as u64, &mut b);
    for &c in &cols {
        b.push(types::type_code(&table.columns[c].ty));
    }
    let mut meta = Vec::new();
    for &c in &cols {
        types::metadata(&table.columns[c].ty, &mut meta);
    }
    lenenc(meta.len() as u64, &mut b);
    b.extend_from_slice(&meta);
    bitmap(cols.len(), |i| table.columns[cols[i]].nullable, &mut b);
    // binlog_row_metadata=FULL.
    let tlv = |ty: u8, value: &[u8], b: &mut Vec<u8>| {
        b.push(ty);
        lenenc(value.len() as u64, b);
        b.extend_from_slice(value);
    };
    let numeric: Vec<bool> = cols
        .iter()
        // The columns that count as numeric for SIGNEDNESS.
        .filter(|&&c| table.columns[c].ty.is_number())
        .map(|&c| table.columns[c].ty.is_unsigned())
        .collect();
    if !numeric.is_empty() {
        let mut v = vec![0u8; numeric.len().div_ceil(8)];
        for (i, _) in numeric.iter().enumerate().filter(|(_, u)| **u) {
            v[i / 8] |= 0x80 >> (i % 8);
        }
        tlv(1, &v, &mut b);
    }
    let charsets: Vec<u64> = cols
        .iter()
        .filter_map(|&c| types::collation(&table.columns[c].ty))
        .collect();
    if !charsets.is_empty() {
        let mut v = Vec::new();
        lenenc(types::UTF8MB4_0900_AI_CI, &mut v);
        for (i, c) in charsets.iter().enumerate() {
            if *c != types::UTF8MB4_0900_AI_CI {
                lenenc(i as u64, &mut v);
                lenenc(*c, &mut v);
            }
        }
        tlv(2, &v, &mut b);
    }
    let mut names = Vec::new();
    for &c in &cols {
        let n = table.columns[c].name.as_bytes();
        lenenc(n.len() as u64, &mut names);
        names.extend_from_slice(n);
    }
    tlv(4, &names, &mut b);
    // SET_STR_VALUE and ENUM_STR_VALUE: each SET's and ENUM's members, then their charset
    // (ENUM_AND_SET_DEFAULT_CHARSET), which readers need to name a value from its number.
    let members = |set: bool| -> Vec<&Vec<String>> {
        cols.iter()
            .filter_map(|&c| match &table.columns[c].ty {
                binlog_format::schema::ColumnType::Set { values } if set => Some(values),
                binlog_format::schema::ColumnType::Enum { values } if !set => Some(values),
                _ => None,
            })
            .collect()
    };
    let (sets, enums) = (members(true), members(false));
    for (kind, lists) in [(5u8, &sets), (6u8, &enums)] {
        if lists.is_empty() {
            continue;
        }
        let mut v = Vec::new();
        for values in lists.iter() {
            lenenc(values.len() as u64, &mut v);
            for m in values.iter() {
                lenenc(m.len() as u64, &mut v);
                v.extend_from_slice(m.as_bytes());
            }
        }
        tlv(kind, &v, &mut b);
    }
    let pk: Vec<usize> = table
        .primary_key
        .iter()
        .filter_map(|p| cols.iter().position(|c| c == p))
        .collect();
    if !pk.is_empty() {
        let mut v = Vec::new();
        for p in pk {
            lenenc(p as u64, &mut v);
        }
        tlv(8, &v, &mut b);
    }
    if !enums.is_empty() || !sets.is_empty() {
        let mut v = Vec::new();
        lenenc(types::UTF8MB4_0900_AI_CI, &mut v);
        tlv(10, &v, &mut b);
    }
    b
}

/// One row image: the null bitmap of the present columns, then their values.
fn row_image(
    table: &TableDef,
    cols: &[usize],
    values: &[Option<&binlog_format::Value>],
    out: &mut Vec<u8>,
) {
    bitmap(cols.len(), |i| values[i].is_none_or(|v| v.is_null()), out);
    for (i, &c) in cols.iter().enumerate() {
        if let Some(v) = values[i].filter(|v| !v.is_null()) {
            types::value(&table.columns[c].ty, v, out);
        }
    }
}

/// The kind of a rows event and the rows it carries, as images.
#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Write,
    Update,
    Delete,
}

/// The statement a DDL event stands for, and the database it runs in.
fn ddl_statement(schema: &Schema, d: &DdlEvent) -> Vec<(String, String)> {
    let default_text = |v: &binlog_format::Value, _: &binlog_format::ColumnType| sql_literal(v);
    let style = CreateStyle {
        qualified: true,
        engine: "ndbcluster",
        default_text: &default_text,
    };
    let q = |db: &str, name: &str| format!("{}.{}", quote_ident(db), quote_ident(name));
    match d {
        DdlEvent::CreateDatabase { name } => {
            vec![(
                name.clone(),
                format!("CREATE DATABASE {}", quote_ident(name)),
            )]
        }
        DdlEvent::DropDatabase { name } => {
            vec![(name.clone(), format!("DROP DATABASE {}", quote_ident(name)))]
        }
        DdlEvent::CreateTable { table } => {
            vec![(table.database.clone(), create_table_sql(table, &style))]
        }
        // The binlog keeps the new definition, not the statement: a client sees the table
        // dropped and created again with it, then the rows it keeps written again (as the
        // binlog has them), so a copy that applies the DDL ends with the table's rows.
        DdlEvent::AlterTable { table } => {
            let (db, name) = schema
                .tables
                .get(&table.id)
                .map_or((&table.database, &table.name), |t| (&t.database, &t.name));
            vec![
                (db.clone(), format!("DROP TABLE {}", q(db, name))),
                (table.database.clone(), create_table_sql(table, &style)),
            ]
        }
        DdlEvent::DropTable { database, name, .. } => {
            vec![(
                database.clone(),
                format!("DROP TABLE {}", q(database, name)),
            )]
        }
        DdlEvent::TruncateTable { table_id } => match schema.tables.get(table_id) {
            Some(t) => vec![(
                t.database.clone(),
                format!("TRUNCATE TABLE {}", q(&t.database, &t.name)),
            )],
            None => vec![],
        },
    }
}

/// One event of a transaction before it has its position.
enum Part {
    /// `QUERY "BEGIN"` before rows.
    Begin,
    /// A statement (DDL) in database `db`.
    Statement { db: String, sql: String },
    /// TABLE_MAP or a rows event.
    Event { ty: u8, flags: u16, body: Vec<u8> },
    /// The commit.
    Xid,
}

/// Rows being gathered into one rows event: table, kind, body so far.
struct Gathering {
    table_id: u64,
    kind: Kind,
    body: Vec<u8>,
}

impl Gathering {
    fn part(self) -> Part {
        let ty = match self.kind {
            Kind::Write => event_type::WRITE_ROWS,
            Kind::Update => event_type::UPDATE_ROWS,
            Kind::Delete => event_type::DELETE_ROWS,
        };
        Part::Event {
            ty,
            flags: 0,
            body: self.body,
        }
    }
}

/// Turns transactions into MySQL events.
#[derive(Debug, Clone)]
pub struct Encoder {
    /// The event writer (server id, checksums).
    pub writer: EventWriter,
}

impl Encoder {
    /// The events of `tx`, read with `schema` (the schema before it: its DDL is applied to
    /// `schema` here), laid out from position `start` of the MySQL file, and the position
    /// after them. `keep` says which events a client is sent (the node's own bookkeeping is
    /// not). None when nothing of the transaction is kept (the position stays).
    pub fn transaction(
        &self,
        schema: &mut Schema,
        tx: &Transaction,
        start: u64,
        keep: &dyn Fn(&Event) -> bool,
    ) -> (Vec<Vec<u8>>, u64) {
        let ts = (tx.commit_time_us.max(0) / 1_000_000) as u32;
        let mut parts: Vec<Part> = Vec::new();
        let mut mapped = HashSet::new();
        let mut gathering: Option<Gathering> = None;
        let mut open = false;
        for ev in tx.events.iter().filter(|e| keep(e)) {
            match ev {
                Event::Ddl(d) => {
                    if let Some(g) = gathering.take() {
                        parts.push(g.part());
                    }
                    if open {
                        parts.push(Part::Xid);
                        open = false;
                    }
                    for (db, sql) in ddl_statement(schema, d) {
                        parts.push(Part::Statement { db, sql });
                    }
                    schema.apply(d);
                    mapped.clear();
                }
                Event::Row(r) => {
                    let Some(table) = schema.tables.get(&r.table_id) else {
                        continue;
                    };
                    let kind = match r.change {
                        RowChange::Write { .. } => Kind::Write,
                        RowChange::Update { .. } => Kind::Update,
                        RowChange::Delete { .. } => Kind::Delete,
                    };
                    let same = gathering.as_ref().is_some_and(|g| {
                        g.table_id == r.table_id
                            && g.kind == kind
                            && g.body.len() < ROWS_EVENT_BYTES
                    });
                    if !same {
                        if let Some(g) = gathering.take() {
                            parts.push(g.part());
                        }
                        if !open {
                            parts.push(Part::Begin);
                            open = true;
                        }
                        if mapped.insert(r.table_id) {
                            parts.push(Part::Event {
                                ty: event_type::TABLE_MAP,
                                flags: 0,
                                body: table_map_body(table),
                            });
                        }
                        gathering = Some(Gathering {
                            table_id: r.table_id,
                            kind,
                            body: rows_header(table, kind),
                        });
                    }
                    if let Some(g) = gathering.as_mut() {
                        rows_row(table, r, &mut g.body);
                    }
                }
            }
        }
        if let Some(g) = gathering.take() {
            parts.push(g.part());
        }
        if open {
            parts.push(Part::Xid);
        }
        // The last rows event before each commit ends its statement.
        let mut ends = false;
        for part in parts.iter_mut().rev() {
            match part {
                Part::Xid => ends = true,
                Part::Event { ty, body, .. } if ends && *ty != event_type::TABLE_MAP => {
                    // The rows event's own flags, after the table id.
                    body[6] |= STMT_END as u8;
                    ends = false;
                }
                _ => {}
            }
        }
        let mut pos = start;
        let events = parts
            .into_iter()
            .map(|part| {
                let event = |ty: u8, flags: u16, body: &[u8], pos: &mut u64| {
                    // Positions are those of a file written with CRC32, whatever this client
                    // asked for.
                    *pos += (HEADER_LEN + body.len() + 4) as u64;
                    let at = (*pos).min(u64::from(u32::MAX)) as u32;
                    self.writer.event(ty, ts, at, flags, body)
                };
                match part {
                    Part::Begin => event(event_type::QUERY, 0, &query_body("", "BEGIN"), &mut pos),
                    Part::Statement { db, sql } => {
                        event(event_type::QUERY, 0, &query_body(&db, &sql), &mut pos)
                    }
                    Part::Event { ty, flags, body } => event(ty, flags, &body, &mut pos),
                    Part::Xid => event(event_type::XID, 0, &tx.seq.to_le_bytes(), &mut pos),
                }
            })
            .collect();
        (events, pos)
    }
}

/// Bytes of the FORMAT_DESCRIPTION event in a file with CRC32 (its body has a fixed size).
pub const FORMAT_DESCRIPTION_LEN: u64 = (HEADER_LEN + 2 + 50 + 4 + 1 + 41 + 1 + 4) as u64;

/// Bytes of a ROTATE to `next_file` in a file with CRC32.
pub fn rotate_len(next_file: &str) -> u64 {
    (HEADER_LEN + 8 + next_file.len() + 4) as u64
}

/// Where a MySQL binlog file's first event starts (after its magic number).
pub const FILE_START: u64 = 4;

/// A QUERY event's body: post-header, status variables (flags, SQL mode, charsets), the
/// database and the statement.
fn query_body(db: &str, sql: &str) -> Vec<u8> {
    let mut status = Vec::new();
    // Q_FLAGS2_CODE, Q_SQL_MODE_CODE, Q_CHARSET_CODE (client, connection, server).
    status.push(0);
    status.extend_from_slice(&0u32.to_le_bytes());
    status.push(1);
    status.extend_from_slice(&0u64.to_le_bytes());
    status.push(4);
    for _ in 0..3 {
        status.extend_from_slice(&255u16.to_le_bytes());
    }
    let db = &db.as_bytes()[..db.len().min(255)];
    let mut body = Vec::with_capacity(13 + status.len() + db.len() + 1 + sql.len());
    body.extend_from_slice(&1u32.to_le_bytes()); // thread id
    body.extend_from_slice(&0u32.to_le_bytes()); // execution time
    body.push(db.len() as u8);
    body.extend_from_slice(&0u16.to_le_bytes()); // error code
    body.extend_from_slice(&(status.len() as u16).to_le_bytes());
    body.extend_from_slice(&status);
    body.extend_from_slice(db);
    body.push(0);
    body.extend_from_slice(sql.as_bytes());
    body
}

/// A rows event's post-header and the start of its body: table id, flags (set later), extra
/// data (none), column count and the columns present.
fn rows_header(table: &TableDef, kind: Kind) -> Vec<u8> {
    let cols = visible(table);
    let mut b = Vec::new();
    b.extend_from_slice(&table.id.to_le_bytes()[..6]);
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    lenenc(cols.len() as u64, &mut b);
    // Every column is present, as with binlog_row_image=FULL (a delete's image has its other
    // columns NULL: the binlog keeps only the key of a removed row).
    bitmap(cols.len(), |_| true, &mut b);
    if kind == Kind::Update {
        bitmap(cols.len(), |_| true, &mut b);
    }
    b
}

/// Appends one row change's images to a rows event's body.
fn rows_row(table: &TableDef, r: &RowEvent, body: &mut Vec<u8>) {
    let cols = visible(table);
    fn full<'r>(
        cols: &[usize],
        row: &'r [binlog_format::Value],
    ) -> Vec<Option<&'r binlog_format::Value>> {
        cols.iter().map(|&c| row.get(c)).collect()
    }
    // The primary key's values in their columns, nothing in the others.
    fn keyed<'r>(
        table: &TableDef,
        cols: &[usize],
        key: &'r [binlog_format::Value],
    ) -> Vec<Option<&'r binlog_format::Value>> {
        cols.iter()
            .map(|c| {
                table
                    .primary_key
                    .iter()
                    .position(|p| p == c)
                    .and_then(|k| key.get(k))
            })
            .collect()
    }
    match &r.change {
        RowChange::Write { row } => row_image(table, &cols, &full(&cols, row), body),
        RowChange::Update { key, after, before } => {
            match before {
                Some(b) => row_image(table, &cols, &full(&cols, b), body),
                // Without a before image, the key is what is known of the old row.
                None => row_image(table, &cols, &keyed(table, &cols, key), body),
            }
            row_image(table, &cols, &full(&cols, after), body);
        }
        RowChange::Delete { key } => row_image(table, &cols, &keyed(table, &cols, key), body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use binlog_format::events::{Cause, DdlEvent};
    use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, LobSize};
    use binlog_format::value::Value;
    use mysql_common::binlog::consts::BinlogVersion;
    use mysql_common::binlog::events::{EventData, TableMapEvent};
    use mysql_common::binlog::row::BinlogRow;
    use mysql_common::binlog::value::BinlogValue;
    use mysql_common::binlog::EventStreamReader;

    fn col(name: &str, ty: ColumnType, nullable: bool) -> ColumnDef {
        ColumnDef::plain(name, ty, nullable)
    }

    fn table() -> TableDef {
        TableDef {
            id: 7,
            database: "test".into(),
            name: "t".into(),
            columns: vec![
                col(
                    "id",
                    ColumnType::Integer {
                        width: IntWidth::Int,
                        unsigned: false,
                    },
                    false,
                ),
                col(
                    "ring_idx",
                    ColumnType::Integer {
                        width: IntWidth::Int,
                        unsigned: true,
                    },
                    false,
                ),
                col("ring_meta", ColumnType::VarBinary { len: 64 }, true),
                col("name", ColumnType::VarChar { len: 100 }, true),
                col("code", ColumnType::Char { len: 3 }, true),
                col(
                    "amount",
                    ColumnType::Decimal {
                        precision: 8,
                        scale: 2,
                    },
                    true,
                ),
                col(
                    "big",
                    ColumnType::Integer {
                        width: IntWidth::Big,
                        unsigned: true,
                    },
                    true,
                ),
                col("ratio", ColumnType::Double, true),
                col(
                    "note",
                    ColumnType::Text {
                        size: LobSize::Normal,
                    },
                    true,
                ),
                col("day", ColumnType::Date, true),
                col("at", ColumnType::DateTime { fsp: 3 }, true),
                col("ts", ColumnType::Timestamp { fsp: 6 }, true),
                col("doc", ColumnType::Json, true),
                col("dur", ColumnType::Time { fsp: 3 }, true),
                col("dur6", ColumnType::Time { fsp: 6 }, true),
                col("flags", ColumnType::Bit { width: 12 }, true),
            ],
            primary_key: vec![0, 1],
            indexes: vec![],
            ring: None,
            ttl: None,
            partitioning: None,
            comment: None,
        }
    }

    fn row() -> Vec<Value> {
        vec![
            Value::Int(-5),
            Value::UInt(2),
            Value::Null,
            Value::Text("héllo".into()),
            Value::Text("ab".into()),
            Value::Decimal("-12.50".into()),
            Value::UInt(u64::MAX),
            Value::Double(0.25),
            Value::Text("a note".into()),
            Value::Date(binlog_format::value::Date {
                year: 2026,
                month: 12,
                day: 1,
            }),
            Value::DateTime(binlog_format::value::DateTime {
                date: binlog_format::value::Date {
                    year: 2026,
                    month: 12,
                    day: 1,
                },
                hour: 17,
                minute: 5,
                second: 9,
                micros: 123_000,
            }),
            Value::Timestamp(1_764_608_709_000_042),
            Value::Json(r#"{"k":[1,"two",null,true],"a":2.5}"#.into()),
            Value::Time(-93_784_500_000),
            Value::Time(720_001_000_001),
            Value::Bit(0x8A1),
        ]
    }

    /// What mysql_common makes of the events, as text per value.
    fn decode(events: &[Vec<u8>]) -> (Vec<String>, Vec<Vec<Vec<String>>>) {
        let mut reader = EventStreamReader::new(BinlogVersion::Version4);
        let mut kinds = Vec::new();
        let mut rows = Vec::new();
        let mut tme: Option<TableMapEvent<'static>> = None;
        for e in events {
            let ev = reader
                .read(&e[..])
                .expect("a valid event")
                .expect("an event");
            let data = ev.read_data().expect("readable").expect("known");
            let text = |r: &BinlogRow| -> Vec<String> {
                (0..r.len())
                    .map(|i| match r.as_ref(i) {
                        Some(BinlogValue::Value(v)) => v.as_sql(true),
                        Some(BinlogValue::Jsonb(j)) => serde_json::Value::try_from(j.clone())
                            .map_or("bad json".into(), |j| j.to_string()),
                        other => format!("{other:?}"),
                    })
                    .collect()
            };
            match data {
                EventData::FormatDescriptionEvent(_) => kinds.push("FDE".into()),
                EventData::QueryEvent(q) => kinds.push(format!("QUERY {}", q.query())),
                EventData::TableMapEvent(t) => {
                    kinds.push(format!(
                        "TABLE_MAP {}.{}",
                        t.database_name(),
                        t.table_name()
                    ));
                    tme = Some(t.into_owned());
                }
                EventData::RowsEvent(r) => {
                    kinds.push("ROWS".into());
                    let t = tme.as_ref().expect("a table map first");
                    let mut images = Vec::new();
                    for pair in r.rows(t) {
                        let (before, after) = pair.expect("a valid row");
                        images.push(before.as_ref().map(text).unwrap_or_default());
                        images.push(after.as_ref().map(text).unwrap_or_default());
                    }
                    rows.push(images);
                }
                EventData::XidEvent(x) => kinds.push(format!("XID {}", x.xid)),
                other => kinds.push(format!("{other:?}").chars().take(20).collect()),
            }
        }
        (kinds, rows)
    }

    /// DECIMAL UNSIGNED and FLOAT(M,D) UNSIGNED map to MySQL's own types and metadata, and
    /// SIGNEDNESS marks them unsigned as MySQL marks every unsigned number column.
    #[test]
    fn unsigned_decimals_and_sized_floats_in_a_table_map() {
        let mut t = table();
        t.id = 9;
        t.database = "d".into();
        t.name = "t".into();
        t.columns = vec![
            col(
                "a",
                ColumnType::Integer {
                    width: IntWidth::Int,
                    unsigned: false,
                },
                false,
            ),
            col(
                "p",
                ColumnType::UnsignedDecimal {
                    precision: 10,
                    scale: 2,
                },
                true,
            ),
            col(
                "r",
                ColumnType::Real {
                    double: false,
                    digits: Some((7, 4)),
                    unsigned: true,
                },
                true,
            ),
            col("x", ColumnType::Double, true),
        ];
        t.primary_key = vec![0];
        let body = table_map_body(&t);
        let expected: &[u8] = &[
            9, 0, 0, 0, 0, 0, // table id
            1, 0, // flags
            1, b'd', 0, 1, b't', 0, // names
            4, 3, 246, 4, 5, // column count and types
            4, 10, 2, 4, 8,    // metadata
            0x0e, // nullable
            1, 1, 0x60, // SIGNEDNESS: p and r
        ];
        assert_eq!(&body[..expected.len()], expected);
    }

    #[test]
    fn an_independent_decoder_reads_our_events() {
        for checksum in [false, true] {
            let writer = EventWriter {
                server_id: 1,
                checksum,
                server_version: "8.0.36-ringrep".into(),
            };
            let enc = Encoder {
                writer: writer.clone(),
            };
            let mut schema = Schema::default();
            let create = Transaction {
                server_id: 1,
                seq: 1,
                commit_time_us: 1_764_608_709_000_000,
                origin: None,
                events: vec![Event::Ddl(DdlEvent::CreateTable { table: table() })],
            };
            let mut key = row();
            key.truncate(2);
            let tx = Transaction {
                server_id: 1,
                seq: 2,
                commit_time_us: 1_764_608_709_000_000,
                origin: None,
                events: vec![
                    Event::Row(RowEvent {
                        table_id: 7,
                        change: RowChange::Write { row: row() },
                        cause: Cause::Overwrite,
                    }),
                    Event::Row(RowEvent {
                        table_id: 7,
                        change: RowChange::Delete { key },
                        cause: Cause::TtlPurge,
                    }),
                ],
            };
            let mut events = vec![writer.format_description(0, 0)];
            let start = FILE_START + FORMAT_DESCRIPTION_LEN;
            let (created, after_create) = enc.transaction(&mut schema, &create, start, &|_| true);
            let (rows_events, end) = enc.transaction(&mut schema, &tx, after_create, &|_| true);
            events.extend(created);
            events.extend(rows_events);
            // Each event's position is where the next starts: position - size (with its
            // CRC32, as in the file) is its own start.
            let mut at = start;
            for e in &events[1..] {
                let size = u32::from_le_bytes([e[9], e[10], e[11], e[12]]) as u64
                    + if checksum { 0 } else { 4 };
                let pos = u32::from_le_bytes([e[13], e[14], e[15], e[16]]) as u64;
                assert_eq!(pos - size, at, "checksum {checksum}");
                at = pos;
            }
            assert_eq!(at, end);
            assert_eq!(
                events[0].len() as u64,
                FORMAT_DESCRIPTION_LEN - if checksum { 0 } else { 4 }
            );
            let (kinds, rows) = decode(&events);
            assert_eq!(kinds[0], "FDE");
            assert!(
                kinds[1].starts_with("QUERY CREATE TABLE `test`.`t`"),
                "{kinds:?}"
            );
            assert_eq!(
                kinds[2..],
                ["QUERY BEGIN", "TABLE_MAP test.t", "ROWS", "ROWS", "XID 2"].map(String::from)
            );
            let written = &rows[0][1];
            assert_eq!(
                written[..12],
                [
                    "-5",
                    "2",
                    "NULL",
                    "'héllo'",
                    "'ab'",
                    "'-12.50'",
                    "18446744073709551615",
                    "0.25",
                    "'a note'",
                    "'2026-12-01'",
                    "'2026-12-01 17:05:09.123000'",
                    "'1764608709.000042'",
                ]
                .map(String::from)
            );
            let doc: serde_json::Value = serde_json::from_str(&written[12]).expect("json");
            assert_eq!(
                doc,
                serde_json::json!({"k": [1, "two", null, true], "a": 2.5})
            );
            // The delete's image: the primary key, the other columns NULL.
            assert_eq!(rows[1][0][..3], ["-5", "2", "NULL"].map(String::from));
            // TIME2 (a negative one with a fraction too) and BIT as MySQL 8 writes them.
            // (mysql_common reads a TIME's hours into a byte: none past 255 here.)
            assert_eq!(
                written[13..],
                ["'-026:03:04.500000'", "'200:00:01.000001'", "0x08A1"].map(String::from)
            );
            assert_eq!(rows[1][0].len(), 16);
            assert!(rows[1][0][2..].iter().all(|v| v == "NULL"));
        }
    }
}
