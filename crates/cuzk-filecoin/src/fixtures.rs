//! Test fixtures at 2 KiB and 8 MiB (the sizes a test machine can seal): sectors
//! sealed by filecoin-proofs, the vanilla proofs Curio would send for them, and
//! parameter files made by cuzk's setup under the names filecoin-proofs reads.
//!
//! Making them takes a few seconds to minutes on two cores, so they are kept outside
//! the source tree (`CUZK_FIXTURES_DIR`, else the user's cache directory) in a folder
//! named by a digest of the recipe, with a manifest of every file's SHA-256: a folder
//! whose files do not match it is made again.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cuzk_groth16::format::{read_params, PointCheck};
use cuzk_groth16::generator::{CpuFixedBase, ToxicWaste};
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{CpuBackend, NoProgress, ProofRandomness, ProvingBackend};
use filecoin_proofs::{
    add_piece, encode_into, generate_fallback_sector_challenges, generate_partition_proofs, generate_piece_commitment, generate_single_vanilla_proof,
    generate_winning_post_sector_challenge, seal_commit_phase1, seal_pre_commit_phase1, seal_pre_commit_phase2, PieceInfo, PrivateReplicaInfo,
    PublicReplicaInfo, SealPreCommitOutput, SectorShapeBase, SectorUpdateConfig, UnpaddedBytesAmount,
};
use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::sector::SectorId;

use crate::ids::{porep_config, post_config, prover_id};
use crate::registered::{Circuit, CircuitKind, PostProof, SealProof, SectorSize, UpdateProof};
use crate::request::FilecoinRequest;
use crate::request_files::{hex, RequestFiles};
use crate::setup;
use crate::{FilecoinError, FilecoinJob};

/// 2 KiB and 8 MiB sectors share one tree shape.
type Tree = SectorShapeBase;

/// Bump when what the fixtures hold or how they are made changes. (The 2 KiB recipe
/// keeps its words so that caches made before 8 MiB existed stay valid.)
fn recipe(size: SectorSize) -> String {
    let s = size.short();
    let head = match size {
        SectorSize::S2KiB => "cuzk-filecoin 2 KiB fixtures, format 3".to_string(),
        _ => format!("cuzk-filecoin {size} fixtures, format 1"),
    };
    format!(
        "{head}: filecoin-proofs 19.1.0, sectors 1 and 2 of miner 1000 (V1_1 seal, seed 7), C1 of sector 1 in Curio's \
         envelope, WindowPoSt V1_2 (registered {}) over both, WinningPoSt (registered {}), sector 2 updated with new \
         data (SnapDeals vanilla proofs), parameters for wpost-{s}, winning-{s}, porep-{s} and snap-{s} from setup seed 11",
        10 + size as u64,
        size as u64
    )
}

/// Fixtures before 8 MiB existed had no size field: they are 2 KiB.
fn two_kib() -> u64 {
    SectorSize::S2KiB.bytes()
}

pub const MINER_ID: u64 = 1000;

/// A PoSt request's payload, as Curio would send it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PostFixture {
    #[serde(default = "two_kib")]
    pub sector_size: u64,
    pub registered_proof: u64,
    pub miner_id: u64,
    pub randomness: [u8; 32],
    pub sector_ids: Vec<u64>,
    pub comm_rs: Vec<[u8; 32]>,
    /// bincode `FallbackPoStSectorProof`s, in sector order.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

impl PostFixture {
    /// The request, of the PoSt kind its registered proof names (a type that is no
    /// PoSt's is the decoder's to refuse, naming it).
    pub fn request(&self) -> FilecoinRequest {
        let kind = match PostProof::from_registered(self.registered_proof) {
            Ok(PostProof { window: false, .. }) => CircuitKind::WinningPost,
            _ => CircuitKind::WindowPost,
        };
        FilecoinRequest {
            registered_proof: self.registered_proof,
            sector_size: self.sector_size,
            vanilla_proofs: self.vanilla_proofs.clone(),
            randomness: self.randomness.to_vec(),
            miner_id: self.miner_id,
            partition_index: 0,
            ..FilecoinRequest::new(kind)
        }
    }
}

impl PostFixture {
    /// Whether filecoin-proofs' own verifier (`verify_window_post` /
    /// `verify_winning_post`) accepts `proof` for this fixture's sectors and miner, with
    /// `randomness` and `comm_rs` given (the fixture's, or altered ones to check that
    /// the proof is then rejected). An error counts as a rejection.
    pub fn filecoin_proofs_accepts(&self, proof: &[u8], randomness: &[u8; 32], comm_rs: &[[u8; 32]]) -> bool {
        let Ok(kind) = PostProof::from_registered(self.registered_proof) else {
            return false;
        };
        let cfg = post_config(kind);
        let prover = prover_id(self.miner_id);
        let replicas: anyhow::Result<Vec<(SectorId, PublicReplicaInfo)>> =
            self.sector_ids.iter().zip(comm_rs).map(|(&id, c)| Ok((SectorId::from(id), PublicReplicaInfo::new(*c)?))).collect();
        let Ok(replicas) = replicas else { return false };
        let r = if kind.window {
            let map: BTreeMap<_, _> = replicas.into_iter().collect();
            filecoin_proofs::verify_window_post::<Tree>(&cfg, randomness, &map, prover, proof)
        } else {
            filecoin_proofs::verify_winning_post::<Tree>(&cfg, randomness, &replicas, prover, proof)
        };
        r.unwrap_or(false)
    }
}

/// A PoRep C2 request's payload, as Curio would send it, and the public values
/// `verify_seal` takes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PorepFixture {
    #[serde(default = "two_kib")]
    pub sector_size: u64,
    pub registered_proof: u64,
    pub miner_id: u64,
    pub sector_number: u64,
    /// `{"SectorNum", "Phase1Out" (base64 of the C1 JSON), "SectorSize"}`.
    pub envelope: Vec<u8>,
    /// The C1 JSON (filecoin-proofs-api's shape) alone.
    pub c1: Vec<u8>,
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
}

impl PorepFixture {
    pub fn request(&self) -> FilecoinRequest {
        FilecoinRequest {
            vanilla_proof: self.envelope.clone(),
            registered_proof: self.registered_proof,
            sector_size: self.sector_size,
            sector_number: self.sector_number,
            miner_id: self.miner_id,
            ..FilecoinRequest::new(CircuitKind::Porep)
        }
    }

    /// Whether filecoin-proofs' `verify_seal` accepts `proof` for this sector, with
    /// `comm_r` and `seed` given (the fixture's, or altered ones). An error counts as a
    /// rejection.
    pub fn filecoin_proofs_accepts(&self, proof: &[u8], comm_r: [u8; 32], seed: [u8; 32]) -> bool {
        let Ok(cfg) = SealProof::from_registered(self.registered_proof).and_then(porep_config) else {
            return false;
        };
        let sector = SectorId::from(self.sector_number);
        filecoin_proofs::verify_seal::<Tree>(&cfg, comm_r, self.comm_d, prover_id(self.miner_id), sector, self.ticket, seed, proof).unwrap_or(false)
    }
}

/// A SnapDeals request's payload, as Curio would send it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapFixture {
    #[serde(default = "two_kib")]
    pub sector_size: u64,
    pub registered_proof: u64,
    /// bincode `PartitionProof`s, in partition order.
    pub vanilla_proofs: Vec<Vec<u8>>,
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
}

impl SnapFixture {
    pub fn request(&self) -> FilecoinRequest {
        FilecoinRequest {
            registered_proof: self.registered_proof,
            sector_size: self.sector_size,
            vanilla_proofs: self.vanilla_proofs.clone(),
            comm_r_old: self.comm_r_old.to_vec(),
            comm_r_new: self.comm_r_new.to_vec(),
            comm_d_new: self.comm_d_new.to_vec(),
            ..FilecoinRequest::new(CircuitKind::Snap)
        }
    }

    /// Whether filecoin-proofs' `verify_empty_sector_update_proof` accepts `proof` with
    /// the given new commitments (the fixture's, or altered ones). An error counts as
    /// a rejection.
    pub fn filecoin_proofs_accepts(&self, proof: &[u8], comm_r_new: [u8; 32], comm_d_new: [u8; 32]) -> bool {
        let Ok(cfg) = UpdateProof::from_registered(self.registered_proof).and_then(|u| porep_config(SealProof::v1_1(u.size))) else {
            return false;
        };
        filecoin_proofs::verify_empty_sector_update_proof::<Tree>(&cfg, proof, self.comm_r_old, comm_r_new, comm_d_new).unwrap_or(false)
    }
}

/// Everything the 2 KiB tests need; filecoin-proofs' parameter directory is set to
/// `param_dir` for the whole process.
#[derive(Debug)]
pub struct Fixtures {
    pub root: PathBuf,
    pub param_dir: PathBuf,
    pub window: PostFixture,
    pub winning: PostFixture,
    pub porep: PorepFixture,
    pub snap: SnapFixture,
}

/// Proves every partition of `job` on the CPU with the parameters in `param_dir`:
/// each partition's circuit inputs must be the job's public inputs (storage-proofs'
/// computation) and its proof must verify with cuzk's verifier. Returns the
/// assembled proof.
pub fn prove_on_cpu(job: &dyn FilecoinJob, param_dir: &Path, seed: u64) -> Result<Vec<u8>, String> {
    let path = job.circuit().params_path(param_dir).map_err(|e| e.to_string())?;
    let params = read_params(&path, PointCheck::OnCurve).map_err(|e| e.to_string())?;
    let pvk = PreparedVerifyingKey::new(&params.vk);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let mut bytes = Vec::new();
    for k in 0..job.partitions() {
        let buffers = EvalBuffers { a: Box::new(Vec::new()), b: Box::new(Vec::new()), c: Box::new(Vec::new()) };
        let mut circuit = job.synthesize(k, buffers).map_err(|e| e.to_string())?;
        let inputs = job.public_inputs(k).map_err(|e| e.to_string())?;
        if circuit.input.get(1..) != Some(&inputs[..]) {
            return Err(format!("partition {k}: the circuit's inputs are not storage-proofs' public inputs"));
        }
        let out =
            CpuBackend::new().prove(&params, std::slice::from_mut(&mut circuit), &[ProofRandomness::random(&mut rng)]).map_err(|e| e.to_string())?;
        if !verify_proof(&pvk, &out.proofs[0], &inputs).map_err(|e| e.to_string())? {
            return Err(format!("partition {k}: the proof does not verify with cuzk's verifier"));
        }
        bytes.extend_from_slice(&out.proofs[0].to_bytes());
    }
    Ok(bytes)
}

/// The error message of a request that must be refused; `Err` if it was accepted, or
/// if filecoin-proofs panicked on it (caught, but its checks should have come first).
pub fn refusal(decoded: Result<Box<dyn FilecoinJob>, FilecoinError>) -> Result<String, String> {
    match decoded {
        Ok(job) => Err(format!("{} was accepted", job.describe())),
        Err(e @ FilecoinError::Panicked { .. }) => Err(format!("a panic inside filecoin-proofs: {e}")),
        Err(e) => Ok(e.to_string()),
    }
}

/// The 2 KiB fixtures, made on first use in this process (or read from the cache).
/// filecoin-proofs' parameter directory is set once per process: a process uses the
/// fixtures of one size only.
pub fn fixtures_2k() -> Result<&'static Fixtures, String> {
    static FIXTURES: OnceLock<Result<Fixtures, String>> = OnceLock::new();
    FIXTURES.get_or_init(|| load_or_make(SectorSize::S2KiB)).as_ref().map_err(|e| e.clone())
}

/// The 8 MiB fixtures (a few minutes to make on two cores, most of it the 2^22 PoRep
/// setup), as [`fixtures_2k`].
pub fn fixtures_8m() -> Result<&'static Fixtures, String> {
    static FIXTURES: OnceLock<Result<Fixtures, String>> = OnceLock::new();
    FIXTURES.get_or_init(|| load_or_make(SectorSize::S8MiB)).as_ref().map_err(|e| e.clone())
}

fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("CUZK_FIXTURES_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("cuzk/fixtures");
    }
    if let Some(d) = std::env::var_os("HOME") {
        return PathBuf::from(d).join(".cache/cuzk/fixtures");
    }
    std::env::temp_dir().join("cuzk-fixtures")
}

fn load_or_make(size: SectorSize) -> Result<Fixtures, String> {
    let root = cache_root();
    let dir = root.join(format!("{}-{}", size.short(), &hex(&Sha256::digest(recipe(size).as_bytes()))[..16]));
    let param_dir = dir.join("params");
    // filecoin-proofs reads its settings once: the parameter directory (read by its
    // verifiers) and the SDR parent cache (written while sealing) are set first.
    std::env::set_var("FIL_PROOFS_PARENT_CACHE", root.join("filecoin-parents"));
    crate::env::use_parameter_dir(&param_dir).map_err(|e| e.to_string())?;
    match check_manifest(&dir) {
        Ok(()) => eprintln!("fixtures: using {}", dir.display()),
        Err(why) => {
            eprintln!("fixtures: making {} ({why}); this takes a while", dir.display());
            make(size, &root, &dir)?;
            check_manifest(&dir).map_err(|e| format!("fixtures just made in {} do not check: {e}", dir.display()))?;
        }
    }
    fn read<T: serde::de::DeserializeOwned>(dir: &Path, name: &str) -> Result<T, String> {
        let path = dir.join(name);
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
    Ok(Fixtures {
        window: read(&dir, "window.json")?,
        winning: read(&dir, "winning.json")?,
        porep: read(&dir, "porep.json")?,
        snap: read(&dir, "snap.json")?,
        root: dir,
        param_dir,
    })
}

const MANIFEST: &str = "MANIFEST.sha256";

fn files_under(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            files_under(&p, base, out)?;
        } else if p.file_name().is_some_and(|n| n != MANIFEST) {
            out.push(p.strip_prefix(base).map(Path::to_path_buf).unwrap_or(p));
        }
    }
    Ok(())
}

fn digest_file(path: &Path) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut f = fs::File::open(path)?;
    std::io::copy(&mut f, &mut h)?;
    Ok(hex(&h.finalize()))
}

fn write_manifest(dir: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    files_under(dir, dir, &mut files).map_err(|e| e.to_string())?;
    files.sort();
    let mut text = String::new();
    for f in files {
        text += &format!("{}  {}\n", digest_file(&dir.join(&f)).map_err(|e| e.to_string())?, f.display());
    }
    fs::write(dir.join(MANIFEST), text).map_err(|e| e.to_string())
}

fn check_manifest(dir: &Path) -> Result<(), String> {
    let text = fs::read_to_string(dir.join(MANIFEST)).map_err(|_| "no manifest".to_string())?;
    let mut listed = 0;
    for line in text.lines() {
        let (want, name) = line.split_once("  ").ok_or("malformed manifest")?;
        let got = digest_file(&dir.join(name)).map_err(|e| format!("{name}: {e}"))?;
        if got != want {
            return Err(format!("{name} does not match its digest"));
        }
        listed += 1;
    }
    let mut files = Vec::new();
    files_under(dir, dir, &mut files).map_err(|e| e.to_string())?;
    if files.len() != listed {
        return Err(format!("{} files, the manifest lists {listed}", files.len()));
    }
    Ok(())
}

struct Sealed {
    id: u64,
    comm_r: [u8; 32],
    replica: PrivateReplicaInfo<Tree>,
    /// What C1 needs besides the replica.
    pre_commit: SealPreCommitOutput,
    piece: PieceInfo,
    ticket: [u8; 32],
    sealed: PathBuf,
    cache: PathBuf,
}

/// The V1_1 seal proof of `size`, which every fixture of that size is sealed with.
fn seal_proof(size: SectorSize) -> Result<SealProof, FilecoinError> {
    Ok(SealProof::v1_1(size))
}

fn seal(size: SectorSize, work: &Path, id: u64, rng: &mut impl RngCore) -> anyhow::Result<Sealed> {
    let cfg = porep_config(seal_proof(size)?)?;
    let n: UnpaddedBytesAmount = cfg.unpadded_bytes_amount();
    let mut data = vec![0u8; u64::from(n) as usize];
    rng.fill_bytes(&mut data);
    let piece = generate_piece_commitment(&data[..], n)?;
    let staged = work.join(format!("staged-{id}"));
    let mut staged_file = fs::File::create(&staged)?;
    add_piece(&data[..], &mut staged_file, n, &[])?;
    staged_file.flush()?;
    staged_file.rewind()?;
    let sealed = work.join(format!("sealed-{id}"));
    fs::File::create(&sealed)?;
    let cache = work.join(format!("cache-{id}"));
    fs::create_dir_all(&cache)?;
    let mut ticket = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    ticket[31] &= 0x3f;
    let pc1 = seal_pre_commit_phase1::<_, _, _, Tree>(
        &cfg,
        &cache,
        &staged,
        &sealed,
        prover_id(MINER_ID),
        SectorId::from(id),
        ticket,
        std::slice::from_ref(&piece),
    )?;
    let pc = seal_pre_commit_phase2(&cfg, pc1, &cache, &sealed)?;
    let replica = PrivateReplicaInfo::<Tree>::new(sealed.clone(), pc.comm_r, cache.clone())?;
    Ok(Sealed { id, comm_r: pc.comm_r, replica, pre_commit: pc, piece, ticket, sealed, cache })
}

/// New data written into a sealed sector (an update of its replica) and the update's
/// vanilla proofs.
fn snap_fixture(size: SectorSize, work: &Path, s: &Sealed, rng: &mut impl RngCore) -> anyhow::Result<SnapFixture> {
    let cfg = porep_config(seal_proof(size)?)?;
    let update = SectorUpdateConfig::from_porep_config(&cfg);
    let n: UnpaddedBytesAmount = cfg.unpadded_bytes_amount();
    let mut data = vec![0u8; u64::from(n) as usize];
    rng.fill_bytes(&mut data);
    let piece = generate_piece_commitment(&data[..], n)?;
    let staged = work.join(format!("new-staged-{}", s.id));
    let mut staged_file = fs::File::create(&staged)?;
    add_piece(&data[..], &mut staged_file, n, &[])?;
    staged_file.flush()?;
    let new_replica = work.join(format!("new-sealed-{}", s.id));
    fs::File::create(&new_replica)?.set_len(fs::metadata(&s.sealed)?.len())?;
    let new_cache = work.join(format!("new-cache-{}", s.id));
    fs::create_dir_all(&new_cache)?;
    let enc = encode_into::<Tree>(&update, &new_replica, &new_cache, &s.sealed, &s.cache, &staged, &[piece])?;
    let parts = generate_partition_proofs::<Tree>(update, s.comm_r, enc.comm_r_new, enc.comm_d_new, &s.sealed, &s.cache, &new_replica, &new_cache)?;
    Ok(SnapFixture {
        sector_size: size.bytes(),
        registered_proof: size as u64,
        vanilla_proofs: parts.iter().map(bincode::serialize).collect::<Result<_, _>>()?,
        comm_r_old: s.comm_r,
        comm_r_new: enc.comm_r_new,
        comm_d_new: enc.comm_d_new,
    })
}

/// C1 of a sealed sector and Curio's envelope around it.
fn porep_fixture(size: SectorSize, s: &Sealed, rng: &mut impl RngCore) -> anyhow::Result<PorepFixture> {
    let proof = seal_proof(size)?;
    let cfg = porep_config(proof)?;
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    let c1 = seal_commit_phase1::<_, Tree>(
        &cfg,
        &s.cache,
        &s.sealed,
        prover_id(MINER_ID),
        SectorId::from(s.id),
        s.ticket,
        seed,
        s.pre_commit.clone(),
        std::slice::from_ref(&s.piece),
    )?;
    // filecoin-proofs-api's shape: the registered proof by name, the vanilla proofs
    // under a tag naming the size only.
    let api = serde_json::json!({
        "registered_proof": proof.api_name(),
        "vanilla_proofs": { format!("StackedDrg{}V1", size.api_name()): c1.vanilla_proofs },
        "comm_r": c1.comm_r,
        "comm_d": c1.comm_d,
        "replica_id": c1.replica_id,
        "seed": c1.seed,
        "ticket": c1.ticket,
    });
    let request = RequestFiles::porep(proof, s.id, MINER_ID, serde_json::to_vec(&api)?)?;
    Ok(PorepFixture {
        sector_size: size.bytes(),
        registered_proof: proof.id,
        miner_id: MINER_ID,
        sector_number: s.id,
        envelope: request.request.vanilla_proof,
        c1: request.c1,
        comm_r: c1.comm_r,
        comm_d: c1.comm_d,
        ticket: c1.ticket,
        seed,
    })
}

fn post_fixture(registered_proof: u64, randomness: [u8; 32], sectors: &[&Sealed]) -> anyhow::Result<PostFixture> {
    let proof = PostProof::from_registered(registered_proof).map_err(|e| anyhow::anyhow!("{e}"))?;
    let cfg = post_config(proof);
    let ids: Vec<SectorId> = sectors.iter().map(|s| SectorId::from(s.id)).collect();
    let challenges = generate_fallback_sector_challenges::<Tree>(&cfg, &randomness, &ids, prover_id(MINER_ID))?;
    let mut vanilla_proofs = Vec::new();
    for s in sectors {
        let id = SectorId::from(s.id);
        let ch = challenges.get(&id).ok_or_else(|| anyhow::anyhow!("no challenges for sector {}", s.id))?;
        let p = generate_single_vanilla_proof::<Tree>(&cfg, id, &s.replica, ch)?;
        vanilla_proofs.push(bincode::serialize(&p)?);
    }
    Ok(PostFixture {
        sector_size: proof.size.bytes(),
        registered_proof,
        miner_id: MINER_ID,
        randomness,
        sector_ids: sectors.iter().map(|s| s.id).collect(),
        comm_rs: sectors.iter().map(|s| s.comm_r).collect(),
        vanilla_proofs,
    })
}

fn make(size: SectorSize, root: &Path, dir: &Path) -> Result<(), String> {
    fn step(what: &'static str) -> impl Fn(anyhow::Error) -> String {
        move |e| format!("making fixtures: {what}: {e:#}")
    }
    fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let tmp = tempfile::Builder::new().prefix(".making-").tempdir_in(root).map_err(|e| e.to_string())?;
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);

    let s1 = seal(size, work.path(), 1, &mut rng).map_err(step("sealing sector 1"))?;
    let s2 = seal(size, work.path(), 2, &mut rng).map_err(step("sealing sector 2"))?;
    let mut randomness = [0u8; 32];
    rng.fill_bytes(&mut randomness);
    randomness[31] &= 0x3f;
    let window = post_fixture(10 + size as u64, randomness, &[&s1, &s2]).map_err(step("WindowPoSt vanilla proofs"))?;
    // WinningPoSt: the sector the randomness elects among the two.
    let winning_cfg = post_config(PostProof { window: false, size, api_version: ApiVersion::V1_0_0 });
    let elected = generate_winning_post_sector_challenge::<Tree>(&winning_cfg, &randomness, 2, prover_id(MINER_ID))
        .map_err(step("WinningPoSt sector challenge"))?;
    let chosen = if elected.first().copied().unwrap_or(0) == 0 { &s1 } else { &s2 };
    let winning = post_fixture(size as u64, randomness, &[chosen]).map_err(step("WinningPoSt vanilla proof"))?;
    let porep = porep_fixture(size, &s1, &mut rng).map_err(step("C1 of sector 1"))?;
    let snap = snap_fixture(size, work.path(), &s2, &mut rng).map_err(step("the update of sector 2"))?;

    let params = tmp.path().join("params");
    let mut prng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    for kind in [CircuitKind::WindowPost, CircuitKind::WinningPost, CircuitKind::Porep, CircuitKind::Snap] {
        let circuit = Circuit { kind, size };
        let t = std::time::Instant::now();
        let ps = setup::generate(circuit, &ToxicWaste::random(&mut prng), &CpuFixedBase::new(), &NoProgress)
            .map_err(|e| format!("making fixtures: setup of {circuit}: {e}"))?;
        setup::write_files(&ps, circuit, &params).map_err(|e| format!("making fixtures: {e}"))?;
        eprintln!("fixtures: parameters for {circuit} (domain 2^{}) made in {:.1} s", ps.domain_size().trailing_zeros(), t.elapsed().as_secs_f64());
    }
    fn write<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<(), String> {
        let json = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        fs::write(dir.join(name), json).map_err(|e| e.to_string())
    }
    write(tmp.path(), "window.json", &window)?;
    write(tmp.path(), "winning.json", &winning)?;
    write(tmp.path(), "porep.json", &porep)?;
    write(tmp.path(), "snap.json", &snap)?;
    write_manifest(tmp.path())?;
    // Another process may have made the same fixtures meanwhile: either copy will do.
    let _ = fs::remove_dir_all(dir);
    let made = tmp.keep();
    if let Err(e) = fs::rename(&made, dir) {
        let _ = fs::remove_dir_all(&made);
        if check_manifest(dir).is_err() {
            return Err(format!("moving fixtures into {}: {e}", dir.display()));
        }
    }
    Ok(())
}
