//! The SQL front end never panics: statements from the spec's examples, mutated at random
//! (cut short, characters replaced or inserted, words swapped), are run against an engine.
//! Any error is fine; a panic fails the test. (The cargo-fuzz target in fuzz/ does the same
//! with coverage guidance on a nightly toolchain.)

use proptest::prelude::*;
use ringrep_engine::{Engine, EngineConfig};
use ringrep_sql::SqlSession;

fn seeds() -> Vec<String> {
    let text = include_str!("../../../integration/suite/spec_examples.result");
    ringrep_sql::split_statements(
        &text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .into_iter()
    .filter(|s| s.len() < 400)
    .collect()
}

const NOISE: &[&str] = &[
    "(",
    ")",
    ",",
    "'",
    "\"",
    "`",
    "@",
    "?",
    ";",
    "NULL",
    "0",
    "-1",
    "99999999999999999999",
    "SELECT",
    "WHERE",
    "ring_idx",
    "ring_meta",
    " ",
    "\\",
    "%",
    "IN (",
    "=",
    "AND",
    "OR",
    "x'FF'",
    "1e400",
    "DATE_SUB(NOW(), INTERVAL 1 DAY)",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn mutated_statements_never_panic(picks in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..40)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = EngineConfig::new(1);
        cfg.sync = binlog_format::SyncPolicy::Never;
        let (engine, _) = Engine::open(dir.path(), cfg).expect("engine");
        let mut s = SqlSession::new(&engine);
        let seeds = seeds();
        for (which, how, at, noise) in picks {
            let mut stmt: Vec<char> = seeds[which.index(seeds.len())].chars().collect();
            let pos = at.index(stmt.len().max(1));
            let word = NOISE[noise.index(NOISE.len())];
            match how {
                0 => stmt.truncate(pos),
                1 => stmt.splice(pos..pos, word.chars()).for_each(drop),
                2 if !stmt.is_empty() => {
                    let end = (pos + word.len()).min(stmt.len());
                    stmt.splice(pos..end, word.chars()).for_each(drop);
                }
                _ => {}
            }
            let text: String = stmt.into_iter().collect();
            let _ = s.execute(&text);
        }
    }
}
