//! Shape-true inputs: requests with exactly the structure filecoin-proofs deserializes
//! and its circuits consume at a sector size (tree depths and arities, challenges per
//! partition, layers, DRG and expander parents, partitions, sectors per WindowPoSt
//! partition), filled with seeded random values, so that real sizes can be timed
//! without sealing a sector.
//!
//! The structure comes from filecoin-proofs' own configs and public parameters, never
//! from constants here. Values are random where a sealed sector would have hashes;
//! what the request's own consistency checks read is made consistent (the replica id
//! from the miner, sector, ticket and comm_d; roots shared within a proof as
//! storage-proofs requires; comm_r from comm_c and the tree R root), and challenged
//! positions are the real challenges of the request's seed. Their vanilla proofs do not
//! verify: a request of such inputs is refused unless its checks are
//! [`InputChecks::TimingOnly`](crate::InputChecks).

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{FallbackPoStSectorProof, PartitionProof, SectorUpdateConfig, VanillaSealProof};
use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{
    self, generate_replica_id, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, TOTAL_PARENTS,
};
use storage_proofs_post::fallback::{self, SectorProof};
use storage_proofs_update::constants::{TreeDArity, TreeDDomain, TreeDHasher, TreeRHasher};
use storage_proofs_update::{phi, rho, ChallengeProof, Challenges, PublicParams as UpdatePublicParams};

use crate::error::FilecoinError;
use crate::ids::{porep_config, post_config, prover_id};
use crate::payload::domain_bytes;
use crate::registered::{PostProof, SealProof, SectorSize, UpdateProof};
use crate::request_files::RequestFiles;

/// The miner every shape-true request is for.
pub const MINER_ID: u64 = 1000;

pub(crate) type DomainOf<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
pub(crate) type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// 32 random bytes that are a canonical field element (the top two bits cleared), as
/// tickets, seeds and randomness are.
pub(crate) fn fr32_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

fn random_domains<D: Domain>(n: usize, rng: &mut impl RngCore) -> Vec<D> {
    (0..n).map(|_| D::random(rng)).collect()
}

/// An inclusion proof of leaf `index` among `leaves` in a tree of arities (A, B, C),
/// B and C 0 where the tree has no sub or top level, as storage-proofs lays one out:
/// A − 1 siblings per base level (digits of `index` from the lowest), then one sub
/// level with B − 1 and one top level with C − 1; `root` and `leaf` as given, the
/// siblings random except the highest levels', which are `top` (proofs of leaves
/// under one subtree share them).
fn random_inclusion_proof<H: Hasher, A, B, C>(
    leaves: usize,
    index: usize,
    root: H::Domain,
    leaf: H::Domain,
    top: &[Vec<H::Domain>],
    rng: &mut impl RngCore,
) -> Result<MerkleProof<H, A, B, C>, FilecoinError>
where
    A: filecoin_hashers::PoseidonArity,
    B: filecoin_hashers::PoseidonArity,
    C: filecoin_hashers::PoseidonArity,
{
    let (a, b, c) = (A::to_usize(), B::to_usize(), C::to_usize());
    let base_leaves = leaves / b.max(1) / c.max(1);
    let levels = base_leaves.checked_ilog(a).unwrap_or(0) as usize;
    if index >= leaves || a.checked_pow(levels as u32) != Some(base_leaves) || base_leaves * b.max(1) * c.max(1) != leaves {
        return Err(FilecoinError::invalid(format!("no tree of arities ({a}, {b}, {c}) has {leaves} leaves with leaf {index}")));
    }
    let arities: Vec<usize> = std::iter::repeat(a).take(levels).chain([b, c].into_iter().filter(|&n| n > 0)).collect();
    let shared_from = arities.len().checked_sub(top.len()).ok_or_else(|| FilecoinError::invalid("more shared levels than the tree has"))?;
    let mut path = Vec::with_capacity(arities.len());
    let mut rest = index;
    for (level, &arity) in arities.iter().enumerate() {
        let siblings = match level.checked_sub(shared_from) {
            Some(i) if top[i].len() == arity - 1 => top[i].clone(),
            Some(_) => return Err(FilecoinError::invalid(format!("shared siblings at level {level} do not fit arity {arity}"))),
            None => random_domains(arity - 1, rng),
        };
        path.push((siblings, rest % arity));
        rest /= arity;
    }
    Ok(MerkleProof::from_parts(leaf, root, path))
}

/// An inclusion proof in a tree of `Tree`'s shape; a random leaf where `leaf` is None.
fn tree_proof<Tree: MerkleTreeTrait>(
    leaves: usize,
    index: usize,
    root: DomainOf<Tree>,
    leaf: Option<DomainOf<Tree>>,
    rng: &mut impl RngCore,
) -> Result<TreeProof<Tree>, FilecoinError> {
    let leaf = leaf.unwrap_or_else(|| DomainOf::<Tree>::random(rng));
    random_inclusion_proof::<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(leaves, index, root, leaf, &[], rng)
}

/// PoRep C1 output: the seal proof type V1_1 of the size (what Curio seals), sector 1.
pub(crate) fn porep<Tree: 'static + MerkleTreeTrait>(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let proof = SealProof::v1_1(size);
    let cfg = porep_config(proof)?;
    let params = filecoin_proofs::parameters::public_params::<Tree>(&cfg).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    let graph = &params.graph;
    let nodes = graph.size();
    let sector_number = 1;
    let prover = prover_id(MINER_ID);
    let (ticket, seed) = (fr32_bytes(rng), fr32_bytes(rng));
    let comm_d = domain_bytes(&TreeDDomain::random(rng));
    let (comm_c, comm_r_last) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
    let comm_r = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last);
    let replica_id: DomainOf<Tree> = generate_replica_id::<Tree::Hasher, _>(&prover, sector_number, &ticket, comm_d, &cfg.porep_id);
    let comm_d_domain = TreeDDomain::try_from_bytes(&comm_d).map_err(FilecoinError::rejected("comm_d"))?;
    let inputs = stacked::PublicInputs::<DomainOf<Tree>, TreeDDomain> {
        replica_id,
        tau: Some(stacked::Tau { comm_d: comm_d_domain, comm_r }),
        k: None,
        seed: Some(seed),
    };
    let base_degree = graph.base_graph().degree();
    let mut parents = vec![0u32; graph.degree()];
    let mut partitions = Vec::with_capacity(usize::from(cfg.partitions));
    for k in 0..usize::from(cfg.partitions) {
        let mut proofs: Vec<VanillaSealProof<Tree>> = Vec::new();
        for challenge in inputs.challenges(&params.challenges, nodes, Some(k)) {
            graph.parents(challenge, &mut parents).map_err(FilecoinError::rejected("the graph's parents"))?;
            let column = |node: u32, rng: &mut ChaCha20Rng| -> Result<ColumnProof<TreeProof<Tree>>, FilecoinError> {
                let rows = random_domains(params.num_layers, rng);
                let proof = tree_proof::<Tree>(nodes, node as usize, comm_c, None, rng)?;
                let col = Column::new(node, rows).map_err(FilecoinError::rejected("a column"))?;
                ColumnProof::from_column(col, proof).map_err(FilecoinError::rejected("a column proof"))
            };
            let c_x = column(challenge as u32, rng)?;
            let drg_parents = parents[..base_degree].iter().map(|&p| column(p, rng)).collect::<Result<Vec<_>, _>>()?;
            let exp_parents = parents[base_degree..].iter().map(|&p| column(p, rng)).collect::<Result<Vec<_>, _>>()?;
            let (labeling_proofs, key_parents) = labeling_proofs(challenge as u64, params.num_layers, &drg_parents, &exp_parents)?;
            let encoding_proof = EncodingProof::new(params.num_layers as u32, challenge as u64, key_parents);
            let comm_d_leaf = TreeDDomain::random(rng);
            proofs.push(stacked::Proof {
                comm_d_proofs: random_inclusion_proof::<TreeDHasher, TreeDArity, _, _>(nodes, challenge, comm_d_domain, comm_d_leaf, &[], rng)?,
                comm_r_last_proof: tree_proof::<Tree>(nodes, challenge, comm_r_last, None, rng)?,
                replica_column_proofs: ReplicaColumnProof { c_x, drg_parents, exp_parents },
                labeling_proofs,
                encoding_proof,
            });
        }
        partitions.push(proofs);
    }
    porep_request(proof, sector_number, &partitions, C1Values { comm_r: domain_bytes(&comm_r), comm_d, replica_id, seed, ticket })
}

/// The public values of a C1 output beside its vanilla proofs.
pub(crate) struct C1Values<D> {
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub replica_id: D,
    pub seed: [u8; 32],
    pub ticket: [u8; 32],
}

/// A PoRep C2 request of miner [`MINER_ID`]: the C1 output (filecoin-proofs-api's JSON)
/// of `partitions`' vanilla proofs, in Curio's envelope.
pub(crate) fn porep_request<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    sector_number: u64,
    partitions: &[Vec<VanillaSealProof<Tree>>],
    v: C1Values<DomainOf<Tree>>,
) -> Result<RequestFiles, FilecoinError> {
    let c1 = serde_json::json!({
        "registered_proof": proof.api_name(),
        "vanilla_proofs": { format!("StackedDrg{}V1", proof.size.api_name()): partitions },
        "comm_r": v.comm_r,
        "comm_d": v.comm_d,
        "replica_id": v.replica_id,
        "seed": v.seed,
        "ticket": v.ticket,
    });
    let c1 = serde_json::to_vec(&c1).map_err(|e| FilecoinError::invalid(format!("encoding the C1 output: {e}")))?;
    RequestFiles::porep(proof, sector_number, MINER_ID, c1)
}

/// The labeling proof of each layer, with the parents storage-proofs' prover lists:
/// the DRG parents' labels in this layer, then (past the first layer) the expander
/// parents' labels in the layer before, repeated up to `TOTAL_PARENTS`. Also the last
/// layer's parents, which the encoding proof repeats.
#[allow(clippy::type_complexity)]
pub(crate) fn labeling_proofs<P: MerkleProofTrait>(
    node: u64,
    layers: usize,
    drg: &[ColumnProof<P>],
    exp: &[ColumnProof<P>],
) -> Result<(Vec<LabelingProof<P::Hasher>>, Vec<DomainOfProof<P>>), FilecoinError> {
    let row = |c: &ColumnProof<P>, layer: usize| c.get_node_at_layer(layer).copied().map_err(FilecoinError::rejected("a column row"));
    let mut proofs = Vec::with_capacity(layers);
    let mut parents = Vec::new();
    for layer in 1..=layers {
        let mut labels = drg.iter().map(|c| row(c, layer)).collect::<Result<Vec<_>, _>>()?;
        if layer > 1 {
            for c in exp {
                labels.push(row(c, layer - 1)?);
            }
        }
        parents = labels.iter().copied().cycle().take(TOTAL_PARENTS).collect();
        proofs.push(LabelingProof::new(layer as u32, node, parents.clone()));
    }
    Ok((proofs, parents))
}

pub(crate) type DomainOfProof<P> = <<P as MerkleProofTrait>::Hasher as Hasher>::Domain;

/// SnapDeals: one partition proof per partition of the size's update, with comm_r_old
/// and comm_r_new made from the same comm_c as a real update's are, and each new
/// replica leaf the encoding of its old leaf and data leaf, and the tree D paths of a
/// partition's challenges sharing the levels above the partition's subtree (the
/// circuit asserts both while it synthesizes).
pub(crate) fn snap<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    rng: &mut ChaCha20Rng,
) -> Result<RequestFiles, FilecoinError> {
    let proof = UpdateProof::from_registered(size as u64)?;
    let cfg = porep_config(SealProof::v1_1(size))?;
    let update = SectorUpdateConfig::from_porep_config(&cfg);
    let pp = UpdatePublicParams::from_sector_size(size.bytes());
    let hash2 = <<TreeRHasher as Hasher>::Function as HashFunction<_>>::hash2;
    let (comm_c, root_r_old, root_r_new) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
    let (comm_r_old, comm_r_new) = (hash2(&comm_c, &root_r_old), hash2(&comm_c, &root_r_new));
    let comm_d_new = TreeDDomain::random(rng);
    let phi = phi(&comm_d_new, &comm_r_old);
    let high_bits_shift = pp.challenge_bit_len - update.h;
    let mut vanilla = Vec::with_capacity(usize::from(update.update_partitions));
    for k in 0..usize::from(update.update_partitions) {
        let partition_path: Vec<Vec<TreeDDomain>> = (0..pp.partition_bit_len).map(|_| vec![TreeDDomain::random(rng)]).collect();
        let mut challenge_proofs = Vec::with_capacity(pp.challenge_count);
        for c in Challenges::new(pp.sector_nodes, comm_r_new, k).take(pp.challenge_count) {
            let (leaf_r_old, leaf_d_new) = (DomainOf::<Tree>::random(rng), TreeDDomain::random(rng));
            let (old, data): (Fr, Fr) = (leaf_r_old.into(), leaf_d_new.into());
            let leaf_r_new = (old + data * rho(&phi, c >> high_bits_shift)).into();
            let c = c as usize;
            challenge_proofs.push(ChallengeProof::<Tree> {
                proof_r_old: tree_proof::<Tree>(pp.sector_nodes, c, root_r_old, Some(leaf_r_old), rng)?,
                proof_d_new: random_inclusion_proof::<TreeDHasher, TreeDArity, _, _>(
                    pp.sector_nodes,
                    c,
                    comm_d_new,
                    leaf_d_new,
                    &partition_path,
                    rng,
                )?,
                proof_r_new: tree_proof::<Tree>(pp.sector_nodes, c, root_r_new, Some(leaf_r_new), rng)?,
            });
        }
        let p = PartitionProof::<Tree> { comm_c, apex_leafs: random_domains(pp.apex_leaf_count, rng), challenge_proofs };
        vanilla.push(bincode::serialize(&p).map_err(|e| FilecoinError::invalid(format!("encoding partition proof {k}: {e}")))?);
    }
    Ok(RequestFiles::snap(proof, vanilla, [domain_bytes(&comm_r_old), domain_bytes(&comm_r_new), domain_bytes(&comm_d_new)]))
}

/// WindowPoSt (one full partition: every sector the size's partition holds) or
/// WinningPoSt (one sector), sectors numbered from 1.
pub(crate) fn post<Tree: 'static + MerkleTreeTrait>(proof: PostProof, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let cfg = post_config(proof);
    let sectors = if proof.window { cfg.sector_count } else { 1 };
    let per_sector = if proof.window { cfg.challenge_count } else { cfg.challenge_count * cfg.sector_count };
    let randomness = fr32_bytes(rng);
    let ids: Vec<SectorId> = (1..=sectors as u64).map(SectorId::from).collect();
    let challenges = filecoin_proofs::generate_fallback_sector_challenges::<Tree>(&cfg, &randomness, &ids, prover_id(MINER_ID))
        .map_err(FilecoinError::rejected("the PoSt challenges"))?;
    let leaves = (proof.size.bytes() / 32) as usize;
    let hash2 = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2;
    let mut vanilla = Vec::with_capacity(sectors);
    for id in ids {
        let leaf_challenges = challenges.get(&id).ok_or_else(|| FilecoinError::invalid(format!("no challenges for sector {}", u64::from(id))))?;
        if leaf_challenges.len() != per_sector {
            return Err(FilecoinError::invalid(format!("{} challenges for sector {}, expected {per_sector}", leaf_challenges.len(), u64::from(id))));
        }
        let (comm_c, comm_r_last) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
        let inclusion_proofs =
            leaf_challenges.iter().map(|&c| tree_proof::<Tree>(leaves, c as usize, comm_r_last, None, rng)).collect::<Result<Vec<_>, _>>()?;
        let sector = FallbackPoStSectorProof::<Tree> {
            sector_id: id,
            comm_r: hash2(&comm_c, &comm_r_last),
            vanilla_proof: fallback::Proof { sectors: vec![SectorProof { inclusion_proofs, comm_c, comm_r_last }] },
        };
        vanilla.push(bincode::serialize(&sector).map_err(|e| FilecoinError::invalid(format!("encoding sector {}: {e}", u64::from(id))))?);
    }
    RequestFiles::post(proof, vanilla, randomness, MINER_ID)
}
