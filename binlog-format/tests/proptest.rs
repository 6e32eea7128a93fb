//! Property tests: every value, event and record round-trips through the codec and the frame
//! layer, `encoded_len` equals the real length, and truncated or extended payloads fail.

use binlog_format::codec;
use binlog_format::frame::{scan_frame, write_frame, FrameScan};
use binlog_format::value::{Date, DateTime};
use binlog_format::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::UInt),
        any::<f32>()
            .prop_filter("NaN never equals itself", |f| !f.is_nan())
            .prop_map(Value::Float),
        any::<f64>()
            .prop_filter("NaN never equals itself", |f| !f.is_nan())
            .prop_map(Value::Double),
        "-?[0-9]{1,20}(\\.[0-9]{1,10})?".prop_map(Value::Decimal),
        vec(any::<u8>(), 0..64).prop_map(Value::Bytes),
        ".{0,40}".prop_map(Value::Text),
        (0u16..=9999, 1u8..=12, 1u8..=28).prop_map(|(year, month, day)| Value::Date(Date {
            year,
            month,
            day
        })),
        (
            0u16..=9999,
            1u8..=12,
            1u8..=28,
            0u8..24,
            0u8..60,
            0u8..60,
            0u32..1_000_000
        )
            .prop_map(|(year, month, day, hour, minute, second, micros)| {
                Value::DateTime(DateTime {
                    date: Date { year, month, day },
                    hour,
                    minute,
                    second,
                    micros,
                })
            }),
        any::<i64>().prop_map(Value::Timestamp),
        ".{0,20}".prop_map(Value::Json),
        any::<i64>().prop_map(Value::Time),
        any::<u64>().prop_map(Value::Bit),
    ]
}

fn cause() -> impl Strategy<Value = Cause> {
    prop_oneof![
        Just(Cause::Insert),
        Just(Cause::Overwrite),
        Just(Cause::MetaUpdate),
        Just(Cause::Update),
        Just(Cause::PrefixDelete),
        Just(Cause::TtlPurge),
        Just(Cause::DeleteOldest),
        Just(Cause::Truncate),
        Just(Cause::Delete),
    ]
}

fn row_event() -> impl Strategy<Value = RowEvent> {
    let change = prop_oneof![
        vec(value(), 0..8).prop_map(|row| RowChange::Write { row }),
        (
            vec(value(), 0..4),
            vec(value(), 0..8),
            proptest::option::of(vec(value(), 0..8))
        )
            .prop_map(|(key, after, before)| RowChange::Update { key, after, before }),
        vec(value(), 0..4).prop_map(|key| RowChange::Delete { key }),
    ];
    (any::<u64>(), change, cause()).prop_map(|(table_id, change, cause)| RowEvent {
        table_id,
        change,
        cause,
    })
}

fn column_type() -> impl Strategy<Value = ColumnType> {
    use binlog_format::schema::{IntWidth, LobSize};
    let width = prop_oneof![
        Just(IntWidth::Tiny),
        Just(IntWidth::Small),
        Just(IntWidth::Medium),
        Just(IntWidth::Int),
        Just(IntWidth::Big)
    ];
    let lob = prop_oneof![
        Just(LobSize::Tiny),
        Just(LobSize::Normal),
        Just(LobSize::Medium),
        Just(LobSize::Long)
    ];
    prop_oneof![
        (width, any::<bool>())
            .prop_map(|(width, unsigned)| ColumnType::Integer { width, unsigned }),
        (1u8..65, 0u8..30).prop_map(|(precision, scale)| ColumnType::Decimal { precision, scale }),
        Just(ColumnType::Float),
        Just(ColumnType::Double),
        any::<u32>().prop_map(|len| ColumnType::Char { len }),
        any::<u32>().prop_map(|len| ColumnType::VarChar { len }),
        any::<u32>().prop_map(|len| ColumnType::Binary { len }),
        any::<u32>().prop_map(|len| ColumnType::VarBinary { len }),
        lob.clone().prop_map(|size| ColumnType::Text { size }),
        lob.prop_map(|size| ColumnType::Blob { size }),
        Just(ColumnType::Json),
        Just(ColumnType::Date),
        (0u8..7).prop_map(|fsp| ColumnType::DateTime { fsp }),
        (0u8..7).prop_map(|fsp| ColumnType::Timestamp { fsp }),
        (1u8..65, 0u8..30)
            .prop_map(|(precision, scale)| ColumnType::UnsignedDecimal { precision, scale }),
        (
            any::<bool>(),
            proptest::option::of((1u8..255, 0u8..30)),
            any::<bool>()
        )
            .prop_map(|(double, digits, unsigned)| ColumnType::Real {
                double,
                digits,
                unsigned
            }),
        (0u8..7).prop_map(|fsp| ColumnType::Time { fsp }),
        (1u8..65).prop_map(|width| ColumnType::Bit { width }),
    ]
}

fn table_def() -> impl Strategy<Value = TableDef> {
    use binlog_format::schema::*;
    let default = prop_oneof![
        Just(ColumnDefault::None),
        value().prop_map(ColumnDefault::Value),
        (0u8..7).prop_map(|fsp| ColumnDefault::CurrentTimestamp { fsp })
    ];
    let column = (
        "[a-z_]{1,12}",
        column_type(),
        any::<bool>(),
        default,
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(String::new()), "[a-z' \\\n]{1,20}"],
    )
        .prop_map(
            |(name, ty, nullable, default, on_update_now, auto_increment, comment)| ColumnDef {
                name,
                ty,
                nullable,
                default,
                on_update_now,
                auto_increment,
                comment,
            },
        );
    let index = ("[a-z_]{1,10}", any::<bool>(), vec(0usize..20, 1..4)).prop_map(
        |(name, unique, columns)| IndexDef {
            name,
            kind: if unique {
                IndexKind::Unique
            } else {
                IndexKind::Secondary
            },
            columns,
        },
    );
    (
        any::<u64>(),
        ("[a-z]{1,8}", "[a-z_]{1,16}"),
        vec(column, 1..8),
        vec(0usize..8, 0..4),
        vec(index, 0..3),
        proptest::option::of((any::<u32>(), 0usize..8, 0usize..8).prop_map(
            |(size, slot_column, meta_column)| RingOptions {
                size,
                slot_column,
                meta_column,
            },
        )),
        proptest::option::of(
            (any::<u32>(), 0usize..8).prop_map(|(seconds, column)| TtlOptions { seconds, column }),
        ),
        proptest::option::of(
            (
                any::<bool>(),
                vec(0usize..8, 0..3),
                proptest::option::of(any::<u32>()),
            )
                .prop_map(|(linear, columns, partitions)| Partitioning {
                    linear,
                    columns,
                    partitions,
                }),
        ),
        proptest::option::of(".{0,40}"),
    )
        .prop_map(
            |(
                id,
                (database, name),
                columns,
                primary_key,
                indexes,
                ring,
                ttl,
                partitioning,
                comment,
            )| TableDef {
                id,
                database,
                name,
                columns,
                primary_key,
                indexes,
                ring,
                ttl,
                partitioning,
                comment,
            },
        )
}

fn ddl_event() -> impl Strategy<Value = DdlEvent> {
    prop_oneof![
        table_def().prop_map(|table| DdlEvent::CreateTable { table }),
        table_def().prop_map(|table| DdlEvent::AlterTable { table }),
        "[a-z]{1,10}".prop_map(|name| DdlEvent::CreateDatabase { name }),
        "[a-z]{1,10}".prop_map(|name| DdlEvent::DropDatabase { name }),
        (any::<u64>(), "[a-z]{1,8}", "[a-z]{1,8}").prop_map(|(table_id, database, name)| {
            DdlEvent::DropTable {
                table_id,
                database,
                name,
            }
        }),
        any::<u64>().prop_map(|table_id| DdlEvent::TruncateTable { table_id }),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    let event =
        prop_oneof![4 => row_event().prop_map(Event::Row), 1 => ddl_event().prop_map(Event::Ddl)];
    let origin = proptest::option::of(
        (any::<u32>(), any::<u64>()).prop_map(|(server_id, seq)| Origin { server_id, seq }),
    );
    prop_oneof![
        (
            any::<u32>(),
            any::<u64>(),
            any::<i64>(),
            origin,
            vec(event, 0..6)
        )
            .prop_map(|(server_id, seq, commit_time_us, origin, events)| {
                Record::Transaction(Transaction {
                    server_id,
                    seq,
                    commit_time_us,
                    origin,
                    events,
                })
            }),
        (any::<u32>(), any::<i64>(), any::<u64>()).prop_map(|(server_id, time_us, last_seq)| {
            Record::Heartbeat(Heartbeat {
                server_id,
                time_us,
                last_seq,
            })
        }),
    ]
}

/// Transactions of row events only: the records the fast decoder handles itself.
fn row_record() -> impl Strategy<Value = Record> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<i64>(),
        vec(row_event(), 0..6),
    )
        .prop_map(|(server_id, seq, commit_time_us, events)| {
            Record::Transaction(Transaction {
                server_id,
                seq,
                commit_time_us,
                origin: None,
                events: events.into_iter().map(Event::Row).collect(),
            })
        })
}

/// Damages a payload: overwrites up to three bytes, then maybe cuts it short.
fn damage(
    mut bytes: Vec<u8>,
    edits: &[(prop::sample::Index, u8)],
    cut: Option<prop::sample::Index>,
) -> Vec<u8> {
    if !bytes.is_empty() {
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
    }
    if let Some(cut) = cut {
        bytes.truncate(cut.index(bytes.len() + 1));
    }
    bytes
}

/// Both decoders gave the same value (compared by encoding, so that a NaN equals itself), or
/// both refused.
fn same_outcome<T: bincode::Encode>(
    fast: binlog_format::Result<T>,
    bincode: binlog_format::Result<T>,
) -> bool {
    match (fast, bincode) {
        (Ok(a), Ok(b)) => codec::encode(&a).ok() == codec::encode(&b).ok(),
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

proptest! {
    /// `encode_record_into` and `encode_row_into` (the fast encoder, with bincode as fallback)
    /// write exactly bincode's bytes.
    #[test]
    fn fast_encoder_writes_what_bincode_writes(
        r in prop_oneof![record(), row_record()],
        row in vec(value(), 0..6),
    ) {
        let mut fast = vec![9u8];
        codec::encode_record_into(&r, &mut fast).expect("encode");
        prop_assert_eq!(&fast[1..], &codec::encode(&r).expect("encode")[..]);
        let mut fast = vec![9u8];
        codec::encode_row_into(&row, &mut fast);
        prop_assert_eq!(&fast[1..], &codec::encode(&row).expect("encode")[..]);
    }

    /// `decode_record` and `decode_row` (the fast decoder, with bincode as fallback) give what
    /// bincode gives, for intact payloads and for damaged ones.
    #[test]
    fn fast_decoder_agrees_with_bincode(
        r in prop_oneof![record(), row_record()],
        row in vec(value(), 0..6),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let bytes = codec::encode(&r).expect("encode");
        prop_assert_eq!(codec::decode_record(&bytes).expect("decode"), r);
        let bad = damage(bytes, &edits, cut);
        prop_assert!(same_outcome(codec::decode_record(&bad), codec::decode::<Record>(&bad)));

        let bytes = codec::encode(&row).expect("encode");
        prop_assert_eq!(codec::decode_row(&bytes).expect("decode"), row);
        let bad = damage(bytes, &edits, cut);
        prop_assert!(same_outcome(codec::decode_row(&bad), codec::decode::<Vec<Value>>(&bad)));
    }

    #[test]
    fn segment_headers_round_trip(server_id in any::<u32>(), first_seq in any::<u64>(), created_us in any::<i64>(), databases in vec("[a-z]{1,8}", 0..4), tables in vec(table_def(), 0..4)) {
        let h = SegmentHeader { server_id, first_seq, created_us, databases, tables };
        let bytes = codec::encode(&h).expect("encode");
        prop_assert_eq!(codec::encoded_len(&h).expect("len"), bytes.len());
        prop_assert_eq!(codec::decode::<SegmentHeader>(&bytes).expect("decode"), h);
    }

    /// The codec runs on bincode's own derives for speed; the format is defined as the serde
    /// encoding (docs/format.md). Both must give the same bytes, both ways.
    #[test]
    fn native_and_serde_encodings_are_the_same_bytes(r in record()) {
        let native = codec::encode(&r).expect("encode");
        let serde = bincode::serde::encode_to_vec(&r, codec::CONFIG).expect("serde encode");
        prop_assert_eq!(&native, &serde);
        let (back, used): (Record, usize) =
            bincode::serde::decode_from_slice(&native, codec::CONFIG).expect("serde decode");
        prop_assert_eq!(used, native.len());
        prop_assert_eq!(back, r);
    }

    #[test]
    fn values_round_trip(v in value()) {
        let bytes = codec::encode(&v).expect("encode");
        prop_assert_eq!(codec::encoded_len(&v).expect("len"), bytes.len());
        prop_assert_eq!(codec::decode::<Value>(&bytes).expect("decode"), v);
    }

    #[test]
    fn records_round_trip_through_frames(r in record()) {
        let payload = codec::encode(&r).expect("encode");
        prop_assert_eq!(codec::encoded_len(&r).expect("len"), payload.len());
        let mut framed = Vec::new();
        write_frame(&payload, &mut framed).expect("frame");
        match scan_frame(&framed, u32::MAX) {
            FrameScan::Frame { payload: p, len } => {
                prop_assert_eq!(len, framed.len());
                prop_assert_eq!(codec::decode::<Record>(p).expect("decode"), r.clone());
            }
            other => prop_assert!(false, "unexpected {:?}", other),
        }
        // Extra bytes after a payload are refused.
        let mut longer = payload.clone();
        longer.push(0);
        prop_assert!(codec::decode::<Record>(&longer).is_err());
        // Truncated payloads never decode to the same record.
        if payload.len() > 1 {
            let cut = &payload[..payload.len() - 1];
            prop_assert!(codec::decode::<Record>(cut).map(|d| d != r).unwrap_or(true));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in vec(any::<u8>(), 0..256)) {
        let _ = codec::decode::<Record>(&bytes);
        let _ = codec::decode_record(&bytes);
        let _ = codec::decode_row(&bytes);
        let _ = scan_frame(&bytes, 1024);
    }
}
