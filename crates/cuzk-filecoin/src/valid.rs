//! Valid synthetic inputs: requests whose vanilla proofs filecoin-proofs accepts, made
//! in seconds at any sector size without sealing a sector, so that real proofs can be
//! made and verified at 32 and 64 GiB.
//!
//! A proof only opens a few hundred nodes of a sector. What its verifier derives the
//! challenges from is fixed first; every value a challenge opens is then computed from
//! it, and every value nothing opens is a seeded random filler:
//!
//! - **PoRep** (interactive, V1_1): the data is all zeros, as in a committed-capacity
//!   sector, so comm_d is the zero tree's root. The replica id comes from comm_d, the
//!   prover, sector and ticket; the challenges from the replica id and the seed. Each
//!   challenged node's label in each layer is computed from its parents' labels
//!   (layer by layer, nodes in ascending order, so a challenged parent's labels are the
//!   computed ones); a parent nothing challenges gets random labels. Trees C and R are
//!   sparse over the opened columns and replica leaves (the last layer's label: the
//!   data is zero), comm_r = H(comm_c, comm_r_last).
//! - **Window and Winning PoSt**: the challenges come from the randomness, the prover and
//!   the sector ids; each sector's tree R is sparse over its challenged leaves, its comm_c
//!   random, its comm_r = H(comm_c, comm_r_last).
//!
//! - **SnapDeals**: its challenges come from comm_r_new, the root of the whole new tree
//!   R, so that tree cannot be sparse; it is built whole, cheaply, from leaves that are
//!   equal where the encoding lets them be: the data nodes of each of the 2^h blocks
//!   rho is constant over share one random value d_b, every old replica node is one
//!   value o; the encoding makes new node i o + d_b·rho(b) for its block b. Trees D, R
//!   old and R new are then block trees (`sparse_tree::BlockTree`): 2^h · levels hashes
//!   at any size. What this leaves untested: sectors whose data or old replica vary
//!   within a block (the circuit's constraints do not depend on it), and at 32 and 64
//!   GiB apex leaves equal in pairs (a block spans two of their subtrees there).
//!
//! Memory is bounded by the opened nodes (a few MB at 64 GiB); no sector-sized array
//! exists.

use std::collections::{BTreeMap, BTreeSet};

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{FallbackPoStSectorProof, PartitionProof, SectorUpdateConfig, VanillaSealProof};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{self, generate_replica_id, Column, ColumnProof, EncodingProof, ReplicaColumnProof, TOTAL_PARENTS};
use storage_proofs_post::fallback::{self, SectorProof};
use storage_proofs_update::constants::{TreeDArity, TreeDDomain, TreeDHasher, TreeRHasher};
use storage_proofs_update::{phi, rho, ChallengeProof, Challenges, PublicParams as UpdatePublicParams};

use crate::error::FilecoinError;
use crate::ids::{porep_config, post_config, prover_id};
use crate::payload::domain_bytes;
use crate::registered::{PostProof, SealProof, SectorSize, UpdateProof};
use crate::request_files::RequestFiles;
use crate::shape_true::{fr32_bytes, labeling_proofs, porep_request, C1Values, DomainOf, TreeProof, MINER_ID};
use crate::sparse_tree::{arities, arities_of, BlockTree, SparseTree};

/// storage-proofs' label of `node` in `layer`: SHA-256 of the replica id, the layer (u32)
/// and node (u64) big-endian, zeros to 64 bytes, then the parents' labels; the top two
/// bits cleared so that it is a field element.
fn label<D: Domain>(replica_id: &D, layer: usize, node: u64, parents: &[D]) -> Result<D, FilecoinError> {
    let mut head = [0u8; 64];
    head[..32].copy_from_slice(replica_id.as_ref());
    head[32..36].copy_from_slice(&(layer as u32).to_be_bytes());
    head[36..44].copy_from_slice(&node.to_be_bytes());
    let mut h = Sha256::new();
    h.update(head);
    for p in parents {
        h.update(p.as_ref());
    }
    let mut bytes: [u8; 32] = h.finalize().into();
    bytes[31] &= 0x3f;
    D::try_from_bytes(&bytes).map_err(FilecoinError::rejected("a label"))
}

/// The zero tree D of `nodes` leaves (a committed-capacity sector's data), sparse over
/// `opened`: every node of a level is the hash of two of the level below.
fn zero_tree_d(nodes: usize, opened: &BTreeSet<usize>) -> Result<SparseTree<TreeDHasher>, FilecoinError> {
    let zeros: Vec<TreeDDomain> = std::iter::successors(Some(TreeDDomain::default()), |z| Some(<TreeDHasher as Hasher>::Function::hash2(z, z)))
        .take(nodes.ilog2() as usize + 1)
        .collect();
    let leaves = opened.iter().map(|&i| (i, zeros[0])).collect();
    SparseTree::new(arities(nodes, 2, 0, 0)?, leaves, |level| zeros[level])
}

/// PoRep C1 output for sector 1 of a committed-capacity (zero data) sector, V1_1.
pub(crate) fn porep<Tree: 'static + MerkleTreeTrait>(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let proof = SealProof::v1_1(size);
    let cfg = porep_config(proof)?;
    let params = filecoin_proofs::parameters::public_params::<Tree>(&cfg).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    let (graph, layers) = (&params.graph, params.num_layers);
    let nodes = graph.size();
    let sector_number = 1;
    let (ticket, seed) = (fr32_bytes(rng), fr32_bytes(rng));

    // The challenges, from comm_d (zero data), the replica id and the seed.
    let comm_d = zero_tree_d(nodes, &BTreeSet::from([0]))?.root();
    let replica_id: DomainOf<Tree> = generate_replica_id::<Tree::Hasher, _>(&prover_id(MINER_ID), sector_number, &ticket, comm_d, &cfg.porep_id);
    let inputs = stacked::PublicInputs::<DomainOf<Tree>, TreeDDomain> { replica_id, tau: None, k: None, seed: Some(seed) };
    let challenges: Vec<Vec<usize>> = (0..usize::from(cfg.partitions)).map(|k| inputs.challenges(&params.challenges, nodes, Some(k))).collect();
    let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();

    // Every opened column: the challenged nodes' labels computed, their parents' drawn.
    let base_degree = graph.base_graph().degree();
    let mut parents: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for &c in &challenged {
        let mut p = vec![0u32; graph.degree()];
        graph.parents(c, &mut p).map_err(FilecoinError::rejected("the graph's parents"))?;
        parents.insert(c, p);
    }
    let mut columns: BTreeMap<usize, Vec<DomainOf<Tree>>> = challenged.iter().map(|&c| (c, Vec::with_capacity(layers))).collect();
    for p in parents.values().flatten().map(|&p| p as usize) {
        if !challenged.contains(&p) {
            columns.entry(p).or_insert_with(|| (0..layers).map(|_| DomainOf::<Tree>::random(rng)).collect());
        }
    }
    for layer in 1..=layers {
        for (&c, ps) in &parents {
            // A label's parents: the DRG parents in this layer (all before c, so a
            // challenged one is labelled already), then past the first layer the
            // expander parents in the layer before, repeated to TOTAL_PARENTS.
            let row = |p: u32, l: usize| {
                columns.get(&(p as usize)).and_then(|col| col.get(l - 1)).copied().ok_or_else(|| {
                    FilecoinError::invalid(format!("node {c}'s parent {p} has no label in layer {l} yet (a DRG parent after its child?)"))
                })
            };
            let mut ls = ps[..base_degree].iter().map(|&p| row(p, layer)).collect::<Result<Vec<_>, _>>()?;
            if layer > 1 {
                for &p in &ps[base_degree..] {
                    ls.push(row(p, layer - 1)?);
                }
            }
            let all: Vec<_> = ls.iter().copied().cycle().take(TOTAL_PARENTS).collect();
            let l = label(&replica_id, layer, c as u64, &all)?;
            columns.get_mut(&c).ok_or_else(|| FilecoinError::invalid("a challenged column is missing"))?.push(l);
        }
    }

    // Tree C over the columns' hashes, tree R over the replica leaves (label + zero data).
    let arities_c = arities_of::<Tree>(nodes)?;
    let column_of = |n: usize| -> Result<Column<Tree::Hasher>, FilecoinError> {
        Column::new(n as u32, columns[&n].clone()).map_err(FilecoinError::rejected("a column"))
    };
    let leaves_c = columns.keys().map(|&n| Ok((n, column_of(n)?.hash().into()))).collect::<Result<_, FilecoinError>>()?;
    let tree_c = SparseTree::<Tree::Hasher>::new(arities_c.clone(), leaves_c, |_| DomainOf::<Tree>::random(rng))?;
    let leaves_r = challenged.iter().map(|&c| (c, columns[&c][layers - 1])).collect();
    let tree_r = SparseTree::<Tree::Hasher>::new(arities_c, leaves_r, |_| DomainOf::<Tree>::random(rng))?;
    let tree_d = zero_tree_d(nodes, &challenged)?;
    let (comm_c, comm_r_last) = (tree_c.root(), tree_r.root());
    let comm_r = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last);

    let tree_proof = |t: &SparseTree<Tree::Hasher>, n: usize| -> Result<TreeProof<Tree>, FilecoinError> {
        Ok(MerkleProof::from_parts(t.leaf(n)?, t.root(), t.path(n)?))
    };
    let column_proof = |n: u32| -> Result<ColumnProof<TreeProof<Tree>>, FilecoinError> {
        ColumnProof::from_column(column_of(n as usize)?, tree_proof(&tree_c, n as usize)?).map_err(FilecoinError::rejected("a column proof"))
    };
    let mut partitions = Vec::with_capacity(challenges.len());
    for ks in &challenges {
        let mut proofs: Vec<VanillaSealProof<Tree>> = Vec::with_capacity(ks.len());
        for &c in ks {
            let ps = &parents[&c];
            let drg_parents = ps[..base_degree].iter().map(|&p| column_proof(p)).collect::<Result<Vec<_>, _>>()?;
            let exp_parents = ps[base_degree..].iter().map(|&p| column_proof(p)).collect::<Result<Vec<_>, _>>()?;
            let (labeling_proofs, key_parents) = labeling_proofs(c as u64, layers, &drg_parents, &exp_parents)?;
            proofs.push(stacked::Proof {
                comm_d_proofs: MerkleProof::<TreeDHasher, TreeDArity>::from_parts(tree_d.leaf(c)?, comm_d, tree_d.path(c)?),
                comm_r_last_proof: tree_proof(&tree_r, c)?,
                replica_column_proofs: ReplicaColumnProof { c_x: column_proof(c as u32)?, drg_parents, exp_parents },
                labeling_proofs,
                encoding_proof: EncodingProof::new(layers as u32, c as u64, key_parents),
            });
        }
        partitions.push(proofs);
    }
    let values = C1Values { comm_r: domain_bytes(&comm_r), comm_d: domain_bytes(&comm_d), replica_id, seed, ticket };
    porep_request(proof, sector_number, &partitions, values)
}

/// WindowPoSt (one full partition: every sector the size's partition holds, numbered
/// from 1) or WinningPoSt (sector 1).
pub(crate) fn post<Tree: 'static + MerkleTreeTrait>(proof: PostProof, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    post_partition::<Tree>(proof, 0, rng)
}

/// A valid WindowPoSt request for partition `partition` of a deadline whose partitions
/// are full (sectors numbered from 1 across them; this one's are the last): under API
/// V1_0 a challenge depends on the sector's index in the whole deadline, so the
/// challenges are drawn for all of them. Partition 0: [`post`].
pub fn window_post_partition(proof: PostProof, partition: usize, seed: u64) -> Result<RequestFiles, FilecoinError> {
    if !proof.window {
        return Err(FilecoinError::invalid("a WinningPoSt has one partition"));
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    crate::registered::with_shape!(proof.size, post_partition, proof, partition, &mut rng)
}

fn post_partition<Tree: 'static + MerkleTreeTrait>(proof: PostProof, partition: usize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let cfg = post_config(proof);
    let sectors = if proof.window { cfg.sector_count } else { 1 };
    let randomness = fr32_bytes(rng);
    let all: Vec<SectorId> = (1..=((partition + 1) * sectors) as u64).map(SectorId::from).collect();
    let challenges = filecoin_proofs::generate_fallback_sector_challenges::<Tree>(&cfg, &randomness, &all, prover_id(MINER_ID))
        .map_err(FilecoinError::rejected("the PoSt challenges"))?;
    let ids = all[partition * sectors..].to_vec();
    let leaves = (proof.size.bytes() / 32) as usize;
    let arities = arities_of::<Tree>(leaves)?;
    let mut vanilla = Vec::with_capacity(sectors);
    for id in ids {
        let opened = challenges.get(&id).ok_or_else(|| FilecoinError::invalid(format!("no challenges for sector {}", u64::from(id))))?;
        let tree_leaves = opened.iter().map(|&c| (c as usize, DomainOf::<Tree>::random(rng))).collect();
        let tree_r = SparseTree::<Tree::Hasher>::new(arities.clone(), tree_leaves, |_| DomainOf::<Tree>::random(rng))?;
        let inclusion_proofs = opened
            .iter()
            .map(|&c| Ok(MerkleProof::from_parts(tree_r.leaf(c as usize)?, tree_r.root(), tree_r.path(c as usize)?)))
            .collect::<Result<Vec<TreeProof<Tree>>, FilecoinError>>()?;
        let (comm_c, comm_r_last) = (DomainOf::<Tree>::random(rng), tree_r.root());
        let sector = FallbackPoStSectorProof::<Tree> {
            sector_id: id,
            comm_r: <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last),
            vanilla_proof: fallback::Proof { sectors: vec![SectorProof { inclusion_proofs, comm_c, comm_r_last }] },
        };
        vanilla.push(bincode::serialize(&sector).map_err(|e| FilecoinError::invalid(format!("encoding sector {}: {e}", u64::from(id))))?);
    }
    let mut files = RequestFiles::post(proof, vanilla, randomness, MINER_ID)?;
    files.request.partition_index = partition as u32;
    Ok(files)
}

/// A SnapDeals update of a sector whose data nodes are all d and old replica nodes all
/// o (see the module's notes): trees D, R old and R new built whole as block trees, one
/// partition proof per partition of the size's update.
pub(crate) fn snap<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    rng: &mut ChaCha20Rng,
) -> Result<RequestFiles, FilecoinError> {
    let proof = UpdateProof::from_registered(size as u64)?;
    let update = SectorUpdateConfig::from_porep_config(&porep_config(SealProof::v1_1(size))?);
    let pp = UpdatePublicParams::from_sector_size(size.bytes());
    let nodes = pp.sector_nodes;
    let hash2 = <<TreeRHasher as Hasher>::Function as HashFunction<_>>::hash2;
    // One data value per block of 2^shift nodes (fr32: the top two bits clear, as
    // padded data is), one old replica value everywhere: new node i is then
    // o + d_b·rho(b) for its block b = i >> shift, so every tree has 2^h blocks.
    let shift = pp.challenge_bit_len - update.h;
    let data = (0..nodes >> shift)
        .map(|_| TreeDDomain::try_from_bytes(&fr32_bytes(rng)).map_err(FilecoinError::rejected("a data value")))
        .collect::<Result<Vec<_>, _>>()?;
    let (o, comm_c) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
    let tree_d = BlockTree::<TreeDHasher>::new(arities(nodes, 2, 0, 0)?, 1 << shift, data.clone())?;
    let tree_r_old = BlockTree::<TreeRHasher>::new(arities_of::<Tree>(nodes)?, nodes, vec![o])?;
    let (comm_d_new, comm_r_old) = (tree_d.root(), hash2(&comm_c, &tree_r_old.root()));
    let phi = phi(&comm_d_new, &comm_r_old);
    let o_fr: Fr = o.into();
    let encoded = data.iter().enumerate().map(|(high, &d)| (o_fr + Fr::from(d) * rho(&phi, high as u32)).into()).collect();
    let tree_r_new = BlockTree::<TreeRHasher>::new(arities_of::<Tree>(nodes)?, 1 << shift, encoded)?;
    let comm_r_new = hash2(&comm_c, &tree_r_new.root());

    // A partition's apex leaves: tree D's nodes, at the apex height, under its subtree.
    let apex_height = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let mut vanilla = Vec::with_capacity(usize::from(update.update_partitions));
    for k in 0..usize::from(update.update_partitions) {
        let apex_leafs = (k * pp.apex_leaf_count..(k + 1) * pp.apex_leaf_count).map(|j| tree_d.node(apex_height, j)).collect();
        let challenge_proofs = Challenges::new(nodes, comm_r_new, k)
            .take(pp.challenge_count)
            .map(|c| {
                let c = c as usize;
                ChallengeProof::<Tree> {
                    proof_r_old: MerkleProof::from_parts(tree_r_old.node(0, c), tree_r_old.root(), tree_r_old.path(c)),
                    proof_d_new: MerkleProof::<TreeDHasher, TreeDArity>::from_parts(tree_d.node(0, c), comm_d_new, tree_d.path(c)),
                    proof_r_new: MerkleProof::from_parts(tree_r_new.node(0, c), tree_r_new.root(), tree_r_new.path(c)),
                }
            })
            .collect();
        let p = PartitionProof::<Tree> { comm_c, apex_leafs, challenge_proofs };
        vanilla.push(bincode::serialize(&p).map_err(|e| FilecoinError::invalid(format!("encoding partition proof {k}: {e}")))?);
    }
    Ok(RequestFiles::snap(proof, vanilla, [domain_bytes(&comm_r_old), domain_bytes(&comm_r_new), domain_bytes(&comm_d_new)]))
}
