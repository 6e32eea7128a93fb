//! The engine against the reference model of rings (`ringrep-model`), with operations decoded
//! from the fuzzer's bytes: every ring and meta row compared after each operation, then the
//! binlog replayed and the engine reopened. Any difference is a crash, named.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ops = ringrep_model::ops_from_bytes(data);
    if let Err(e) = ringrep_model::run(ops) {
        panic!("the engine and the model differ: {e}");
    }
});
