//! Identities and configs: the prover id of a miner, and filecoin-proofs' configs and
//! public parameters of a proof type (the parameter file names: `crate::kinds`).

use filecoin_proofs::{PoRepConfig, PoStConfig, PoStType, WINDOW_POST_CHALLENGE_COUNT, WINNING_POST_CHALLENGE_COUNT, WINNING_POST_SECTOR_COUNT};
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::error::FilecoinError;
use crate::registered::{PostProof, SealProof, SectorSize};

/// The prover id of miner `miner_id` (f0…): the id as unsigned LEB128 in a zeroed
/// 32-byte array, as Lotus and Curio form it.
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (mut v, mut i) = (miner_id, 0);
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            return out;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

/// How many sectors one WindowPoSt partition proves (filecoin-proofs' table).
pub fn window_post_sector_count(size: SectorSize) -> usize {
    let table = filecoin_proofs::WINDOW_POST_SECTOR_COUNT.read().unwrap_or_else(|e| e.into_inner());
    // filecoin-proofs' table has every published size.
    table.get(&size.bytes()).copied().unwrap_or(1)
}

/// filecoin-proofs' config for a PoSt proof type.
pub fn post_config(proof: PostProof) -> PoStConfig {
    let (challenge_count, sector_count, typ) = if proof.window {
        (WINDOW_POST_CHALLENGE_COUNT, window_post_sector_count(proof.size), PoStType::Window)
    } else {
        (WINNING_POST_CHALLENGE_COUNT, WINNING_POST_SECTOR_COUNT, PoStType::Winning)
    };
    PoStConfig {
        sector_size: filecoin_proofs::SectorSize(proof.size.bytes()),
        challenge_count,
        sector_count,
        typ,
        priority: false,
        api_version: proof.api_version,
    }
}

/// filecoin-proofs' config for a seal proof type (interactive PoRep: 1 partition up
/// to 512 MiB, 10 at 32 and 64 GiB).
pub fn porep_config(proof: SealProof) -> Result<PoRepConfig, FilecoinError> {
    match proof.feature {
        Some(f) => PoRepConfig::new_groth16_with_features(proof.size.bytes(), proof.porep_id(), proof.api_version, vec![f])
            .map_err(FilecoinError::rejected(format!("the config of {}", proof.api_name()))),
        None => Ok(PoRepConfig::new_groth16(proof.size.bytes(), proof.porep_id(), proof.api_version)),
    }
}

/// storage-proofs' public parameters of a PoSt proof type (WinningPoSt swaps the
/// counts: 66 single-challenge "sectors").
pub fn post_public_params<Tree: 'static + MerkleTreeTrait>(cfg: &PoStConfig) -> Result<storage_proofs_post::fallback::PublicParams, FilecoinError> {
    let r = match cfg.typ {
        PoStType::Window => filecoin_proofs::parameters::window_post_public_params::<Tree>(cfg),
        PoStType::Winning => filecoin_proofs::parameters::winning_post_public_params::<Tree>(cfg),
    };
    r.map_err(FilecoinError::rejected("PoSt public parameters"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prover_ids_are_leb128() {
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0]);
        let max = prover_id(u64::MAX);
        assert_eq!(max[..10], [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(max[10..].iter().all(|&b| b == 0));
    }
}
