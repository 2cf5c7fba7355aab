//! Identities: the prover id of a miner, and the parameter file names of a circuit.

use std::path::{Path, PathBuf};

use filecoin_proofs::{PoRepConfig, PoStConfig, PoStType, WINDOW_POST_CHALLENGE_COUNT, WINNING_POST_CHALLENGE_COUNT, WINNING_POST_SECTOR_COUNT};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{CacheableParameters, VERSION};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicParams as UpdatePublicParams};

use crate::error::FilecoinError;
use crate::registered::{with_shape, Circuit, CircuitKind, PostProof, SealProof, SectorSize};

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

fn post_cache_id<Tree: 'static + MerkleTreeTrait>(cfg: &PoStConfig) -> anyhow::Result<String> {
    cfg.get_cache_identifier::<Tree>()
}

fn porep_cache_id<Tree: 'static + MerkleTreeTrait>(cfg: &PoRepConfig) -> anyhow::Result<String> {
    cfg.get_cache_identifier::<Tree>()
}

fn update_cache_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(size: SectorSize) -> anyhow::Result<String> {
    let pp = UpdatePublicParams::from_sector_size(size.bytes());
    Ok(<EmptySectorUpdateCompound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, UpdatePublicParams>>::cache_identifier(&pp))
}

impl Circuit {
    /// storage-proofs' cache id, "<prefix>-<sha256 of the public parameters>": the
    /// same for every registered proof of this kind and size (porep ids, API versions
    /// and features do not enter it).
    pub fn cache_id(self) -> Result<String, FilecoinError> {
        let r = match self.kind {
            CircuitKind::WindowPost | CircuitKind::WinningPost => {
                let cfg = post_config(PostProof { window: self.kind == CircuitKind::WindowPost, size: self.size, api_version: ApiVersion::V1_2_0 });
                with_shape!(self.size, post_cache_id, &cfg)
            }
            CircuitKind::Porep => {
                // V1_1 (registered 5-9): the cache id does not depend on it.
                let proof = SealProof::v1_1(self.size);
                with_shape!(self.size, porep_cache_id, &porep_config(proof)?)
            }
            CircuitKind::Snap => with_shape!(self.size, update_cache_id, self.size),
        };
        r.map_err(FilecoinError::rejected(format!("cache id of {self}")))
    }

    /// The file name stem in a Filecoin parameter directory: "v28-<cache id>".
    pub fn file_stem(self) -> Result<String, FilecoinError> {
        Ok(format!("v{VERSION}-{}", self.cache_id()?))
    }

    /// `<dir>/<stem>.params`.
    pub fn params_path(self, dir: &Path) -> Result<PathBuf, FilecoinError> {
        Ok(dir.join(format!("{}.params", self.file_stem()?)))
    }

    /// `<dir>/<stem>.vk`.
    pub fn vk_path(self, dir: &Path) -> Result<PathBuf, FilecoinError> {
        Ok(dir.join(format!("{}.vk", self.file_stem()?)))
    }
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

    /// The names of the published parameter files (their hashes as storage-proofs'
    /// parameters.json lists them).
    #[test]
    fn file_names_match_the_published_parameters() {
        let cases = [
            ("porep-2k", "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec"),
            ("porep-32g", "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-82a357d2f2ca81dc"),
            ("porep-64g", "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-2-sha256_hasher-96f1b4a04c5c51e4"),
            ("snap-2k", "v28-empty-sector-update-merkletree-poseidon_hasher-8-0-0-fb9e095bebdd7751"),
            ("snap-32g", "v28-empty-sector-update-merkletree-poseidon_hasher-8-8-0-3b7f44a9362e3985"),
            ("wpost-2k", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-0170db1f394b35d9"),
            ("wpost-32g", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-0377ded656c6f524"),
            ("winning-2k", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-3ea05428c9d11689"),
            ("winning-64g", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-2-b62098629d07946e"),
        ];
        for (id, prefix) in cases {
            let stem = Circuit::from_id(id).unwrap().file_stem().unwrap();
            assert!(stem.starts_with(prefix), "{id}: {stem} does not start with {prefix}");
            assert_eq!(stem.len(), prefix.len() - 16 + 64, "{id}: {stem}");
        }
    }
}
