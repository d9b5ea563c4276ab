//! libFuzzer target: `ringmq_fuzz::command_json` (see fuzz/src/lib.rs for the properties it asserts).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringmq_fuzz::command_json(data));
