//! Primary, relay, broker, Kafka source, replica, verifier: converged. Then the change topic
//! read as any consumer would, checked against docs/kafka.md. The broker is the one named by
//! RINGREP_TEST_KAFKA_BROKERS (CI starts one), else librdkafka's in-process mock cluster.

use ringrep_testkit::broker;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use binlog_format::SyncPolicy;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_applier::{Applier, KafkaSource};
use ringrep_cdc::kafka::{partition_for, value_json, Format};
use ringrep_engine::{Engine, EngineConfig};
use ringrep_kafka::replication_seqs;
use ringrep_relay::Relay;
use ringrep_sql::SqlSession;
use serde_json::Value as Json;

const PARTITIONS: i32 = 4;

#[test]
fn primary_relay_broker_applier_replica_converge() {
    let broker = broker::broker();
    let settings = broker.settings("e2e", &["test.user_events"], PARTITIONS);
    let prefix = settings.topic_prefix.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let open = |name: &str, id: u32, read_only: bool| {
        let mut cfg = EngineConfig::new(id);
        cfg.sync = SyncPolicy::Never;
        cfg.read_only = read_only;
        Engine::open(&dir.path().join(name), cfg).expect("open").0
    };
    let primary = open("primary", 1, false);
    let replica = open("replica", 2, true);

    // The workload: ring overwrites, an update, a prefix delete and a TTL purge.
    let mut s = SqlSession::new(&primary);
    s.execute("CREATE TABLE test.user_events (user_id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), payload VARCHAR(64), PRIMARY KEY (user_id, ring_idx), KEY ttl_index (created_at)) COMMENT='NDB_TABLE=TTL=1@created_at,MAX_ROWS_PER_PK=3'")
        .expect("create");
    for i in 0..60 {
        s.execute(&format!(
            "INSERT INTO test.user_events (user_id, payload) VALUES ({}, 'e{i}')",
            i % 6
        ))
        .expect("insert");
    }
    s.execute("UPDATE test.user_events SET payload = 'changed' WHERE user_id = 1")
        .expect("update");
    s.execute("DELETE FROM test.user_events WHERE user_id = 2")
        .expect("prefix delete");
    std::thread::sleep(Duration::from_millis(1100));
    s.execute("INSERT INTO test.user_events (user_id, payload) VALUES (9, 'late')")
        .expect("insert");
    primary.purge_all(100).expect("purge");
    let last = primary.last_seq();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let relay = rt.spawn(
        Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier()).run(stop_rx),
    );
    let mut applier = Applier::new(&replica).expect("applier");
    let (_never, never_rx) = tokio::sync::watch::channel(false);
    let applied = rt.block_on(async {
        let k = settings.clone();
        let mut source = tokio::task::spawn_blocking(move || KafkaSource::open(&k, 1))
            .await
            .expect("join")
            .expect("kafka source");
        tokio::time::timeout(
            Duration::from_secs(120),
            applier.run(
                &mut source,
                Some(last),
                false,
                Duration::from_millis(50),
                &mut |_, _| {},
                &never_rx,
            ),
        )
        .await
        .expect("the replica caught up within 120 s")
        .expect("apply")
    });
    assert_eq!(applied, last);
    let _ = stop_tx.send(true);
    assert_eq!(rt.block_on(relay).expect("join").expect("relay"), last);

    let report = verify(&primary, &replica, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());

    // The change topic, as a consumer in any language reads it.
    let consumer: BaseConsumer = settings
        .client_config()
        .set("group.id", "ringrep-test")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let topic = format!("{prefix}.test.user_events");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(&topic, p, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut by_partition: HashMap<i32, Vec<(Option<Json>, Json)>> = HashMap::new();
    let mut idle = Instant::now();
    while idle.elapsed() < Duration::from_secs(3) {
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m.expect("message");
            let key: Json = serde_json::from_slice(m.key().expect("key")).expect("key is JSON");
            let value = m
                .payload()
                .map(|v| serde_json::from_slice(v).expect("envelope is JSON"));
            by_partition
                .entry(m.partition())
                .or_default()
                .push((value, key));
            idle = Instant::now();
        }
    }
    let all: Vec<&(Option<Json>, Json)> = by_partition.values().flatten().collect();
    let envelopes: Vec<&Json> = all.iter().filter_map(|(v, _)| v.as_ref()).collect();
    // Every row event of the binlog exactly once, by operation and cause.
    let mut want: HashMap<(String, String), usize> = HashMap::new();
    let mut t = binlog_format::Tailer::open(&primary.binlog_dir(), binlog_format::StartAt::Seq(1));
    while let Some((_, rec)) = t.next_timeout(Duration::ZERO).expect("binlog") {
        let binlog_format::Record::Transaction(tx) = rec else {
            continue;
        };
        for ev in &tx.events {
            if let binlog_format::Event::Row(r) = ev {
                *want
                    .entry((r.op_name().to_string(), r.cause.name().to_string()))
                    .or_default() += 1;
            }
        }
    }
    let mut got: HashMap<(String, String), usize> = HashMap::new();
    for e in &envelopes {
        let op = e["op"].as_str().expect("op").to_string();
        let cause = e["cause"].as_str().expect("cause").to_string();
        *got.entry((op, cause)).or_default() += 1;
    }
    assert_eq!(
        got, want,
        "change records by op and cause, against the binlog"
    );
    let count = |op: &str, cause: &str| {
        got.get(&(op.to_string(), cause.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // What the workload did shows up as the docs say: 60 inserts into rings of 3 over 6
    // prefixes (42 overwrites), the TTL purge as deletes, the prefix delete.
    assert_eq!(count("write", "overwrite"), 42, "overwrites are writes");
    assert!(count("delete", "ttl_purge") > 0, "TTL purges are deletes");
    assert_eq!(
        count("delete", "prefix_delete"),
        4,
        "the prefix delete: 3 rows and the meta row"
    );
    // Every delete is followed by its tombstone.
    let tombstones = all.iter().filter(|(v, _)| v.is_none()).count();
    assert_eq!(
        tombstones,
        envelopes.iter().filter(|e| e["op"] == "delete").count()
    );
    for (partition, records) in &by_partition {
        let mut last_seq: HashMap<String, u64> = HashMap::new();
        for (value, key) in records {
            // The key is the full primary key; the partition follows from its prefix.
            let user = key["user_id"].as_i64().expect("user_id in the key");
            assert!(key.get("ring_idx").is_some(), "{key}");
            let prefix_json = serde_json::json!({ "user_id": user }).to_string();
            assert_eq!(
                partition_for(prefix_json.as_bytes(), PARTITIONS),
                *partition
            );
            let Some(e) = value else { continue };
            assert_eq!(e["database"], "test");
            assert_eq!(e["table"], "user_events");
            assert_eq!(&e["key"], key);
            assert_eq!(e["source"]["server_id"], 1);
            // Per prefix, events arrive in sequence order.
            let seq = e["source"]["seq"].as_u64().expect("seq");
            let prev = last_seq.insert(user.to_string(), seq).unwrap_or(0);
            assert!(seq >= prev, "prefix {user}: seq {seq} after {prev}");
            if e["op"] == "write" {
                assert!(e["after"]["payload"].is_string() || e["after"]["payload"].is_null());
            }
        }
    }

    // The same topic through another client in another language, written from the docs.
    python_consumer_agrees(&settings.brokers, &topic);

    // And the table materialized from it by a consumer written from the docs alone equals
    // the primary's rows: meta rows, overwrites, the update, the deletes and the purge.
    assert_eq!(primary.last_seq(), last, "nothing written after the relay");
    let rows = table_rows_json(&primary, "test", "user_events");
    python_materializes(&settings.brokers, &topic, "ringrep", &rows, dir.path());
}

/// Runs `kafka_consumer.py` (confluent-kafka) on the change topic; CI installs it, elsewhere
/// the check is skipped with a message when Python or the package is missing.
fn python_consumer_agrees(brokers: &str, topic: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_consumer.py");
    if !python_usable("the confluent-kafka consumer") {
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--brokers", brokers, "--topic", topic])
        .args([
            "--prefix-columns",
            "user_id",
            "--database",
            "test",
            "--table",
            "user_events",
        ])
        .output()
        .expect("run the python consumer");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("\"write/overwrite\""), "{report}");
}

/// Whether python3 with confluent-kafka is there to run `what`. CI installs it and fails
/// without it; elsewhere `what` is skipped with a message.
fn python_usable(what: &str) -> bool {
    let usable = std::process::Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !usable {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install python3 with confluent-kafka (.ci/run)"
        );
        eprintln!("skipped {what}: python3 with confluent_kafka not found");
    }
    usable
}

/// Every stored row of `database.table` (the ring's meta rows included, and rows expired but
/// not yet purged: the change topic holds no delete for them yet), each as an object
/// column -> value as ringrep's envelope writes values.
fn table_rows_json(engine: &Engine, database: &str, table: &str) -> Json {
    engine.with_state(|st| {
        let t = st.table(database, table).expect("the table");
        let rows = t
            .iter()
            .map(|(_, row)| {
                assert_eq!(row.len(), t.def.columns.len(), "a row of every column");
                let obj = t
                    .def
                    .columns
                    .iter()
                    .zip(&row)
                    .map(|(c, v)| (c.name.clone(), value_json(v)))
                    .collect();
                Json::Object(obj)
            })
            .collect();
        Json::Array(rows)
    })
}

/// Runs `kafka_materialize.py` (confluent-kafka, written from docs/kafka.md alone) on the
/// change topic in `format`: the table it materializes must be `rows` exactly, with no
/// record seen twice. `dir` holds the file of expected rows. Skipped as
/// [`python_consumer_agrees`] is when Python or the package is missing.
fn python_materializes(
    brokers: &str,
    topic: &str,
    format: &str,
    rows: &Json,
    dir: &Path,
) -> Option<Json> {
    if !python_usable("the materializing consumer") {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_materialize.py");
    let expect = dir.join(format!("expect-{format}.json"));
    std::fs::write(&expect, rows.to_string()).expect("write the expected rows");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--brokers", brokers, "--topic", topic, "--format", format])
        .arg("--expect")
        .arg(&expect)
        .output()
        .expect("run the python consumer");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the table materialized from {topic} ({format}) is not the primary's: {report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Json = serde_json::from_str(&report).expect("the summary is JSON");
    assert_eq!(summary["duplicates"], 0, "{report}");
    assert_eq!(
        summary["rows"].as_u64(),
        rows.as_array().map(|r| r.len() as u64),
        "{report}"
    );
    eprintln!("{topic} ({format}) materialized: {report}");
    Some(summary)
}

/// A replica's Kafka source opened at any sequence number reads on from exactly that one,
/// whether the record sits at the start of a produce batch or inside one. (tansu 0.6.0 answers
/// a fetch from inside a batch with the next batch: a source that took the offset it probed
/// for the offset it asked for waited for a record that never came, "offset 1 did not arrive".)
#[test]
fn a_kafka_source_opens_at_any_seq_inside_a_produce_batch() {
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    use ringrep_applier::EventSource;
    let broker = broker::broker();
    let settings = broker.settings("batches", &[], 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let topic = ringrep_cdc::kafka::replication_topic(&settings.topic_prefix);
    rt.block_on(ringrep_kafka::ensure_topic(
        &settings,
        &topic,
        ringrep_kafka::TopicKind::Replication,
    ))
    .expect("topic");
    let producer: FutureProducer = settings
        .client_config()
        .set("linger.ms", "200")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    let tx = |seq: u64| binlog_format::Transaction {
        server_id: 1,
        seq,
        commit_time_us: 0,
        origin: None,
        events: vec![],
    };
    let send = |seqs: std::ops::RangeInclusive<u64>| {
        let futures: Vec<_> = seqs
            .map(|seq| {
                let rec =
                    ringrep_cdc::kafka::replication_record(&settings.topic_prefix, &tx(seq), 0)
                        .expect("record");
                let mut headers = rdkafka::message::OwnedHeaders::new();
                for (k, v) in &rec.headers {
                    headers = headers.insert(rdkafka::message::Header {
                        key: k,
                        value: Some(v.as_bytes()),
                    });
                }
                producer
                    .send_result(
                        FutureRecord::to(&rec.topic)
                            .partition(0)
                            .key(&rec.key[..])
                            .payload(&rec.value.clone().expect("value")[..])
                            .headers(headers),
                    )
                    .expect("queued")
            })
            .collect();
        rt.block_on(async {
            for f in futures {
                f.await.expect("delivered").expect("acknowledged");
            }
        });
    };
    // 60 records queued at once leave as one batch (or few); then three alone.
    send(1..=60);
    for seq in 61..=63 {
        send(seq..=seq);
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    for from in [1, 2, 30, 59, 60, 61, 63] {
        let k = settings.clone();
        let mut source = KafkaSource::open(&k, from).expect("open");
        let got = rt
            .block_on(source.next(Duration::from_secs(30)))
            .expect("next")
            .map(|t| t.tx.seq);
        assert_eq!(got, Some(from), "opened at seq {from}");
    }
    let mut past = KafkaSource::open(&settings, 64).expect("open past the end");
    let got = rt
        .block_on(past.next(Duration::from_secs(2)))
        .expect("next");
    assert!(
        got.is_none(),
        "nothing after the last record: {:?}",
        got.map(|t| t.tx.seq)
    );
}

/// `test.mat`: a ring of 4 per (k, tag) with a column of every kind of value the envelopes
/// write differently.
const MAT_TABLE: &str = "CREATE TABLE test.mat (k INT NOT NULL, tag VARCHAR(16) NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), v BIGINT, name VARCHAR(32), amount DECIMAL(10,2), day DATE, at DATETIME(6), ts TIMESTAMP(3), raw VARBINARY(16), doc JSON, score DOUBLE, ratio FLOAT, PRIMARY KEY (k, tag, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=4'";

/// The columns of `test.mat` before its ALTER, in the order [`mat_row`] gives their values.
const MAT_COLUMNS: &str = "k, tag, v, name, amount, day, at, ts, raw, doc, score, ratio";

/// The values of row `i` of `test.mat`, as SQL, in the order of [`MAT_COLUMNS`]: every kind
/// of value the envelopes write differently (DECIMAL, DATE, DATETIME, TIMESTAMP, bytes,
/// JSON, FLOAT, DOUBLE), some NULLs, seven prefixes whose text column is spelt three ways
/// that compare equal (one ring, one record key).
fn mat_row(i: u64) -> String {
    let name = if i.is_multiple_of(10) {
        "NULL".to_string()
    } else {
        format!("'Name-{i}'")
    };
    let tag = ["Alpha", "ALPHA", "Álpha"][(i % 3) as usize];
    format!(
        "{}, '{tag}', {}, {name}, '{}.{:02}', '2026-01-{:02}', '2026-02-03 04:05:06.{i:06}', '2026-03-04 05:06:07.{:03}', X'00ff{i:04x}', '{{\"i\": {i}, \"half\": {}.5, \"tags\": [\"a\", null]}}', {}, {}",
        i % 7,
        i * 1000 + 7,
        i,
        i % 100,
        1 + i % 28,
        i % 1000,
        i / 2,
        i as f64 / 8.0,
        i as f32 + 0.1,
    )
}

/// A table materialized from its change topic by a consumer written from the docs alone
/// (`kafka_materialize.py`, confluent-kafka) equals the primary's rows exactly, with no record
/// twice, after a relay stopped mid-stream and a new one resumed where the partitions left
/// off, across ring overwrites, an UPDATE, a prefix DELETE, rows of that prefix written again,
/// and an ALTER TABLE ... ADD COLUMN with rows after it; in ringrep's envelope, then in
/// Debezium's from a relay of the same binlog to a fresh prefix.
#[test]
fn a_consumer_materializes_tables_exactly_across_relay_restarts_and_ddl() {
    let broker = broker::broker();
    let settings = broker.settings("materialize", &["test.mat"], PARTITIONS);
    let topic = format!("{}.test.mat", settings.topic_prefix);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    let primary = Engine::open(&dir.path().join("primary"), cfg)
        .expect("open")
        .0;
    let mut s = SqlSession::new(&primary);
    s.execute(MAT_TABLE).expect("create");
    let insert = |s: &mut SqlSession, i: u64| {
        s.execute(&format!(
            "INSERT INTO test.mat ({MAT_COLUMNS}) VALUES ({})",
            mat_row(i)
        ))
        .expect("insert");
    };
    for i in 0..100 {
        insert(&mut s, i);
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let acked = |stats: &ringrep_relay::RelayStats| stats.acked_seq.load(Ordering::Acquire);

    // The first relay: stopped while the primary writes, with part of the stream relayed.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let first = Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier());
    let first_stats = first.stats.clone();
    let task = rt.spawn(first.run(stop_rx));
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked(&first_stats) < 10 {
        assert!(!task.is_finished(), "relay ended: {:?}", rt.block_on(task));
        assert!(
            Instant::now() < deadline,
            "the first relay acknowledged nothing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 100..150 {
        insert(&mut s, i);
        if i == 125 {
            let _ = stop_tx.send(true);
        }
    }
    let first_acked = rt.block_on(task).expect("join").expect("first relay");
    assert!(
        first_acked < primary.last_seq(),
        "stopped mid-stream: acknowledged {first_acked} of {}",
        primary.last_seq()
    );

    // While no relay runs: more rows, an update, a prefix deleted.
    for i in 150..180 {
        insert(&mut s, i);
    }
    s.execute("UPDATE test.mat SET name = 'changed', v = v + 1 WHERE k = 1")
        .expect("update");
    s.execute("DELETE FROM test.mat WHERE k = 2 AND tag = 'alpha'")
        .expect("prefix delete");

    // The second relay, on the same settings: it resumes where the partitions left off while
    // the primary writes on, through an ALTER TABLE and rows after it.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let second = Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier());
    let second_stats = second.stats.clone();
    let task = rt.spawn(second.run(stop_rx));
    for i in 180..200 {
        insert(&mut s, i);
    }
    s.execute("ALTER TABLE test.mat ADD COLUMN extra INT")
        .expect("alter");
    for i in 200..260u64 {
        let extra = if i.is_multiple_of(3) {
            "NULL".to_string()
        } else {
            format!("{}", i * 3)
        };
        s.execute(&format!(
            "INSERT INTO test.mat ({MAT_COLUMNS}, extra) VALUES ({}, {extra})",
            mat_row(i)
        ))
        .expect("insert");
    }
    // Updates logged as updates (with before images) rather than as writes.
    s.execute("SET ndb_log_update_as_write = OFF").expect("set");
    s.execute("UPDATE test.mat SET extra = -1, ratio = 2.5 WHERE k = 3")
        .expect("update after the alter");
    let last = primary.last_seq();
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked(&second_stats) < last {
        assert!(!task.is_finished(), "relay ended: {:?}", rt.block_on(task));
        assert!(
            Instant::now() < deadline,
            "the second relay acknowledged {} of {last}",
            acked(&second_stats)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stop_tx.send(true);
    assert_eq!(
        rt.block_on(task).expect("join").expect("second relay"),
        last
    );
    eprintln!(
        "first relay acknowledged seq {first_acked}; the second skipped {} records its partitions held and produced {} change records, up to seq {last}",
        second_stats.skipped.load(Ordering::Acquire),
        second_stats.change_records.load(Ordering::Acquire),
    );
    let seqs = replication_seqs(&settings).expect("read the replication topic");
    let want: Vec<(u32, u64)> = (1..=last).map(|seq| (1, seq)).collect();
    assert_eq!(
        seqs, want,
        "every transaction once on the replication topic"
    );

    assert_eq!(primary.last_seq(), last, "nothing written after the relay");
    let rows = table_rows_json(&primary, "test", "mat");
    // 7 prefixes, each a ring of 4 and its meta row; the prefix deleted written again.
    assert_eq!(rows.as_array().map(Vec::len), Some(35), "{rows}");
    python_materializes(&settings.brokers, &topic, "ringrep", &rows, dir.path());

    // The same binlog in Debezium's envelope, on a fresh prefix, read back to the same rows.
    let dbz = broker.settings("materialize-dbz", &["test.mat"], PARTITIONS);
    let dbz = ringrep_kafka::KafkaSettings {
        format: Format::Debezium { schemas: true },
        ..dbz
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let relay = Relay::new(dbz.clone(), &primary.binlog_dir(), primary.notifier());
    let stats = relay.stats.clone();
    let task = rt.spawn(relay.run(stop_rx));
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked(&stats) < last {
        assert!(!task.is_finished(), "relay ended: {:?}", rt.block_on(task));
        assert!(
            Instant::now() < deadline,
            "the Debezium relay acknowledged {} of {last}",
            acked(&stats)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stop_tx.send(true);
    assert_eq!(
        rt.block_on(task).expect("join").expect("debezium relay"),
        last
    );
    let topic = format!("{}.test.mat", dbz.topic_prefix);
    python_materializes(&dbz.brokers, &topic, "debezium", &rows, dir.path());
}

/// The relay's chunk reader for a primary in this process: [`Engine::table_chunk`], as
/// `ringrep-source serve` wires it.
fn chunks_of(engine: &Engine) -> ringrep_relay::ChunkFn {
    let engine = engine.clone();
    std::sync::Arc::new(move |req: &ringrep_relay::ChunkRequest| {
        let taken_us = engine.now_us();
        let c = engine
            .table_chunk(&req.database, &req.table, req.after.as_deref(), req.limit)
            .map_err(|e| e.to_string())?;
        Ok(c.map(|c| ringrep_relay::Chunk {
            seq: c.seq,
            taken_us,
            def: c.def,
            rows: c.rows,
            last_key: c.last_key,
        }))
    })
}

/// An incremental snapshot asked for by a row of the signal table sends two tables whole
/// (rows written before the relay's stream began: the binlog that held them was purged and the
/// relay started with `no_data`), a chunk at a time, while writers change those tables, across
/// a relay cut off in the middle of it and a new one that finishes it from its progress file.
/// A consumer written from the docs alone materializes each table equal to the primary's, no
/// record twice; the schema topic marks the start once and each table's end once, with the
/// number of `read` records its topic holds.
#[test]
fn an_incremental_snapshot_sends_tables_whole_while_writes_go_on_across_a_relay_restart() {
    let broker = broker::broker();
    let settings = ringrep_kafka::KafkaSettings {
        snapshot: ringrep_kafka::SnapshotMode::NoData,
        signal_table: Some(("test".into(), "signal".into())),
        incremental_chunk_rows: 64,
        ..broker.settings(
            "incremental",
            &["test.mat", "test.plain", "test.signal"],
            PARTITIONS,
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    let primary = Engine::open(&dir.path().join("primary"), cfg)
        .expect("open")
        .0;
    let mut s = SqlSession::new(&primary);
    for ddl in [
        MAT_TABLE,
        "CREATE TABLE test.plain (id INT PRIMARY KEY, v VARCHAR(32), n BIGINT)",
        "CREATE TABLE test.signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT)",
    ] {
        s.execute(ddl).expect("create");
    }
    for i in 0..100 {
        s.execute(&format!(
            "INSERT INTO test.mat ({MAT_COLUMNS}) VALUES ({})",
            mat_row(i)
        ))
        .expect("insert");
    }
    for chunk in 0..10 {
        let values: Vec<String> = (0..300)
            .map(|i| {
                let id = chunk * 300 + i;
                format!("({id}, 'before {id}', {})", id * 7)
            })
            .collect();
        s.execute(&format!(
            "INSERT INTO test.plain VALUES {}",
            values.join(",")
        ))
        .expect("insert");
    }
    // The binlog that holds those rows goes: only the snapshot can bring them.
    primary.flush_binary_logs().expect("flush");
    let segments = binlog_format::segment::list_segments(&primary.binlog_dir()).expect("list");
    let newest = *segments.last().expect("a segment");
    primary.purge_binlogs_to(newest, true).expect("purge");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let relay_dir = dir.path().join("relay");
    let relay = || {
        Relay::new(settings.clone(), &primary.binlog_dir(), primary.notifier())
            .with_chunks(chunks_of(&primary), &relay_dir)
    };
    // Writers change both tables all along: upserts, updates, deletes, ring overwrites.
    let stop_writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (engine, stop) = (primary.clone(), stop_writing.clone());
        std::thread::spawn(move || {
            let mut s = SqlSession::new(&engine);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let id = (i * 7919) % 3200;
                let sql = match i % 5 {
                    0 => format!("DELETE FROM test.plain WHERE id = {id}"),
                    1 => format!(
                        "UPDATE test.plain SET v = 'updated {i}', n = n + 1 WHERE id = {id}"
                    ),
                    2 => format!("REPLACE INTO test.plain VALUES ({id}, 'replaced {i}', {i})"),
                    _ => format!(
                        "INSERT INTO test.mat ({MAT_COLUMNS}) VALUES ({})",
                        mat_row(100 + i)
                    ),
                };
                s.execute(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                i += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            i
        })
    };

    // The first relay: the signal, then cut off in the middle of the snapshot.
    let first = relay();
    let stats = first.stats.clone();
    let (_stop1, stop_rx) = tokio::sync::watch::channel(false);
    let task = rt.spawn(first.run(stop_rx));
    s.execute(r#"INSERT INTO test.signal VALUES ('backfill-1', 'execute-snapshot', '{"data-collections": ["test.plain", "test.mat"], "type": "incremental"}')"#)
        .expect("signal");
    let deadline = Instant::now() + Duration::from_secs(120);
    while stats.incremental_rows.load(Ordering::Relaxed) < 1000 {
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "the snapshot did not get going: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    task.abort();
    let _ = rt.block_on(task);
    assert_eq!(
        stats.incremental_tables.load(Ordering::Relaxed),
        2,
        "cut off in the first table: {stats:?}"
    );
    assert!(relay_dir
        .join(format!("{}.incremental.json", settings.topic_prefix))
        .exists());

    // The second relay finishes it from the progress file while the writers go on.
    let second = relay();
    let stats = second.stats.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = rt.spawn(second.run(stop_rx));
    let deadline = Instant::now() + Duration::from_secs(180);
    while stats.incremental_tables.load(Ordering::Relaxed) > 0
        || stats.state() != ringrep_relay::RelayState::Running
    {
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "the snapshot did not finish: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop_writing.store(true, Ordering::Relaxed);
    let writes = writer.join().expect("writer");
    let last = primary.last_seq();
    while stats.acked_seq.load(Ordering::Acquire) < last {
        assert!(
            Instant::now() < deadline && !task.is_finished(),
            "the relay did not catch up: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stop_tx.send(true);
    rt.block_on(task).expect("join").expect("second relay");
    eprintln!("{writes} writes during the snapshot; relay stats {stats:?}");

    // The schema topic: one start, each table's end once, with its count of reads.
    let marks: Vec<Json> = broker::read_topic(
        &settings,
        &format!("{}.schema-changes", settings.topic_prefix),
    )
    .iter()
    .filter_map(|r| serde_json::from_slice::<Json>(r.value.as_deref()?).ok())
    .filter(|v| {
        v["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("incremental_snapshot"))
    })
    .collect();
    let kinds: Vec<&str> = marks.iter().filter_map(|m| m["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "incremental_snapshot_start",
            "incremental_snapshot_table_end",
            "incremental_snapshot_table_end"
        ],
        "{marks:?}"
    );
    assert_eq!(marks[0]["id"], "backfill-1");
    let reads_marked = |table: &str| {
        marks
            .iter()
            .find(|m| m["table"] == table)
            .and_then(|m| m["rows"].as_u64())
            .expect("a table's end")
    };
    for table in ["plain", "mat"] {
        let topic = format!("{}.test.{table}", settings.topic_prefix);
        let reads = broker::read_topic(&settings, &topic)
            .iter()
            .filter(|r| {
                r.value
                    .as_deref()
                    .and_then(|v| serde_json::from_slice::<Json>(v).ok())
                    .is_some_and(|v| v["cause"] == "incremental_snapshot")
            })
            .count() as u64;
        assert_eq!(
            reads,
            reads_marked(table),
            "{table}: read records against the mark"
        );
        let rows = table_rows_json(&primary, "test", table);
        if let Some(summary) =
            python_materializes(&settings.brokers, &topic, "ringrep", &rows, dir.path())
        {
            assert_eq!(summary["by_op"]["read"].as_u64(), Some(reads), "{summary}");
        }
    }
}
