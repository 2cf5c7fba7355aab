//! The compiled path at 8 MiB, the largest size a development machine seals: for every
//! Filecoin kind and every partition, the witness-only synthesis and the compiled
//! matrices' products equal full synthesis's inputs, aux, a, b, c and densities (as
//! tests/compiled_2k.rs at 2 KiB), and partition 0's proof from each path is the same,
//! byte for byte with r = s = 0 (proven on the CPU).
//!
//! Ignored in CI: making the 8 MiB fixtures takes minutes (tens on two cores), most of
//! it the parameter setups; they are cached as tests/filecoin_8m in cuzk-server uses
//! them: `cargo test --release -p cuzk-filecoin --test compiled_8m -- --ignored`.

mod common;

use cuzk_filecoin::fixtures::fixtures_8m;

#[test]
#[ignore = "makes the 8 MiB fixtures (minutes; tens on two cores)"]
fn every_kind_at_8mib_compiles_to_the_products_of_full_synthesis() {
    let f = fixtures_8m().unwrap_or_else(|e| panic!("8 MiB fixtures: {e}"));
    common::every_kind_compiles_to_the_products_of_full_synthesis(f);
}
