#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| frognano_fuzzing::token_batch(data));
