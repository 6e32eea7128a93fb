//! The Kafka Connect schemas of Debezium's MySQL change events, as JsonConverter writes them
//! (`schemas.enable=true`): the key struct, the envelope with its row structs, the source
//! block and the transaction block. Field lists, names and versions are those Debezium 3.6's
//! own schema builders produce for the same MySQL table.

use serde_json::{json, Value as Json};

use binlog_format::schema::{ColumnDef, ColumnType, IntWidth, TableDef};

/// The version of Debezium's envelope schema the values follow.
const ENVELOPE_VERSION: u32 = 2;

/// A Connect schema's type, and the semantic name and parameters Debezium adds.
struct ConnectType {
    ty: &'static str,
    name: Option<&'static str>,
    /// The one parameter Debezium adds: `allowed` for an ENUM or SET, `length` for BIT(M).
    parameter: Option<(&'static str, String)>,
}

const fn plain(ty: &'static str) -> ConnectType {
    ConnectType {
        ty,
        name: None,
        parameter: None,
    }
}

const fn named(ty: &'static str, name: &'static str) -> ConnectType {
    ConnectType {
        ty,
        name: Some(name),
        parameter: None,
    }
}

/// The Connect type Debezium's MySQL connector gives a column type (its defaults, but
/// DECIMAL as a string). Unsigned integers take the next wider type where the signed one
/// cannot hold them; TINYINT(1) is a TINYINT (INT16), as Debezium reads it from SHOW CREATE
/// TABLE and from the DDL in ringrep's MySQL binlog.
fn connect_type(ty: &ColumnType) -> ConnectType {
    match ty {
        ColumnType::Integer { width, unsigned } => plain(match (width, unsigned) {
            (IntWidth::Tiny | IntWidth::Bool, _) | (IntWidth::Small, false) => "int16",
            (IntWidth::Small, true) | (IntWidth::Medium, _) | (IntWidth::Int, false) => "int32",
            (IntWidth::Int, true) | (IntWidth::Big, _) => "int64",
        }),
        ColumnType::Decimal { .. }
        | ColumnType::UnsignedDecimal { .. }
        | ColumnType::Char { .. }
        | ColumnType::VarChar { .. }
        | ColumnType::Text { .. } => plain("string"),
        ColumnType::Float | ColumnType::Real { double: false, .. } => plain("float"),
        ColumnType::Double | ColumnType::Real { double: true, .. } => plain("double"),
        ColumnType::Binary { .. } | ColumnType::VarBinary { .. } | ColumnType::Blob { .. } => {
            plain("bytes")
        }
        ColumnType::Json => named("string", "io.debezium.data.Json"),
        ColumnType::Date => named("int32", "io.debezium.time.Date"),
        ColumnType::DateTime { fsp } if *fsp <= 3 => named("int64", "io.debezium.time.Timestamp"),
        ColumnType::DateTime { .. } => named("int64", "io.debezium.time.MicroTimestamp"),
        ColumnType::Timestamp { .. } => named("string", "io.debezium.time.ZonedTimestamp"),
        ColumnType::Enum { values } => ConnectType {
            parameter: Some(("allowed", values.join(","))),
            ..named("string", "io.debezium.data.Enum")
        },
        ColumnType::Set { values } => ConnectType {
            parameter: Some(("allowed", values.join(","))),
            ..named("string", "io.debezium.data.EnumSet")
        },
        ColumnType::Year => named("int32", "io.debezium.time.Year"),
        // time.precision.mode=adaptive_time_microseconds: microseconds, signed.
        ColumnType::Time { .. } => named("int64", "io.debezium.time.MicroTime"),
        // BIT(1) is a boolean; a wider BIT its bytes, little endian, with its length.
        ColumnType::Bit { width: 1 } => plain("boolean"),
        ColumnType::Bit { width } => ConnectType {
            parameter: Some(("length", width.to_string())),
            ..named("bytes", "io.debezium.data.Bits")
        },
    }
}

/// A field of a struct schema: a primitive of type `ty`.
fn field(name: &str, ty: &str, optional: bool) -> Json {
    json!({"type": ty, "optional": optional, "field": name})
}

/// The field of column `col`. Debezium's semantic types carry version 1.
fn column_field(col: &ColumnDef, optional: bool) -> Json {
    let t = connect_type(&col.ty);
    let mut f = field(&col.name, t.ty, optional);
    if let (Some(name), Some(obj)) = (t.name, f.as_object_mut()) {
        obj.insert("name".into(), json!(name));
        obj.insert("version".into(), json!(1));
        if let Some((key, value)) = t.parameter {
            obj.insert("parameters".into(), json!({ key: value }));
        }
    }
    f
}

/// `<prefix>.<database>.<table>`, the start of the table's schema names.
fn table_name(prefix: &str, table: &TableDef) -> String {
    format!("{prefix}.{}.{}", table.database, table.name)
}

/// The key schema: the primary-key columns, required, named `<prefix>.<db>.<table>.Key`.
pub(super) fn key_schema(prefix: &str, table: &TableDef) -> Json {
    let fields: Vec<Json> = table
        .primary_key
        .iter()
        .filter_map(|&pos| table.columns.get(pos))
        .map(|col| column_field(col, false))
        .collect();
    json!({
        "type": "struct",
        "fields": fields,
        "optional": false,
        "name": format!("{}.Key", table_name(prefix, table)),
    })
}

/// The row struct of `before` and `after`, as field `name`. Every column outside the primary
/// key is optional, whatever its NOT NULL: a delete's `before` holds only the key.
fn row_schema(prefix: &str, table: &TableDef, name: &str) -> Json {
    let fields: Vec<Json> = table
        .columns
        .iter()
        .enumerate()
        .map(|(pos, col)| column_field(col, col.nullable || !table.primary_key.contains(&pos)))
        .collect();
    json!({
        "type": "struct",
        "fields": fields,
        "optional": true,
        "name": format!("{}.Value", table_name(prefix, table)),
        "field": name,
    })
}

/// Debezium MySQL's source block, plus ringrep's own optional fields at its end.
fn source_schema() -> Json {
    let mut fields = vec![
        field("version", "string", false),
        field("connector", "string", false),
        field("name", "string", false),
        field("ts_ms", "int64", false),
        json!({
            "type": "string",
            "optional": true,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {
                "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
            },
            "default": "false",
            "field": "snapshot",
        }),
        field("db", "string", false),
    ];
    let rest = [
        ("sequence", "string", true),
        ("ts_us", "int64", true),
        ("ts_ns", "int64", true),
        ("table", "string", true),
        ("server_id", "int64", false),
        ("gtid", "string", true),
        ("file", "string", false),
        ("pos", "int64", false),
        ("row", "int32", false),
        ("thread", "int64", true),
        ("query", "string", true),
        ("ringrep_seq", "int64", true),
        ("ringrep_cause", "string", true),
        ("ringrep_schema_version", "string", true),
    ];
    fields.extend(rest.iter().map(|&(n, t, o)| field(n, t, o)));
    json!({
        "type": "struct",
        "fields": fields,
        "optional": false,
        "name": "io.debezium.connector.mysql.Source",
        "version": 1,
        "field": "source",
    })
}

/// Debezium's transaction block, `event.block`.
fn block_schema() -> Json {
    json!({
        "type": "struct",
        "fields": [
            field("id", "string", false),
            field("total_order", "int64", false),
            field("data_collection_order", "int64", false),
        ],
        "optional": true,
        "name": "event.block",
        "version": 1,
        "field": "transaction",
    })
}

/// The value schema: Debezium's envelope, named `<prefix>.<db>.<table>.Envelope`.
pub(super) fn envelope_schema(prefix: &str, table: &TableDef) -> Json {
    json!({
        "type": "struct",
        "fields": [
            row_schema(prefix, table, "before"),
            row_schema(prefix, table, "after"),
            source_schema(),
            block_schema(),
            field("op", "string", false),
            field("ts_ms", "int64", true),
            field("ts_us", "int64", true),
            field("ts_ns", "int64", true),
        ],
        "optional": false,
        "name": format!("{}.Envelope", table_name(prefix, table)),
        "version": ENVELOPE_VERSION,
    })
}
