//! PoSt's vanilla proof checks (see `crate::vanilla_check` for what every kind's must
//! be).

use filecoin_proofs::FallbackPoStSectorProof;
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::error::FilecoinError;
use crate::sparse_tree::arities_of;
use crate::vanilla_check::{merkle_proof, values};

/// A PoSt sector proof's commitments and inclusion proofs.
pub(crate) fn post_sector<Tree: MerkleTreeTrait>(p: &FallbackPoStSectorProof<Tree>, leaves: usize, i: usize) -> Result<(), FilecoinError> {
    let tree = arities_of::<Tree>(leaves)?;
    let at = |part: &str| format!("vanilla_proofs[{i}] (sector {}): {part}", u64::from(p.sector_id));
    values([&p.comm_r], || at("comm_r"))?;
    for s in &p.vanilla_proof.sectors {
        values([&s.comm_c, &s.comm_r_last], || at("comm_c or comm_r_last"))?;
        for (j, ip) in s.inclusion_proofs.iter().enumerate() {
            merkle_proof(ip, &tree, || at(&format!("inclusion proof {j}")))?;
        }
    }
    Ok(())
}
