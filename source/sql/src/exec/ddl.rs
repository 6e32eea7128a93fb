//! CREATE TABLE (also LIKE and AS SELECT), DROP, and ALTER TABLE from SQL.

use binlog_format::schema::{
    ColumnDef, ColumnDefault, ColumnType, IndexDef, IndexKind, IntWidth, LobSize, TableDef,
    TtlOptions,
};
use binlog_format::Value;
use sqlparser::ast::{
    ColumnOption, CreateTable, CreateTableLikeKind, CreateTableOptions, Expr, ObjectName,
    ObjectType, SqlOption, TableConstraint,
};

use crate::exec::foreign_keys::has_index_on;
use crate::expr::{collation_named, eval, Collated, Scope};
use crate::objects::foreign_keys::ForeignKey;
use crate::parse::lexer::{find_top_level, split_top_level_commas, take_string};
use crate::parse::statement::{parse_one, split_name};
use crate::{Outcome, SqlSession};
use ringrep_engine::ddl::{prepare_table, PartitionSpec};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::ring::{parse_comment, RingSpec, TtlSpec};
use ringrep_engine::types::coerce;
use ringrep_engine::HIDDEN_ROW_ID;

/// A SQL type name (as sqlparser prints it) as the type of column `name`.
fn column_type(sql: &str, name: &str) -> Result<ColumnType> {
    let s = sql.to_ascii_uppercase();
    // ZEROFILL implies UNSIGNED in MySQL (its padding on display is not kept).
    let unsigned = s.contains("UNSIGNED") || s.contains("ZEROFILL");
    let base = s.split(['(', ' ']).next().unwrap_or("").to_string();
    let args: Vec<u64> = s
        .split_once('(')
        .and_then(|(_, r)| r.split_once(')'))
        // A size past u64 is past every limit below: its error, not a size dropped.
        .map(|(a, _)| {
            a.split(',')
                .map(|x| x.trim().parse().unwrap_or(u64::MAX))
                .collect()
        })
        .unwrap_or_default();
    let int = |width| Ok(ColumnType::Integer { width, unsigned });
    // A length within what the type holds (in characters for text: 65,535 bytes of utf8mb4).
    let length = |given: Option<u64>, max: u64| -> Result<u32> {
        let len = given.ok_or_else(|| Error::syntax(format!("{base} needs a length")))?;
        if len > max {
            return Err(Error::new(
                code::ER_TOO_BIG_FIELDLENGTH,
                format!(
                    "Column length too big for column '{name}' (max = {max}); use BLOB or TEXT instead"
                ),
            ));
        }
        Ok(len as u32)
    };
    let fsp = || -> Result<u8> {
        let p = args.first().copied().unwrap_or(0);
        if p > 6 {
            return Err(Error::new(
                code::ER_TOO_BIG_PRECISION,
                format!("Too-big precision {p} specified for '{name}'. Maximum is 6."),
            ));
        }
        Ok(p as u8)
    };
    // A FLOAT or DOUBLE keeps `(M, D)` and UNSIGNED as MySQL 8 does: M to 255 (1439), D to
    // 30 (1425) and not above M (1427).
    let real = |double: bool, digits: Option<(u64, u64)>| -> Result<ColumnType> {
        let digits = match digits {
            Some((m, _)) if m > 255 => {
                return Err(Error::new(
                    code::ER_TOO_BIG_DISPLAYWIDTH,
                    format!("Display width out of range for column '{name}' (max = 255)"),
                ))
            }
            Some((_, d)) if d > 30 => {
                return Err(Error::new(
                    code::ER_TOO_BIG_SCALE,
                    format!("Too big scale {d} specified for '{name}'. Maximum is 30."),
                ))
            }
            Some((m, d)) if d > m => {
                return Err(Error::new(
                    code::ER_M_BIGGER_THAN_D,
                    format!("For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column '{name}')."),
                ))
            }
            Some((m, d)) => Some((m.max(1) as u8, d as u8)),
            None => None,
        };
        Ok(match (digits, unsigned) {
            (None, false) if double => ColumnType::Double,
            (None, false) => ColumnType::Float,
            (digits, unsigned) => ColumnType::Real {
                double,
                digits,
                unsigned,
            },
        })
    };
    match base.as_str() {
        "TINYINT" if args == [1] => int(IntWidth::Bool),
        "BOOL" | "BOOLEAN" => int(IntWidth::Bool),
        "TINYINT" => int(IntWidth::Tiny),
        "SMALLINT" => int(IntWidth::Small),
        "MEDIUMINT" => int(IntWidth::Medium),
        "INT" | "INTEGER" => int(IntWidth::Int),
        "BIGINT" => int(IntWidth::Big),
        "DECIMAL" | "NUMERIC" | "DEC" => {
            let (precision, scale) = ringrep_engine::types::decimal_size(
                args.first().copied().unwrap_or(10),
                args.get(1).copied().unwrap_or(0),
                name,
            )?;
            Ok(if unsigned {
                ColumnType::UnsignedDecimal { precision, scale }
            } else {
                ColumnType::Decimal { precision, scale }
            })
        }
        // FLOAT(p): single precision to 24 bits, double to 53, as MySQL picks; FLOAT(M, D)
        // stays single.
        "FLOAT" => match args.as_slice() {
            [p] if *p > 53 => Err(Error::new(
                code::ER_WRONG_FIELD_SPEC,
                format!("Incorrect column specifier for column '{name}'"),
            )),
            [p] => real(*p > 24, None),
            [m, d] => real(false, Some((*m, *d))),
            _ => real(false, None),
        },
        "DOUBLE" | "REAL" => match args.as_slice() {
            [m, d] => real(true, Some((*m, *d))),
            _ => real(true, None),
        },
        "CHAR" | "CHARACTER" => Ok(ColumnType::Char {
            len: length(Some(args.first().copied().unwrap_or(1)), 255)?,
        }),
        "VARCHAR" => Ok(ColumnType::VarChar {
            len: length(args.first().copied(), 16_383)?,
        }),
        "BINARY" => Ok(ColumnType::Binary {
            len: length(Some(args.first().copied().unwrap_or(1)), 255)?,
        }),
        "VARBINARY" => Ok(ColumnType::VarBinary {
            len: length(args.first().copied(), 65_535)?,
        }),
        "TINYTEXT" => Ok(ColumnType::Text {
            size: LobSize::Tiny,
        }),
        "TEXT" => Ok(ColumnType::Text {
            size: LobSize::Normal,
        }),
        "MEDIUMTEXT" => Ok(ColumnType::Text {
            size: LobSize::Medium,
        }),
        "LONGTEXT" => Ok(ColumnType::Text {
            size: LobSize::Long,
        }),
        "TINYBLOB" => Ok(ColumnType::Blob {
            size: LobSize::Tiny,
        }),
        "BLOB" => Ok(ColumnType::Blob {
            size: LobSize::Normal,
        }),
        "MEDIUMBLOB" => Ok(ColumnType::Blob {
            size: LobSize::Medium,
        }),
        "LONGBLOB" => Ok(ColumnType::Blob {
            size: LobSize::Long,
        }),
        "JSON" => Ok(ColumnType::Json),
        "DATE" => Ok(ColumnType::Date),
        // YEAR(4) is YEAR; MySQL 8 has no other width.
        "YEAR" => Ok(ColumnType::Year),
        "DATETIME" => Ok(ColumnType::DateTime { fsp: fsp()? }),
        "TIMESTAMP" => Ok(ColumnType::Timestamp { fsp: fsp()? }),
        "TIME" => Ok(ColumnType::Time { fsp: fsp()? }),
        // BIT is BIT(1); MySQL 8 holds 1 to 64 bits (1439 past them).
        "BIT" => match args.first().copied().unwrap_or(1) {
            w @ 1..=64 => Ok(ColumnType::Bit { width: w as u8 }),
            0 => Err(Error::new(
                code::ER_INVALID_FIELD_SIZE,
                format!("Invalid size for column '{name}'."),
            )),
            _ => Err(Error::new(
                code::ER_TOO_BIG_DISPLAYWIDTH,
                format!("Display width out of range for column '{name}' (max = 64)"),
            )),
        },
        _ => Err(Error::unsupported(format!("column type {sql}"))),
    }
}

/// `ENUM('a', ...)` as MySQL takes it: at most 65,535 members (1097).
fn enum_type(members: &[sqlparser::ast::EnumMember], name: &str) -> Result<ColumnType> {
    let mut names = Vec::with_capacity(members.len());
    for m in members {
        let sqlparser::ast::EnumMember::Name(v) = m else {
            return Err(Error::syntax(format!(
                "an ENUM member with a value, in column '{name}'"
            )));
        };
        names.push(v.clone());
    }
    let values = members_of(&names, name, "ENUM")?;
    if values.len() > 65_535 {
        return Err(Error::new(
            code::ER_TOO_BIG_ENUM,
            format!("Too many strings for column {name} and SET"),
        ));
    }
    Ok(ColumnType::Enum { values })
}

/// `SET('a', ...)` as MySQL takes it: at most 64 members (1097), none with a comma (1367).
fn set_type(members: &[String], name: &str) -> Result<ColumnType> {
    let values = members_of(members, name, "SET")?;
    if values.len() > 64 {
        return Err(Error::new(
            code::ER_TOO_BIG_ENUM,
            format!("Too many strings for column {name} and SET"),
        ));
    }
    if let Some(v) = values.iter().find(|v| v.contains(',')) {
        return Err(Error::new(
            code::ER_ILLEGAL_VALUE_FOR_TYPE,
            format!("Illegal set '{v}' value found during parsing"),
        ));
    }
    Ok(ColumnType::Set { values })
}

/// An ENUM's or SET's (`kind`) members as MySQL keeps them: spaces at the end dropped, two
/// equal under the collation refused (1291).
fn members_of(members: &[String], name: &str, kind: &str) -> Result<Vec<String>> {
    let mut values: Vec<String> = Vec::with_capacity(members.len());
    for v in members {
        let v = v.trim_end_matches(' ').to_string();
        if values.iter().any(|w| binlog_format::collation::eq(w, &v)) {
            return Err(Error::new(
                code::ER_DUPLICATED_VALUE_IN_TYPE,
                format!("Column '{name}' has duplicated value '{v}' in {kind}"),
            ));
        }
        values.push(v);
    }
    Ok(values)
}

/// The column type CREATE TABLE ... AS SELECT gives a computed column, from the values it
/// holds: integers BIGINT (UNSIGNED when one needs it), other numbers DOUBLE or DECIMAL with
/// the most fraction digits seen, times, bytes and JSON their kinds, text (or nothing but NULL)
/// LONGTEXT.
fn computed_type<'v>(values: impl Iterator<Item = &'v Value>) -> ColumnType {
    let mut kind: Option<u8> = None;
    let (mut unsigned, mut scale, mut digits, mut fsp) = (false, 0usize, 1usize, 0u8);
    for v in values {
        let k = match v {
            Value::Null => continue,
            Value::Int(_) => 1,
            Value::UInt(u) => {
                unsigned |= *u > i64::MAX as u64;
                1
            }
            Value::Decimal(d) => {
                let (_, int, frac) = binlog_format::value::decimal_parts(d);
                scale = scale.max(frac.len());
                digits = digits.max(int.len());
                2
            }
            Value::Float(_) | Value::Double(_) => 3,
            Value::Date(_) => 4,
            Value::DateTime(t) => {
                fsp = fsp.max(if t.micros == 0 { 0 } else { 6 });
                5
            }
            Value::Timestamp(us) => {
                fsp = fsp.max(if us % 1_000_000 == 0 { 0 } else { 6 });
                5
            }
            Value::Bytes(_) => 6,
            Value::Json(_) => 7,
            Value::Text(_) => 8,
            Value::Time(us) => {
                fsp = fsp.max(if us % 1_000_000 == 0 { 0 } else { 6 });
                9
            }
            Value::Bit(_) => 10,
        };
        kind = Some(match kind {
            None => k,
            Some(seen) if seen == k => k,
            // Integers and decimals together are decimals; any other mix is text.
            Some(1 | 2) if k <= 2 => 2,
            Some(_) => 8,
        });
    }
    match kind {
        Some(1) => ColumnType::Integer {
            width: IntWidth::Big,
            unsigned,
        },
        Some(2) => ColumnType::Decimal {
            precision: (digits.max(20) + scale).min(65) as u8,
            scale: scale.min(30) as u8,
        },
        Some(3) => ColumnType::Double,
        Some(4) => ColumnType::Date,
        Some(5) => ColumnType::DateTime { fsp },
        Some(6) => ColumnType::Blob {
            size: LobSize::Long,
        },
        Some(7) => ColumnType::Json,
        Some(9) => ColumnType::Time { fsp },
        Some(10) => ColumnType::Bit { width: 64 },
        _ => ColumnType::Text {
            size: LobSize::Long,
        },
    }
}

impl SqlSession {
    /// For a query reading one stored table, the table column behind each result column that
    /// copies one as it is (`*`, `t.*`, `col`, `col AS name`); empty when the query is another
    /// shape or the count does not come out at `width`.
    fn selected_columns(&self, q: &sqlparser::ast::Query, width: usize) -> Vec<Option<ColumnDef>> {
        use sqlparser::ast::{SelectItem, SetExpr, TableFactor};
        let SetExpr::Select(select) = q.body.as_ref() else {
            return Vec::new();
        };
        let [from] = select.from.as_slice() else {
            return Vec::new();
        };
        let TableFactor::Table { name, .. } = &from.relation else {
            return Vec::new();
        };
        if !from.joins.is_empty() {
            return Vec::new();
        }
        let Ok((db, table)) = crate::parse::statement::split_name(name) else {
            return Vec::new();
        };
        let Ok(source) = self.session.table_def(db.as_deref(), &table) else {
            return Vec::new();
        };
        let column = |e: &Expr| {
            match e {
                Expr::Identifier(i) => Some(i.value.as_str()),
                Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.as_str()),
                _ => None,
            }
            .and_then(|n| source.column_index(n))
            .map(|c| source.columns[c].clone())
        };
        let mut out = Vec::new();
        for item in &select.projection {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => out.extend(
                    source
                        .columns
                        .iter()
                        .filter(|c| c.name != ringrep_engine::HIDDEN_ROW_ID)
                        .map(|c| Some(c.clone())),
                ),
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    out.push(column(e))
                }
                _ => out.push(None),
            }
        }
        if out.len() == width {
            out
        } else {
            Vec::new()
        }
    }
}

/// Accepts a `COLLATE` name that text columns follow: a case-insensitive one. Text compares
/// by one collation (`binlog_format::collation`, utf8mb4_0900_ai_ci at its primary level),
/// so a case- or accent-sensitive or binary collation would be silently different; it is
/// refused instead, pointing at VARBINARY for exact comparison.
fn collation(name: &str) -> Result<()> {
    let name = option_name(name);
    if collation_named(&name) == Collated::Text {
        return Ok(());
    }
    Err(Error::unsupported(format!(
        "COLLATE {name}: text columns compare by {}, without case or accents; \
         VARBINARY and BLOB columns compare bytes",
        binlog_format::collation::NAME
    )))
}

/// Accepts a `CHARACTER SET` for text columns: any but `binary`, which in MySQL makes text
/// columns compare bytes; ringrep has VARBINARY and BLOB for that.
fn charset(name: &str) -> Result<()> {
    if option_name(name) == "binary" {
        return Err(Error::unsupported(
            "CHARACTER SET binary: text columns compare by utf8mb4_0900_ai_ci; VARBINARY and BLOB columns compare bytes",
        ));
    }
    Ok(())
}

/// A table or column option's name as written (`= 'utf8mb4_bin'`, `` `latin1` ``), bare and
/// lower case.
fn option_name(name: &str) -> String {
    name.trim()
        .trim_start_matches('=')
        .trim()
        .trim_matches(|c| c == '\'' || c == '"' || c == '`')
        .to_ascii_lowercase()
}

fn current_timestamp_fsp(e: &Expr) -> Option<u8> {
    let s = e.to_string().to_ascii_uppercase().replace(' ', "");
    for name in ["CURRENT_TIMESTAMP", "NOW", "LOCALTIMESTAMP"] {
        if let Some(rest) = s.strip_prefix(name) {
            let digits: String = rest.chars().filter(char::is_ascii_digit).collect();
            return Some(digits.parse().unwrap_or(0));
        }
    }
    None
}

/// A column's COMMENT as MySQL takes it: at most 1024 characters (1629).
fn column_comment(text: &str, name: &str) -> Result<String> {
    if text.chars().count() > 1024 {
        return Err(Error::new(
            code::ER_TOO_LONG_FIELD_COMMENT,
            format!("Comment for field '{name}' is too long (max = 1024)"),
        ));
    }
    Ok(text.to_string())
}

/// A column definition from SQL; `primary` is set when the column says PRIMARY KEY.
fn column_def(
    c: &sqlparser::ast::ColumnDef,
    session: &SqlSession,
) -> Result<(ColumnDef, bool, bool)> {
    let ty = match &c.data_type {
        sqlparser::ast::DataType::Enum(members, _) => enum_type(members, &c.name.value)?,
        sqlparser::ast::DataType::Set(members) => set_type(members, &c.name.value)?,
        other => column_type(&other.to_string(), &c.name.value)?,
    };
    let mut nullable = true;
    let mut explicit_null = false;
    let mut default_expr: Option<&Expr> = None;
    let mut generated: Option<ColumnDefault> = None;
    let mut on_update_now = false;
    let mut auto_increment = false;
    let mut comment = String::new();
    let mut primary = false;
    let mut unique = false;
    for o in &c.options {
        match &o.option {
            ColumnOption::Collation(name) => collation(&name.to_string())?,
            ColumnOption::CharacterSet(name) => charset(&name.to_string())?,
            ColumnOption::NotNull => nullable = false,
            ColumnOption::Null => explicit_null = true,
            ColumnOption::Default(e) => default_expr = Some(e),
            ColumnOption::OnUpdate(e) => on_update_now = current_timestamp_fsp(e).is_some(),
            ColumnOption::Comment(text) => comment = column_comment(text, &c.name.value)?,
            ColumnOption::Generated {
                generation_expr: Some(e),
                generation_expr_mode,
                ..
            } => {
                generated = Some(ColumnDefault::Generated {
                    expr: e.to_string(),
                    stored: matches!(
                        generation_expr_mode,
                        Some(sqlparser::ast::GeneratedExpressionMode::Stored)
                    ),
                });
            }
            other => {
                let s = other.to_string().to_ascii_uppercase();
                if s.contains("AUTO_INCREMENT") {
                    auto_increment = true;
                } else if s.starts_with("PRIMARY KEY") {
                    primary = true;
                    nullable = false;
                } else if s.starts_with("UNIQUE") {
                    unique = true;
                } else if s.starts_with("REFERENCES") {
                    // A column's own REFERENCES: MySQL 8 parses and ignores it (only a
                    // FOREIGN KEY clause makes a constraint).
                } else if let Some(name) = s.strip_prefix("COLLATE") {
                    collation(name)?;
                } else if let Some(name) = s
                    .strip_prefix("CHARACTER SET")
                    .or_else(|| s.strip_prefix("CHARSET"))
                {
                    charset(name)?;
                } else {
                    return Err(Error::unsupported(format!("column option {other}")));
                }
            }
        }
    }
    let _ = explicit_null;
    let mut col = ColumnDef {
        name: c.name.value.clone(),
        ty: ty.clone(),
        nullable,
        default: ColumnDefault::None,
        on_update_now,
        auto_increment,
        comment,
    };
    if let Some(e) = default_expr {
        if let Some(fsp) = current_timestamp_fsp(e) {
            col.default = ColumnDefault::CurrentTimestamp { fsp };
        } else {
            // A default is evaluated once, at CREATE; a subquery there would read tables the
            // statement's privileges never covered (MySQL refuses it too).
            if crate::parse::tree::has_subquery(e) {
                return Err(Error::new(
                    code::ER_INVALID_DEFAULT,
                    format!("Invalid default value for '{}'", col.name),
                ));
            }
            let v = eval(e, &Scope::empty(), &session.ctx())?;
            if v.is_null() {
                if !nullable {
                    return Err(Error::new(
                        code::ER_INVALID_DEFAULT,
                        format!("Invalid default value for '{}'", col.name),
                    ));
                }
                col.default = ColumnDefault::Value(Value::Null);
            } else {
                if ty.is_lob() {
                    return Err(Error::new(
                        code::ER_BLOB_CANT_HAVE_DEFAULT,
                        format!(
                            "BLOB, TEXT, GEOMETRY or JSON column '{}' can't have a default value",
                            col.name
                        ),
                    ));
                }
                let c2 = ColumnDef {
                    nullable: true,
                    ..col.clone()
                };
                let v = coerce(v, &c2, 1, session.session.vars.tz_offset).map_err(|_| {
                    Error::new(
                        code::ER_INVALID_DEFAULT,
                        format!("Invalid default value for '{}'", col.name),
                    )
                })?;
                col.default = ColumnDefault::Value(v);
            }
        }
    }
    if let Some(g) = generated {
        if default_expr.is_some() {
            return Err(Error::new(
                code::ER_WRONG_ARGUMENTS,
                format!("A generated column cannot have a DEFAULT ('{}')", col.name),
            ));
        }
        col.default = g;
    }
    Ok((col, primary, unique))
}

fn index_columns(def: &TableDef, cols: &[String]) -> Result<Vec<usize>> {
    cols.iter()
        .map(|c| {
            def.column_index(c).ok_or_else(|| {
                Error::new(
                    code::ER_KEY_COLUMN_DOES_NOT_EXITS,
                    format!("Key column '{c}' doesn't exist in table"),
                )
            })
        })
        .collect()
}

fn constraint_columns(c: &TableConstraint) -> Vec<String> {
    // The column list is the first parenthesised list of the constraint's text.
    let s = c.to_string();
    let Some(open) = s.find('(') else {
        return vec![];
    };
    let close = s[open..].find(')').map_or(s.len(), |i| open + i);
    split_top_level_commas(&s[open + 1..close])
        .into_iter()
        .map(|x| {
            x.split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches('`')
                .to_string()
        })
        .map(|x| x.split('(').next().unwrap_or("").to_string())
        .collect()
}

/// Parses the text after `PARTITION BY`.
fn parse_partition(text: &str) -> Result<PartitionSpec> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let kinds = [
        "LINEAR KEY",
        "LINEAR HASH",
        "KEY",
        "HASH",
        "RANGE COLUMNS",
        "RANGE",
        "LIST COLUMNS",
        "LIST",
    ];
    let kind = kinds
        .iter()
        .find(|k| upper.starts_with(*k))
        .ok_or_else(|| {
            Error::syntax(format!(
                "You have an error in your SQL syntax near 'PARTITION BY {t}'"
            ))
        })?;
    let rest = &t[kind.len()..];
    let open = rest
        .find('(')
        .ok_or_else(|| Error::syntax("PARTITION BY needs a column list"))?;
    let close = rest[open..]
        .find(')')
        .map(|i| open + i)
        .ok_or_else(|| Error::syntax("PARTITION BY needs a column list"))?;
    let columns = split_top_level_commas(&rest[open + 1..close])
        .into_iter()
        .map(|c| c.trim_matches('`').to_string())
        .filter(|c| !c.is_empty())
        .collect();
    let after = rest[close + 1..].to_ascii_uppercase();
    let partitions = after
        .trim_start()
        .strip_prefix("PARTITIONS")
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    Ok(PartitionSpec {
        kind: kind.to_string(),
        columns,
        partitions,
    })
}

impl SqlSession {
    /// CREATE TABLE whose text carries `PARTITION BY`, which sqlparser does not take for MySQL.
    pub(crate) fn create_table_text(&mut self, text: &str) -> Result<Outcome> {
        let at = find_top_level(text, "PARTITION BY")
            .ok_or_else(|| Error::internal("no PARTITION BY"))?;
        let partition = parse_partition(&text[at + "PARTITION BY".len()..])?;
        match parse_one(&text[..at])? {
            stmt @ sqlparser::ast::Statement::CreateTable(_) => {
                self.authorize(&stmt)?;
                let sqlparser::ast::Statement::CreateTable(ct) = stmt else {
                    unreachable!("matched above")
                };
                self.create_table(&ct, Some(partition))
            }
            _ => Err(Error::syntax("expected CREATE TABLE")),
        }
    }

    /// CREATE TABLE: `LIKE` copies a table's definition, `AS SELECT` creates a plain table
    /// holding the query's rows, anything else builds the table from its columns, keys and
    /// options (the COMMENT's `NDB_TABLE=` options make it a ring or TTL table).
    pub(crate) fn create_table(
        &mut self,
        ct: &CreateTable,
        partition: Option<PartitionSpec>,
    ) -> Result<Outcome> {
        let (db, name) = split_name(&ct.name)?;
        let db = match db {
            Some(d) => d,
            None => self.session.current_db()?,
        };
        if let Some(like) = &ct.like {
            let source = match like {
                CreateTableLikeKind::Parenthesized(l) | CreateTableLikeKind::Plain(l) => &l.name,
            };
            let (sdb, sname) = split_name(source)?;
            let mut def = self.session.table_def(sdb.as_deref(), &sname)?;
            let engine = self.declared_engine(&def.database, &def.name);
            def.database = db;
            def.name = name;
            self.check_new_table(&def)?;
            let (dbn, tn) = (def.database.clone(), def.name.clone());
            let existed = self.engine().table_def(&dbn, &tn).is_some();
            self.session.create_table(def, ct.if_not_exists)?;
            if !existed && engine.is_some() {
                self.set_declared_engine(&dbn, &tn, engine.as_deref())?;
            }
            return Ok(Outcome::Affected {
                rows: 0,
                info: None,
                found: None,
            });
        }
        let mut def = TableDef {
            id: 0,
            database: db.clone(),
            name: name.clone(),
            columns: Vec::new(),
            primary_key: Vec::new(),
            indexes: Vec::new(),
            ring: None,
            ttl: None,
            partitioning: None,
            comment: None,
        };
        let mut column_uniques = Vec::new();
        for c in &ct.columns {
            let (col, primary, unique) = column_def(c, self)?;
            if primary {
                if !def.primary_key.is_empty() {
                    return Err(Error::new(
                        code::ER_MULTIPLE_PRI_KEY,
                        "Multiple primary key defined",
                    ));
                }
                def.primary_key = vec![def.columns.len()];
            }
            if unique {
                column_uniques.push(col.name.clone());
            }
            def.columns.push(col);
        }
        let mut foreign_keys = Vec::new();
        for c in &ct.constraints {
            let text = c.to_string();
            let upper = text.to_ascii_uppercase();
            let cols = constraint_columns(c);
            if let TableConstraint::ForeignKey(fk) = c {
                self.refuse_ring_parent(fk, &db)?;
                foreign_keys.push(fk.clone());
                continue;
            }
            if upper.starts_with("CHECK") || upper.contains(" CHECK (") {
                continue;
            }
            let positions = index_columns(&def, &cols)?;
            if upper.contains("PRIMARY KEY") {
                if !def.primary_key.is_empty() {
                    return Err(Error::new(
                        code::ER_MULTIPLE_PRI_KEY,
                        "Multiple primary key defined",
                    ));
                }
                for &p in &positions {
                    def.columns[p].nullable = false;
                }
                def.primary_key = positions;
            } else {
                let kind = if upper.starts_with("UNIQUE") || upper.contains(" UNIQUE ") {
                    IndexKind::Unique
                } else {
                    IndexKind::Secondary
                };
                let index_name = match c {
                    TableConstraint::Unique(u) => u
                        .index_name
                        .as_ref()
                        .or(u.name.as_ref())
                        .map(|n| n.value.clone()),
                    TableConstraint::Index(i) => i.name.as_ref().map(|n| n.value.clone()),
                    _ => None,
                }
                .unwrap_or_else(|| cols.first().cloned().unwrap_or_default());
                def.indexes.push(IndexDef {
                    name: index_name,
                    kind,
                    columns: positions,
                });
            }
        }
        for u in column_uniques {
            let p = index_columns(&def, std::slice::from_ref(&u))?;
            def.indexes.push(IndexDef {
                name: u,
                kind: IndexKind::Unique,
                columns: p,
            });
        }
        let declared = crate::objects::engines::declared(&ct.table_options)?;
        if let CreateTableOptions::Plain(opts) | CreateTableOptions::Options(opts) =
            &ct.table_options
        {
            for o in opts {
                if let SqlOption::KeyValue { key, value } = o {
                    let key = key.to_string().to_ascii_uppercase();
                    if key.ends_with("COLLATE") {
                        collation(&value.to_string())?;
                    } else if key.ends_with("CHARSET") || key.ends_with("CHARACTER SET") {
                        charset(&value.to_string())?;
                    }
                }
                if let SqlOption::Comment(c) = o {
                    let s = c.to_string();
                    def.comment =
                        take_string(s.trim_start_matches(|ch: char| ch != '\'' && ch != '"'))
                            .map(|(x, _)| x)
                            .or(Some(s));
                }
            }
        }
        if let Some(q) = &ct.query {
            // CREATE TABLE ... AS SELECT: a plain table with the visible rows.
            let text = q.to_string();
            let rows = self.run_query(q, &text)?;
            // Each result column fills the declared column of its name, or is added after the
            // declared ones, as in MySQL (`CREATE TABLE t (x INT PRIMARY KEY) SELECT ...`).
            let sources = self.selected_columns(q, rows.columns.len());
            let mut cols: Vec<usize> = Vec::with_capacity(rows.columns.len());
            for (i, (name, ty)) in rows.columns.iter().zip(&rows.types).enumerate() {
                if let Some(at) = def.column_index(name) {
                    cols.push(at);
                    continue;
                }
                cols.push(def.columns.len());
                {
                    // A column copied as it is keeps NOT NULL and its DEFAULT, as in MySQL.
                    let source = sources.get(i).and_then(Option::as_ref);
                    let ty = ty
                        .clone()
                        .unwrap_or_else(|| computed_type(rows.rows.iter().map(|r| &r[i])));
                    def.columns.push(ColumnDef {
                        name: name.clone(),
                        ty,
                        nullable: source.is_none_or(|c| c.nullable),
                        default: match source.map(|c| &c.default) {
                            Some(d @ ColumnDefault::Value(_)) => d.clone(),
                            _ => ColumnDefault::None,
                        },
                        on_update_now: false,
                        auto_increment: false,
                        comment: String::new(),
                    });
                }
            }
            def.comment = None;
            let mut def = prepare_table(def, partition.as_ref(), !foreign_keys.is_empty())?;
            let (dbn, tn) = (def.database.clone(), def.name.clone());
            let existed = self.engine().table_def(&dbn, &tn).is_some();
            // A table that exists keeps its constraints (IF NOT EXISTS), or is 1050.
            let fks = match existed {
                true => Vec::new(),
                false => self.new_foreign_keys(&mut def, &foreign_keys, &[], &[])?,
            };
            self.check_new_table(&def)?;
            self.session.create_table(def, ct.if_not_exists)?;
            if !existed {
                self.change_foreign_keys(&|_| false, fks)?;
            }
            if existed {
                // IF NOT EXISTS of a table that exists: its note, and nothing copied (MySQL 8).
                return Ok(Outcome::Affected {
                    rows: 0,
                    info: None,
                    found: None,
                });
            }
            if declared.is_some() {
                self.set_declared_engine(&dbn, &tn, declared)?;
            }
            let created = self.session.table_def(Some(&dbn), &tn)?;
            let n = rows.rows.len() as u64;
            let data = rows.rows;
            self.statement(|s| {
                s.session
                    .insert(&created, &cols, data, ringrep_engine::InsertMode::Insert)
            })?;
            return Ok(Outcome::Affected {
                rows: n,
                info: Some(format!("Records: {n}  Duplicates: 0  Warnings: 0")),
                found: None,
            });
        }
        // A table of another engine takes none of the NDB_TABLE options of its comment.
        let comment = declared.and_then(|_| def.comment.take());
        let mut def = prepare_table(def, partition.as_ref(), !foreign_keys.is_empty())?;
        if comment.is_some() {
            def.comment = comment;
        }
        let (dbn, tn) = (def.database.clone(), def.name.clone());
        let existed = self.engine().table_def(&dbn, &tn).is_some();
        // A table that exists keeps its constraints (IF NOT EXISTS), or is 1050.
        let fks = match existed {
            true => Vec::new(),
            false => self.new_foreign_keys(&mut def, &foreign_keys, &[], &[])?,
        };
        self.check_new_table(&def)?;
        self.session.create_table(def, ct.if_not_exists)?;
        if !existed && declared.is_some() {
            self.set_declared_engine(&dbn, &tn, declared)?;
        }
        if !existed {
            self.change_foreign_keys(&|_| false, fks)?;
        }
        Ok(Outcome::Affected {
            rows: 0,
            info: None,
            found: None,
        })
    }

    /// DROP TABLE and DROP DATABASE (SCHEMA), each name in turn.
    pub(crate) fn drop(
        &mut self,
        kind: ObjectType,
        if_exists: bool,
        names: &[ObjectName],
    ) -> Result<Outcome> {
        match kind {
            ObjectType::Table => {
                // A parent another table's constraint references goes only with that
                // table (3730), as in MySQL.
                let mut listed = Vec::new();
                for n in names {
                    let (db, t) = split_name(n)?;
                    if let Ok(def) = self.session.table_def(db.as_deref(), &t) {
                        listed.push((def.database, def.name));
                    }
                }
                self.check_drop_parents(&listed)?;
                for n in names {
                    let (db, t) = split_name(n)?;
                    // Its triggers go with it, as in MySQL (first: a crash between the two
                    // leaves a table without triggers, never triggers waiting for a table
                    // of the same name).
                    let def = self.session.table_def(db.as_deref(), &t).ok();
                    if let Some(def) = &def {
                        self.drop_triggers_of_table(&def.database, &def.name)?;
                    }
                    self.session.drop_table(db.as_deref(), &t, if_exists)?;
                    if let Some(def) = def {
                        self.set_declared_engine(&def.database, &def.name, None)?;
                        // Its own constraints go with it; those that reference it stay (only
                        // with the checks off), as in MySQL.
                        if self.has_foreign_keys() {
                            let (d, n) = (def.database.clone(), def.name.clone());
                            self.change_foreign_keys(&|f| f.is_on(&d, &n), Vec::new())?;
                        }
                    }
                }
                Ok(Outcome::Affected {
                    rows: 0,
                    info: None,
                    found: None,
                })
            }
            ObjectType::Database | ObjectType::Schema => {
                for n in names {
                    let db = split_name(n)?.1;
                    // Its tables go as DROP TABLE of them all would: not one another table's
                    // constraint still references (3730), as in MySQL.
                    let tables: Vec<(String, String)> = self
                        .engine()
                        .tables()
                        .into_iter()
                        .filter(|t| t.database.eq_ignore_ascii_case(&db))
                        .map(|t| (t.database, t.name))
                        .collect();
                    self.check_drop_parents(&tables)?;
                    self.session.drop_database(&db, if_exists)?;
                    // Its views, procedures, triggers and declared engines go with it, as in MySQL.
                    self.drop_stored_objects_of(&db)?;
                }
                Ok(Outcome::Affected {
                    rows: 0,
                    info: None,
                    found: None,
                })
            }
            other => Err(Error::unsupported(format!("DROP {other}"))),
        }
    }

    /// ALTER TABLE, parsed clause by clause: table options here, column and index clauses
    /// through sqlparser. Every ALTER is a copying ALTER that keeps meta rows.
    pub(crate) fn alter_table_text(&mut self, text: &str) -> Result<Outcome> {
        let after =
            text[text.to_ascii_uppercase().find("TABLE").map_or(0, |i| i + 5)..].trim_start();
        let name_end = after.find(char::is_whitespace).unwrap_or(after.len());
        let name_text = after[..name_end].replace('`', "");
        let (db, t) = match name_text.split_once('.') {
            Some((d, t)) => (Some(d.to_string()), t.to_string()),
            None => (None, name_text.clone()),
        };
        let old = self.session.table_def(db.as_deref(), &t)?;
        let mut plan = AlterPlan::new(&old);
        for clause in split_top_level_commas(&after[name_end..]) {
            self.alter_clause(&mut plan, &name_text, &clause)?;
        }
        let declared = self.declared_engine(&old.database, &old.name);
        let target: Option<String> = match plan.engine {
            Some(e) => e.map(str::to_string),
            None => declared.clone(),
        };
        if target.is_some() && (old.ring.is_some() || old.ttl.is_some()) {
            return Err(Error::unsupported(
                "changing the engine of a ring buffer or TTL table",
            ));
        }
        // A table of another engine takes its comment as text: no NDB_TABLE options.
        let foreign_comment = match (&target, &plan.new_comment) {
            (Some(_), Some(c)) => Some(c.clone()),
            (Some(_), None) => plan.new.comment.take(),
            (None, _) if declared.is_some() => {
                // Becoming an NDB table: its comment (the new one, or the one it had) is now
                // read for NDB_TABLE options, as a comment given to a plain table: a ring or
                // a TTL cannot come this way.
                plan.new_comment = plan.new_comment.take().or(old.comment.clone());
                let mut plain = old.clone();
                plain.comment = None;
                plan.apply_comment(&plain)?;
                None
            }
            (None, _) => {
                plan.apply_comment(&old)?;
                None
            }
        };
        if target.is_some() {
            plan.new.comment = None;
        }
        plan.check_partition_change()?;
        plan.check_ttl_rename(&old)?;
        plan.check_ring_columns_kept(&old)?;
        let fk_plan = self.alter_foreign_keys(&old, &mut plan)?;
        let mut prepared = prepare_altered(plan.new, plan.algorithm_inplace)?;
        if let Some(fks) = &fk_plan {
            check_fk_indexes(&old, &prepared, fks)?;
        }
        if foreign_comment.is_some() {
            prepared.comment = foreign_comment;
        }
        prepared.partitioning = prepared.partitioning.or(old.partitioning.clone());
        let mapping = RowMapping {
            sources: column_sources(&prepared, &old, &plan.renames),
            old_types: old.columns.iter().map(|c| c.ty.clone()).collect(),
            expiring: old.ttl.clone().filter(|_| plan.copying),
            def: prepared.clone(),
            now: self.session.now_us(),
            tz: self.session.vars.tz_offset,
        };
        self.session
            .alter_table(prepared, &mut |row, is_meta| mapping.row(row, is_meta))?;
        if let Some(fks) = fk_plan {
            let (d, n) = (old.database.clone(), old.name.clone());
            self.change_foreign_keys(&|f| f.is_on(&d, &n) || f.references(&d, &n), fks)?;
        }
        if target != declared {
            self.set_declared_engine(&old.database, &old.name, target.as_deref())?;
        }
        Ok(Outcome::Affected {
            rows: 0,
            info: Some("Records: 0  Duplicates: 0  Warnings: 0".into()),
            found: None,
        })
    }

    /// Adds one clause of an ALTER TABLE to the plan: table options (ALGORITHM, LOCK, ENGINE,
    /// COMMENT) and partitioning here, column and index clauses through sqlparser.
    fn alter_clause(&self, plan: &mut AlterPlan, table: &str, clause: &str) -> Result<()> {
        let upper = clause.to_ascii_uppercase();
        // Words are identifiers: `COMMENT='x'` and `ALGORITHM=INPLACE` start with their keyword.
        let words: Vec<&str> = upper
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let value_after_eq = |c: &str| {
            c.split_once('=')
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_else(|| c.split_whitespace().nth(1).unwrap_or("").to_string())
        };
        match words.first().copied().unwrap_or("") {
            "ALGORITHM" => {
                let alg = value_after_eq(&upper);
                plan.algorithm_inplace = alg.trim() == "INPLACE";
                plan.copying |= alg.trim() == "COPY";
            }
            "LOCK" => {}
            "ENGINE" => {
                plan.engine = Some(crate::objects::engines::normalize(&value_after_eq(clause))?)
            }
            "COMMENT" => {
                let rest = clause
                    .get(7..)
                    .unwrap_or("")
                    .trim_start()
                    .trim_start_matches('=')
                    .trim_start();
                plan.new_comment = Some(
                    take_string(rest)
                        .map(|(s, _)| s)
                        .ok_or_else(|| Error::syntax("COMMENT needs a string"))?,
                );
            }
            "PARTITION" if words.get(1) == Some(&"BY") => {
                plan.repartition(&clause[upper.find("BY").map_or(0, |i| i + 2)..])?
            }
            "ADD" if words.get(1) == Some(&"PARTITION") => plan.add_partitions(&words),
            "REORGANIZE" | "COALESCE" => {
                plan.partition_change = Some("Can't reorganize partitions of ring buffer table");
                plan.copying = true;
            }
            _ => {
                let stmt = parse_one(&format!("ALTER TABLE {table} {clause}"))?;
                let sqlparser::ast::Statement::AlterTable(at) = stmt else {
                    return Err(Error::syntax("expected ALTER TABLE"));
                };
                for op in at.operations {
                    use sqlparser::ast::AlterTableOperation as Op;
                    plan.copying |= matches!(
                        op,
                        Op::AddColumn { .. }
                            | Op::DropColumn { .. }
                            | Op::ModifyColumn { .. }
                            | Op::ChangeColumn { .. }
                    );
                    self.alter_operation(plan, op)?;
                }
            }
        }
        Ok(())
    }

    /// The constraints on the table or referencing it once the ALTER is done, or `None` when
    /// it has none and adds none. Dropped constraints go (1091 for one it does not have),
    /// added ones are checked and named (`new_foreign_keys`; with the checks on, the rows
    /// the table keeps must have their parents: 1452), renamed columns are renamed in them,
    /// and a column one of them needs may not be dropped (1828, 1829), as in MySQL.
    fn alter_foreign_keys(
        &self,
        old: &TableDef,
        plan: &mut AlterPlan,
    ) -> Result<Option<Vec<ForeignKey>>> {
        let (db, name) = (old.database.as_str(), old.name.as_str());
        let involved: Vec<ForeignKey> = if self.has_foreign_keys() {
            self.foreign_keys()?
                .into_iter()
                .filter(|f| f.is_on(db, name) || f.references(db, name))
                .collect()
        } else {
            Vec::new()
        };
        if involved.is_empty() && plan.fk_added.is_empty() && plan.fk_dropped.is_empty() {
            return Ok(None);
        }
        let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        for d in &plan.fk_dropped {
            if !involved
                .iter()
                .any(|f| f.is_on(db, name) && same(&f.name, d))
            {
                return Err(Error::new(
                    code::ER_CANT_DROP_FIELD_OR_KEY,
                    format!("Can't DROP '{d}'; check that column/key exists"),
                ));
            }
        }
        let mut kept: Vec<ForeignKey> = involved
            .into_iter()
            .filter(|f| !(f.is_on(db, name) && plan.fk_dropped.iter().any(|d| same(d, &f.name))))
            .collect();
        for c in &plan.dropped {
            for f in &kept {
                if f.is_on(db, name) && f.columns.iter().any(|x| same(x, c)) {
                    return Err(Error::new(
                        code::ER_FK_COLUMN_CANNOT_DROP,
                        format!(
                            "Cannot drop column '{c}': needed in a foreign key constraint '{}'",
                            f.name
                        ),
                    ));
                }
                if f.references(db, name) && f.parent_columns.iter().any(|x| same(x, c)) {
                    return Err(Error::new(
                        code::ER_FK_COLUMN_CANNOT_DROP_CHILD,
                        format!(
                            "Cannot drop column '{c}': needed in a foreign key constraint '{}' of table '{}'",
                            f.name, f.table
                        ),
                    ));
                }
            }
        }
        for (from, to) in &plan.renames {
            for f in &mut kept {
                if f.is_on(db, name) {
                    f.columns
                        .iter_mut()
                        .filter(|x| same(x, from))
                        .for_each(|x| *x = to.clone());
                }
                if f.references(db, name) {
                    f.parent_columns
                        .iter_mut()
                        .filter(|x| same(x, from))
                        .for_each(|x| *x = to.clone());
                }
            }
        }
        let own: Vec<ForeignKey> = kept.iter().filter(|f| f.is_on(db, name)).cloned().collect();
        let added = self.new_foreign_keys(&mut plan.new, &plan.fk_added, &own, &plan.fk_dropped)?;
        for fk in &added {
            self.check_existing_children(fk, old)?;
        }
        kept.extend(added);
        Ok(Some(kept))
    }

    /// Applies one column or index operation of an ALTER TABLE to the plan's table.
    /// The spec's "a ring buffer table cannot have foreign keys, neither as parent nor as
    /// child table", for the parent: a FOREIGN KEY naming a ring table is 1215. `db` is the
    /// child's database, where an unqualified parent is looked for.
    fn refuse_ring_parent(
        &self,
        fk: &sqlparser::ast::ForeignKeyConstraint,
        db: &str,
    ) -> Result<()> {
        let (pdb, pname) = split_name(&fk.foreign_table)?;
        let parent = self
            .engine()
            .table_def(pdb.as_deref().unwrap_or(db), &pname);
        if parent.is_some_and(|p| p.ring.is_some()) {
            return Err(Error::ring_foreign_key());
        }
        Ok(())
    }

    fn alter_operation(
        &self,
        plan: &mut AlterPlan,
        op: sqlparser::ast::AlterTableOperation,
    ) -> Result<()> {
        let AlterPlan {
            new: def,
            renames,
            dropped,
            added,
            fk_added,
            fk_dropped,
            ..
        } = plan;
        use sqlparser::ast::AlterTableOperation as Op;
        match op {
            Op::AddColumn { column_def: c, .. } => {
                let (col, _, _) = column_def(&c, self)?;
                if def.column_index(&col.name).is_some() {
                    return Err(Error::new(
                        code::ER_DUP_FIELDNAME,
                        format!("Duplicate column name '{}'", col.name),
                    ));
                }
                let pos = def.column_index(HIDDEN_ROW_ID).unwrap_or(def.columns.len());
                shift_positions(def, pos);
                def.columns.insert(pos, col);
                added.push(pos);
            }
            Op::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for n in column_names {
                    let Some(i) = def.column_index(&n.value) else {
                        if if_exists {
                            continue;
                        }
                        return Err(Error::new(
                            code::ER_CANT_DROP_FIELD_OR_KEY,
                            format!("Can't DROP '{}'; check that column/key exists", n.value),
                        ));
                    };
                    dropped.push(n.value.clone());
                    if def
                        .ring
                        .as_ref()
                        .is_some_and(|r| r.slot_column == i || r.meta_column == i)
                    {
                        continue;
                    }
                    remove_column(def, i);
                }
            }
            Op::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let i = def
                    .column_index(&old_column_name.value)
                    .ok_or_else(|| Error::bad_field(&old_column_name.value, def.name.as_str()))?;
                renames.push((old_column_name.value.clone(), new_column_name.value.clone()));
                def.columns[i].name = new_column_name.value;
            }
            Op::ModifyColumn {
                col_name,
                data_type,
                options,
                ..
            } => {
                let i = def
                    .column_index(&col_name.value)
                    .ok_or_else(|| Error::bad_field(&col_name.value, def.name.as_str()))?;
                let c = sqlparser::ast::ColumnDef {
                    name: col_name.clone(),
                    data_type,
                    options: options
                        .into_iter()
                        .map(|option| sqlparser::ast::ColumnOptionDef { name: None, option })
                        .collect(),
                };
                def.columns[i] = column_def(&c, self)?.0;
            }
            Op::ChangeColumn {
                old_name,
                new_name,
                data_type,
                options,
                ..
            } => {
                let i = def
                    .column_index(&old_name.value)
                    .ok_or_else(|| Error::bad_field(&old_name.value, def.name.as_str()))?;
                if !old_name.value.eq_ignore_ascii_case(&new_name.value) {
                    renames.push((old_name.value.clone(), new_name.value.clone()));
                }
                let c = sqlparser::ast::ColumnDef {
                    name: new_name,
                    data_type,
                    options: options
                        .into_iter()
                        .map(|option| sqlparser::ast::ColumnOptionDef { name: None, option })
                        .collect(),
                };
                def.columns[i] = column_def(&c, self)?.0;
            }
            Op::AddConstraint { constraint, .. } => {
                let upper = constraint.to_string().to_ascii_uppercase();
                let cols = constraint_columns(&constraint);
                let positions = index_columns(def, &cols)?;
                if upper.contains("PRIMARY KEY") {
                    return Err(Error::unsupported("changing the primary key"));
                }
                if let TableConstraint::ForeignKey(fk) = &constraint {
                    if def.ring.is_some() {
                        return Err(Error::ring_foreign_key());
                    }
                    self.refuse_ring_parent(fk, &def.database)?;
                    // Checked and named once every clause is in (`alter_foreign_keys`).
                    fk_added.push(fk.clone());
                    return Ok(());
                }
                let name = match &constraint {
                    TableConstraint::Unique(u) => u
                        .index_name
                        .as_ref()
                        .or(u.name.as_ref())
                        .map(|n| n.value.clone()),
                    TableConstraint::Index(i) => i.name.as_ref().map(|n| n.value.clone()),
                    _ => None,
                }
                .unwrap_or_else(|| cols.first().cloned().unwrap_or_default());
                let kind = if upper.starts_with("UNIQUE") {
                    IndexKind::Unique
                } else {
                    IndexKind::Secondary
                };
                def.indexes.push(IndexDef {
                    name,
                    kind,
                    columns: positions,
                });
            }
            Op::DropForeignKey { name, .. } => fk_dropped.push(name.value),
            Op::DropIndex { name, .. } => {
                let before = def.indexes.len();
                def.indexes
                    .retain(|i| !i.name.eq_ignore_ascii_case(&name.value));
                if def.indexes.len() == before {
                    return Err(Error::new(
                        code::ER_CANT_DROP_FIELD_OR_KEY,
                        format!("Can't DROP '{}'; check that column/key exists", name.value),
                    ));
                }
            }
            other => return Err(Error::unsupported(format!("ALTER TABLE {other}"))),
        }
        Ok(())
    }
}

/// Error 1553 when the table as an ALTER leaves it (`new`) has no index a constraint of
/// `fks` needs on it, as child or as parent: the ALTER dropped it.
fn check_fk_indexes(old: &TableDef, new: &TableDef, fks: &[ForeignKey]) -> Result<()> {
    let positions = |names: &[String]| -> Option<Vec<usize>> {
        names.iter().map(|n| new.column_index(n)).collect()
    };
    for f in fks {
        let mut needed = Vec::new();
        if f.is_on(&new.database, &new.name) {
            needed.extend(positions(&f.columns));
        }
        if f.references(&new.database, &new.name) {
            needed.extend(positions(&f.parent_columns));
        }
        if needed.iter().any(|cols| !has_index_on(new, cols)) {
            let gone = old
                .indexes
                .iter()
                .find(|i| {
                    !new.indexes
                        .iter()
                        .any(|n| n.name.eq_ignore_ascii_case(&i.name))
                })
                .map_or("PRIMARY", |i| i.name.as_str());
            return Err(Error::new(
                code::ER_DROP_INDEX_FK,
                format!("Cannot drop index '{gone}': needed in a foreign key constraint"),
            ));
        }
    }
    Ok(())
}

/// What the clauses of an ALTER TABLE ask for, gathered before any row changes.
struct AlterPlan {
    /// The table as the clauses leave it.
    new: TableDef,
    /// `ALGORITHM=INPLACE`: what cannot be done in place is an error.
    algorithm_inplace: bool,
    /// The comment a COMMENT clause gives, as written.
    new_comment: Option<String>,
    /// A partitioning change: `"repartition"`, or the reason a ring table cannot take it in
    /// place.
    partition_change: Option<&'static str>,
    /// Renamed columns: (old name, new name).
    renames: Vec<(String, String)>,
    /// The names of dropped columns.
    dropped: Vec<String>,
    /// The positions of added columns.
    added: Vec<usize>,
    /// A copying ALTER rewrites rows and drops expired ones; an in-place one (comment,
    /// indexes, renames) keeps every stored row.
    copying: bool,
    /// `ENGINE=`: the engine the table is to be declared with (`Some(None)`: ringrep's own).
    engine: Option<Option<&'static str>>,
    /// `ADD [CONSTRAINT name] FOREIGN KEY ...` clauses.
    fk_added: Vec<sqlparser::ast::ForeignKeyConstraint>,
    /// `DROP FOREIGN KEY name`: the names.
    fk_dropped: Vec<String>,
}

impl AlterPlan {
    /// A plan that changes nothing yet.
    fn new(old: &TableDef) -> AlterPlan {
        AlterPlan {
            new: old.clone(),
            algorithm_inplace: false,
            new_comment: None,
            engine: None,
            partition_change: None,
            renames: Vec::new(),
            dropped: Vec::new(),
            added: Vec::new(),
            copying: false,
            fk_added: Vec::new(),
            fk_dropped: Vec::new(),
        }
    }

    /// `PARTITION BY ...` (`spec` is the text after BY): ring tables take only KEY
    /// partitioning.
    fn repartition(&mut self, spec: &str) -> Result<()> {
        let spec = parse_partition(spec)?;
        if self.new.ring.is_some() && spec.kind != "KEY" && spec.kind != "LINEAR KEY" {
            return Err(Error::create_option(
                "MAX_ROWS_PER_PK supports only KEY partitioning",
            ));
        }
        let cols = index_columns(&self.new, &spec.columns)?;
        self.new.partitioning = Some(binlog_format::schema::Partitioning {
            linear: spec.kind.starts_with("LINEAR"),
            columns: cols,
            partitions: spec.partitions,
        });
        self.partition_change = Some("repartition");
        self.copying = true;
        Ok(())
    }

    /// `ADD PARTITION [PARTITIONS n]` (`words` are the clause's upper-case words): n more
    /// partitions, 1 when not given.
    fn add_partitions(&mut self, words: &[&str]) {
        self.partition_change = Some("Can't add partition to ring buffer table");
        self.copying = true;
        if let Some(p) = self.new.partitioning.as_mut() {
            let n: Option<u32> = words
                .iter()
                .skip_while(|w| **w != "PARTITIONS")
                .nth(1)
                .and_then(|n| n.parse().ok());
            p.partitions = Some(p.partitions.unwrap_or(1) + n.unwrap_or(1));
        }
    }

    /// Checks a new COMMENT against the table's and merges them into the new table's
    /// comment. Ring and TTL properties are fixed at CREATE (the spec).
    fn apply_comment(&mut self, old: &TableDef) -> Result<()> {
        let Some(c) = &self.new_comment else {
            return Ok(());
        };
        let opts = parse_comment(c)?;
        let algorithm_inplace = self.algorithm_inplace;
        let inplace_err = |what: &str| {
            if algorithm_inplace {
                Error::new(
                    code::ER_ALTER_OPERATION_NOT_SUPPORTED_REASON,
                    format!(
                        "ALGORITHM=INPLACE is not supported. Reason: {what}. Try ALGORITHM=COPY."
                    ),
                )
            } else {
                Error::create_option(what)
            }
        };
        // An option the new comment leaves out stays as it was; only `=off` disables.
        match (&old.ring, &opts.ring) {
            (None, Some(RingSpec::On { .. })) => {
                return Err(inplace_err(
                    "Cannot enable ring buffer via ALTER; use DROP+CREATE",
                ))
            }
            (Some(_), Some(RingSpec::Off)) => {
                return Err(Error::create_option("Cannot disable ring buffer via ALTER"))
            }
            (Some(r), Some(RingSpec::On { size, .. })) if *size != r.size => {
                return Err(Error::create_option(
                    "Cannot change ring buffer size; use DROP+CREATE to resize",
                ))
            }
            _ => {}
        }
        if old.ring.is_some() {
            let had_ttl = old.ttl.is_some();
            let wants_ttl = match opts.ttl {
                Some(TtlSpec::On { .. }) => true,
                Some(TtlSpec::Off) => false,
                None => had_ttl,
            };
            if had_ttl != wants_ttl {
                return Err(inplace_err(
                    "Cannot enable/disable TTL on a ring table; use DROP+CREATE",
                ));
            }
        }
        self.new.comment = Some(merge_comment(old.comment.as_deref().unwrap_or(""), c));
        Ok(())
    }

    /// A ring table's partitions change only by copying: with `ALGORITHM=INPLACE` anything
    /// but a repartition is an error.
    fn check_partition_change(&self) -> Result<()> {
        if let Some(why) = self.partition_change {
            if self.new.ring.is_some() && self.algorithm_inplace && why != "repartition" {
                return Err(Error::new(
                    code::ER_ALTER_OPERATION_NOT_SUPPORTED_REASON,
                    format!(
                        "ALGORITHM=INPLACE is not supported. Reason: {why}. Try ALGORITHM=COPY."
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A renamed TTL column needs the comment to follow it.
    fn check_ttl_rename(&self, old: &TableDef) -> Result<()> {
        if let Some(ttl) = &old.ttl {
            let ttl_name = &old.columns[ttl.column].name;
            if self
                .renames
                .iter()
                .any(|(from, _)| from.eq_ignore_ascii_case(ttl_name))
                && self.new_comment.is_none()
            {
                return Err(Error::new(
                    code::ER_ALTER_OPERATION_NOT_SUPPORTED_REASON,
                    "Renaming the TTL column without updating the TTL comment is not supported. Reason: It's used as the TTL column. Try renaming it and updating the comment in one ALTER TABLE ... COMMENT='NDB_TABLE=TTL=<seconds>@<new name>' statement.",
                ));
            }
        }
        Ok(())
    }

    /// A ring table keeps its ring index and meta columns (the spec). Dropping one fails as
    /// RonDB fails it: the table the ALTER would make is checked by CREATE's column rules,
    /// and the column its ring option names is not found.
    fn check_ring_columns_kept(&self, old: &TableDef) -> Result<()> {
        if let Some(r) = &old.ring {
            let dropped = |c: usize| {
                self.dropped
                    .iter()
                    .any(|d| d.eq_ignore_ascii_case(&old.columns[c].name))
            };
            if dropped(r.slot_column) {
                return Err(Error::create_option("Ring index column not found in table"));
            }
            if dropped(r.meta_column) {
                return Err(Error::create_option("Ring meta column not found in table"));
            }
        }
        Ok(())
    }
}

/// The altered table, checked and completed as CREATE TABLE would; with `ALGORITHM=INPLACE`,
/// a table option it refuses is reported as an ALTER that cannot be done in place.
/// `CREATE [UNIQUE] INDEX name [USING type] ON t (columns) [options]` and `DROP INDEX name
/// ON t [options]` as the ALTER TABLE that MySQL takes them to be (`ADD [UNIQUE] INDEX`,
/// `DROP INDEX`, `DROP PRIMARY KEY` for `PRIMARY`), with ALGORITHM and LOCK as clauses of
/// their own.
pub(crate) fn index_statement_as_alter(text: &str) -> Result<String> {
    let syntax = || {
        Error::syntax(format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{text}'"
        ))
    };
    let on = find_top_level(text, "ON").ok_or_else(syntax)?;
    let head: Vec<&str> = text[..on].split_whitespace().collect();
    let upper: Vec<String> = head.iter().map(|w| w.to_ascii_uppercase()).collect();
    let at = upper.iter().position(|w| w == "INDEX").ok_or_else(syntax)?;
    let name = *head.get(at + 1).ok_or_else(syntax)?;
    let kind = &upper[1..at];
    let using = upper
        .get(at + 2)
        .filter(|w| *w == "USING")
        .map(|_| format!(" USING {}", head.get(at + 3).copied().unwrap_or("BTREE")));
    let tail = text[on + 2..].trim();
    let table_end = tail
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(tail.len());
    let table = &tail[..table_end];
    if table.is_empty() {
        return Err(syntax());
    }
    let mut rest = tail[table_end..].trim_start();
    let mut clauses = Vec::new();
    if upper[0] == "CREATE" {
        if kind.iter().any(|k| k == "FULLTEXT" || k == "SPATIAL") {
            return Err(Error::unsupported(format!("{} indexes", kind.join(" "))));
        }
        if !rest.starts_with('(') {
            return Err(syntax());
        }
        let close = matching_paren(rest).ok_or_else(syntax)?;
        let columns = &rest[..=close];
        rest = rest[close + 1..].trim_start();
        let unique = if kind.iter().any(|k| k == "UNIQUE") {
            "UNIQUE "
        } else {
            ""
        };
        clauses.push(format!(
            "ADD {unique}INDEX {name}{} {columns}",
            using.unwrap_or_default()
        ));
    } else if name.trim_matches('`').eq_ignore_ascii_case("PRIMARY") {
        clauses.push("DROP PRIMARY KEY".to_string());
    } else {
        clauses.push(format!("DROP INDEX {name}"));
    }
    // What follows: index options, and ALGORITHM / LOCK, which become clauses of the ALTER.
    let mut options = String::new();
    // Set while an ALGORITHM or LOCK clause waits for its value (`ALGORITHM [=] INPLACE`).
    let mut joining = false;
    for word in rest.split_whitespace() {
        let w = word.to_ascii_uppercase();
        if joining {
            let last = clauses.pop().unwrap_or_default();
            let joined = if last.ends_with('=') || word.starts_with('=') {
                format!("{last}{word}")
            } else {
                format!("{last}={word}")
            };
            joining = joined.ends_with('=');
            clauses.push(joined);
        } else if w.starts_with("ALGORITHM") || w.starts_with("LOCK") {
            joining = !word.contains('=') || word.ends_with('=');
            clauses.push(word.to_string());
        } else {
            options.push(' ');
            options.push_str(word);
        }
    }
    if !options.trim().is_empty() {
        clauses[0].push_str(&options);
    }
    Ok(format!("ALTER TABLE {table} {}", clauses.join(", ")))
}

/// The byte offset of the parenthesis that closes the one `s` starts with (outside quotes).
fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0;
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn prepare_altered(new: TableDef, algorithm_inplace: bool) -> Result<TableDef> {
    prepare_table(new, None, false).map_err(|e| {
        if algorithm_inplace && e.code == code::ER_ILLEGAL_HA_CREATE_OPTION {
            let reason = e
                .message
                .rsplit_once("create option '")
                .map(|(_, r)| r.trim_end_matches('\'').to_string())
                .unwrap_or_default();
            Error::new(
                code::ER_ALTER_OPERATION_NOT_SUPPORTED_REASON,
                format!(
                    "ALGORITHM=INPLACE is not supported. Reason: {reason}. Try ALGORITHM=COPY."
                ),
            )
        } else {
            e
        }
    })
}

/// For each column of the altered table, the old table's column its values come from
/// (matched by name, following renames); `None` for a new column.
fn column_sources(
    new: &TableDef,
    old: &TableDef,
    renames: &[(String, String)],
) -> Vec<Option<usize>> {
    new.columns
        .iter()
        .map(|c| {
            let source = renames
                .iter()
                .find(|(_, to)| to.eq_ignore_ascii_case(&c.name))
                .map(|(from, _)| from.as_str())
                .unwrap_or(&c.name);
            old.column_index(source)
        })
        .collect()
}

/// How a stored row moves into the altered table's layout.
struct RowMapping {
    /// The altered table.
    def: TableDef,
    /// For each of its columns, where its value comes from (see [`column_sources`]).
    sources: Vec<Option<usize>>,
    /// The old table's column types, by position.
    old_types: Vec<ColumnType>,
    /// The old table's TTL when the ALTER copies rows: expired rows are left behind.
    expiring: Option<TtlOptions>,
    /// The statement's time, epoch microseconds.
    now: i64,
    /// The session's time zone offset in seconds.
    tz: i64,
}

impl RowMapping {
    /// `row` in the new layout, each value converted to its new column's type and new
    /// columns at their defaults; `None` for an expired row. Meta rows keep NULLs and their
    /// meta column as they are.
    fn row(&self, row: &[Value], is_meta: bool) -> Result<Option<Vec<Value>>> {
        if !is_meta {
            if let Some(t) = &self.expiring {
                if row
                    .get(t.column)
                    .and_then(|v| ringrep_engine::types::expiry_us(v, t.seconds))
                    .is_some_and(|e| e <= self.now)
                {
                    return Ok(None);
                }
            }
        }
        let mut out = Vec::with_capacity(self.def.columns.len());
        for (i, c) in self.def.columns.iter().enumerate() {
            out.push(match self.sources[i] {
                Some(src) => {
                    let mut v = row.get(src).cloned().unwrap_or(Value::Null);
                    // An ENUM or SET becoming a number becomes its member's index or its
                    // members' bits, as MySQL's copy converts them (0 for an ENUM's empty
                    // string of a bad value).
                    if let (true, Value::Text(t)) = (c.ty.is_number(), &v) {
                        if let Some(n) = self.old_types.get(src).and_then(|o| o.member_number(t)) {
                            v = Value::UInt(n);
                        }
                    }
                    // A TIME becoming a string is written with its column's digits.
                    if let (true, Value::Time(us), Some(ColumnType::Time { fsp })) =
                        (c.ty.is_string(), &v, self.old_types.get(src))
                    {
                        v = Value::Text(binlog_format::value::format_time(*us, *fsp));
                    }
                    if is_meta
                        && (v.is_null()
                            || self.def.ring.as_ref().is_some_and(|r| r.meta_column == i))
                    {
                        v
                    } else if self.old_types.get(src) == Some(&c.ty) {
                        // A value of the same type is one its column holds already.
                        v
                    } else {
                        ringrep_engine::types::restore(
                            v,
                            &ColumnDef {
                                nullable: true,
                                ..c.clone()
                            },
                            1,
                            self.tz,
                        )?
                    }
                }
                None if is_meta && c.nullable => Value::Null,
                None => ringrep_engine::types::default_value(c, self.now, self.tz)
                    .unwrap_or_else(|| ringrep_engine::types::zero_value(&c.ty)),
            });
        }
        Ok(Some(out))
    }
}

/// The comment after an ALTER ... COMMENT: the old options merged with the new ones (a new
/// value wins; an option the new comment leaves out stays), printed as RonDB prints them:
/// other options first, then TTL, then MAX_ROWS_PER_PK.
fn merge_comment(old: &str, new: &str) -> String {
    let items = |c: &str| -> Vec<String> {
        c.find("NDB_TABLE=").map_or(vec![], |i| {
            c[i + 10..]
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
    };
    let key = |item: &str| {
        let k = item.split('=').next().unwrap_or("").to_ascii_uppercase();
        if k == "RING_BUFFER" {
            "MAX_ROWS_PER_PK".to_string()
        } else {
            k
        }
    };
    let mut merged: Vec<String> = items(old);
    for n in items(new) {
        match merged.iter().position(|o| key(o) == key(&n)) {
            Some(i) => merged[i] = n,
            None => merged.push(n),
        }
    }
    let rank = |i: &String| match key(i).as_str() {
        "TTL" => 1,
        "MAX_ROWS_PER_PK" => 2,
        _ => 0,
    };
    merged.sort_by_key(rank);
    // A comment without NDB_TABLE options, on a table without any, is just text.
    if merged.is_empty() && !new.contains("NDB_TABLE=") {
        return new.to_string();
    }
    format!("NDB_TABLE={}", merged.join(","))
}

fn shift_positions(def: &mut TableDef, at: usize) {
    let f = |p: &mut usize| {
        if *p >= at {
            *p += 1;
        }
    };
    def.primary_key.iter_mut().for_each(f);
    for i in &mut def.indexes {
        i.columns.iter_mut().for_each(f);
    }
    if let Some(p) = def.partitioning.as_mut() {
        p.columns.iter_mut().for_each(f);
    }
}

fn remove_column(def: &mut TableDef, at: usize) {
    def.columns.remove(at);
    let f = |p: &mut usize| {
        if *p > at {
            *p -= 1;
        }
    };
    def.primary_key.retain(|&p| p != at);
    def.primary_key.iter_mut().for_each(f);
    for i in &mut def.indexes {
        i.columns.retain(|&p| p != at);
        i.columns.iter_mut().for_each(f);
    }
    def.indexes.retain(|i| !i.columns.is_empty());
}

/// `CREATE DATABASE ... [DEFAULT] ENCRYPTION [=] 'N'` without the ENCRYPTION option: ringrep
/// keeps no data encrypted at rest, so 'N' is what it does anyway and 'Y' is refused.
pub(crate) fn without_encryption_option(text: &str) -> Result<String> {
    let syntax = || {
        Error::syntax(format!(
            "You have an error in your SQL syntax; ENCRYPTION takes 'Y' or 'N', in '{text}'"
        ))
    };
    let at = crate::parse::lexer::find_top_level(text, "ENCRYPTION").ok_or_else(syntax)?;
    let before = text[..at].trim_end();
    let start = match before.len().checked_sub(7) {
        Some(d) if before[d..].eq_ignore_ascii_case("DEFAULT") => d,
        _ => at,
    };
    let rest = text[at + "ENCRYPTION".len()..].trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    let quote = rest
        .chars()
        .next()
        .filter(|c| *c == '\'' || *c == '"')
        .ok_or_else(syntax)?;
    let value_end = rest[1..].find(quote).ok_or_else(syntax)? + 2;
    match &rest[1..value_end - 1] {
        v if v.eq_ignore_ascii_case("N") => {}
        v if v.eq_ignore_ascii_case("Y") => {
            return Err(Error::unsupported(
                "ENCRYPTION='Y' (ringrep keeps no data encrypted at rest)",
            ))
        }
        _ => return Err(syntax()),
    }
    Ok(format!("{} {}", &text[..start], &rest[value_end..]))
}

#[cfg(test)]
mod index_statement_tests {
    use super::index_statement_as_alter as alter;

    #[test]
    fn create_and_drop_index_are_alters() {
        assert_eq!(
            alter("CREATE INDEX i ON t (a, b)").expect("create"),
            "ALTER TABLE t ADD INDEX i (a, b)"
        );
        assert_eq!(
            alter("CREATE UNIQUE INDEX `u` USING BTREE ON db.t(a) ALGORITHM = INPLACE LOCK=NONE")
                .expect("unique"),
            "ALTER TABLE db.t ADD UNIQUE INDEX `u` USING BTREE (a), ALGORITHM=INPLACE, LOCK=NONE"
        );
        assert_eq!(
            alter("DROP INDEX i ON t ALGORITHM INPLACE").expect("drop"),
            "ALTER TABLE t DROP INDEX i, ALGORITHM=INPLACE"
        );
        assert_eq!(
            alter("DROP INDEX `PRIMARY` ON t").expect("primary"),
            "ALTER TABLE t DROP PRIMARY KEY"
        );
        assert!(alter("CREATE INDEX i ON t").is_err(), "no columns");
        assert!(alter("CREATE FULLTEXT INDEX i ON t (a)").is_err());
    }
}
