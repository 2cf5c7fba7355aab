//! A request on disk, as Curio would send it: `request.json` holds the fields of a
//! [`FilecoinRequest`] (bytes in hex; `proof_kind` the engine's name of the kind) and
//! names the payload files beside it.
//!
//! - PoRep: `envelope.json` (Curio's `{"SectorNum", "Phase1Out", "SectorSize"}`, the
//!   `vanilla_proof` field) and `c1.json` (the C1 output alone, filecoin-proofs-api's
//!   `SealCommitPhase1Output` JSON);
//! - SnapDeals, WindowPoSt, WinningPoSt: `vanilla_proofs/NNNNN.bin`, one bincode
//!   vanilla proof per entry of `vanilla_proofs`, in order.

use std::fs;
use std::path::Path;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::FilecoinError;
use crate::registered::{CircuitKind, PostProof, SealProof, UpdateProof};
use crate::request::FilecoinRequest;

const REQUEST: &str = "request.json";
const ENVELOPE: &str = "envelope.json";
const C1: &str = "c1.json";
const VANILLA_DIR: &str = "vanilla_proofs";

/// A whole request: the request and the files kept beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestFiles {
    /// Every field; on disk `request.json` holds the scalar ones (bytes in hex) and the
    /// vanilla proofs lie in files it names.
    pub request: FilecoinRequest,
    /// PoRep: the C1 output inside the envelope.
    pub c1: Vec<u8>,
    /// Set for shape-true inputs: the seed of their random values.
    pub shape_true_seed: Option<u64>,
}

/// What `request.json` holds besides the fields.
#[derive(Serialize, Deserialize)]
struct RequestJson {
    #[serde(flatten)]
    request: FilecoinRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vanilla_proof_file: Option<String>,
    /// PoRep: the C1 output alone, the same as inside the envelope (for other tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c1_file: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    vanilla_proof_files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shape_true: Option<ShapeTrueNote>,
}

#[derive(Serialize, Deserialize)]
struct ShapeTrueNote {
    seed: u64,
    note: String,
}

impl RequestFiles {
    /// A PoRep C2 request of `c1` (the C1 JSON) in Curio's envelope.
    pub fn porep(proof: SealProof, sector_number: u64, miner_id: u64, c1: Vec<u8>) -> Result<Self, FilecoinError> {
        let envelope = serde_json::to_vec(&serde_json::json!({
            "SectorNum": sector_number,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&c1),
            "SectorSize": proof.size.bytes(),
        }))
        .map_err(|e| FilecoinError::invalid(format!("encoding the envelope: {e}")))?;
        let request = FilecoinRequest {
            registered_proof: proof.id,
            sector_size: proof.size.bytes(),
            sector_number,
            miner_id,
            vanilla_proof: envelope,
            ..FilecoinRequest::new(CircuitKind::Porep)
        };
        Ok(RequestFiles { request, c1, shape_true_seed: None })
    }

    /// A SnapDeals request: one vanilla proof per partition and comm_r_old, comm_r_new,
    /// comm_d_new.
    pub fn snap(proof: UpdateProof, vanilla_proofs: Vec<Vec<u8>>, [old, new, d]: [[u8; 32]; 3]) -> Self {
        let request = FilecoinRequest {
            registered_proof: proof.size as u64,
            sector_size: proof.size.bytes(),
            vanilla_proofs,
            comm_r_old: old.to_vec(),
            comm_r_new: new.to_vec(),
            comm_d_new: d.to_vec(),
            ..FilecoinRequest::new(CircuitKind::Snap)
        };
        RequestFiles { request, c1: Vec::new(), shape_true_seed: None }
    }

    /// A PoSt request (WindowPoSt partition 0): one vanilla proof per sector.
    pub fn post(proof: PostProof, vanilla_proofs: Vec<Vec<u8>>, randomness: [u8; 32], miner_id: u64) -> Result<Self, FilecoinError> {
        let request = FilecoinRequest {
            registered_proof: proof.registered()?,
            sector_size: proof.size.bytes(),
            vanilla_proofs,
            miner_id,
            randomness: randomness.to_vec(),
            ..FilecoinRequest::new(proof.circuit().kind)
        };
        Ok(RequestFiles { request, c1: Vec::new(), shape_true_seed: None })
    }

    pub fn kind(&self) -> CircuitKind {
        self.request.kind
    }

    /// Writes `request.json` and the payload files into `dir` (made if missing).
    pub fn write(&self, dir: &Path) -> Result<(), FilecoinError> {
        let io = |path: &Path, source: std::io::Error| FilecoinError::Io { path: path.to_owned(), source };
        fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut json = RequestJson {
            request: FilecoinRequest { vanilla_proof: Vec::new(), vanilla_proofs: Vec::new(), ..self.request.clone() },
            vanilla_proof_file: None,
            c1_file: None,
            vanilla_proof_files: Vec::new(),
            shape_true: self.shape_true_seed.map(|seed| ShapeTrueNote {
                seed,
                note: "shape-true timing input: the real structure, random values; its vanilla proofs do not verify, so it is refused unless checks are off for timing".into(),
            }),
        };
        if !self.request.vanilla_proof.is_empty() {
            let path = dir.join(ENVELOPE);
            fs::write(&path, &self.request.vanilla_proof).map_err(|e| io(&path, e))?;
            json.vanilla_proof_file = Some(ENVELOPE.into());
        }
        if !self.c1.is_empty() {
            let path = dir.join(C1);
            fs::write(&path, &self.c1).map_err(|e| io(&path, e))?;
            json.c1_file = Some(C1.into());
        }
        if !self.request.vanilla_proofs.is_empty() {
            let sub = dir.join(VANILLA_DIR);
            fs::create_dir_all(&sub).map_err(|e| io(&sub, e))?;
            for (i, p) in self.request.vanilla_proofs.iter().enumerate() {
                let name = format!("{VANILLA_DIR}/{i:05}.bin");
                let path = dir.join(&name);
                fs::write(&path, p).map_err(|e| io(&path, e))?;
                json.vanilla_proof_files.push(name);
            }
        }
        let path = dir.join(REQUEST);
        let text = serde_json::to_vec_pretty(&json).map_err(|e| FilecoinError::invalid(format!("encoding {REQUEST}: {e}")))?;
        fs::write(&path, text).map_err(|e| io(&path, e))
    }

    /// Reads a request written by [`RequestFiles::write`] (or by hand: `request.json`
    /// and the files it names, relative to `dir`).
    pub fn read(dir: &Path) -> Result<Self, FilecoinError> {
        let read = |name: &str| {
            let path = dir.join(name);
            fs::read(&path).map_err(|source| FilecoinError::Io { path, source })
        };
        let text = read(REQUEST)?;
        let invalid = |e: serde_json::Error| FilecoinError::invalid(format!("{REQUEST}: {e}"));
        // Every key known (a typo such as "sector_numbr" would otherwise leave its field
        // at its default and prove something else), none repeated.
        let keys: serde_json::Map<String, serde_json::Value> = crate::strict_json::from_slice(&text).map_err(invalid)?;
        let known = known_keys();
        if let Some(k) = keys.keys().find(|k| !known.contains(k)) {
            return Err(FilecoinError::invalid(format!("{REQUEST}: unknown key {k:?} (the keys: {})", known.join(", "))));
        }
        let json: RequestJson = serde_json::from_slice(&text).map_err(invalid)?;
        for name in json.vanilla_proof_file.iter().chain(&json.c1_file).chain(&json.vanilla_proof_files) {
            if Path::new(name).components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                return Err(FilecoinError::invalid(format!("{REQUEST} names {name:?}: payload files must lie inside the request's folder")));
            }
        }
        let vanilla_proof = json.vanilla_proof_file.as_deref().map(read).transpose()?.unwrap_or_default();
        let vanilla_proofs = json.vanilla_proof_files.iter().map(|n| read(n)).collect::<Result<_, _>>()?;
        let c1 = json.c1_file.as_deref().map(read).transpose()?.unwrap_or_default();
        let request = FilecoinRequest { vanilla_proof, vanilla_proofs, ..json.request };
        Ok(RequestFiles { request, c1, shape_true_seed: json.shape_true.map(|n| n.seed) })
    }
}

/// The keys `request.json` may hold: those of a request with every field and every
/// optional file present, so a field added to [`FilecoinRequest`] or [`RequestJson`]
/// is known here without a list to keep.
fn known_keys() -> Vec<String> {
    let mut request = FilecoinRequest::new(crate::registered::CircuitKind::Porep);
    request.randomness = vec![0];
    request.comm_r_old = vec![0];
    request.comm_r_new = vec![0];
    request.comm_d_new = vec![0];
    let full = RequestJson {
        request,
        vanilla_proof_file: Some(String::new()),
        c1_file: Some(String::new()),
        vanilla_proof_files: vec![String::new()],
        shape_true: Some(ShapeTrueNote { seed: 0, note: String::new() }),
    };
    match serde_json::to_value(full) {
        Ok(serde_json::Value::Object(m)) => m.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    }
}

pub use crate::request::hex;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_through_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = RequestFiles::snap(UpdateProof::from_registered(0).unwrap(), vec![vec![1, 2, 3], vec![4]], [[7; 32], [8; 32], [9; 32]]);
        r.shape_true_seed = Some(3);
        r.write(dir.path()).unwrap();
        assert_eq!(RequestFiles::read(dir.path()).unwrap(), r);
        let json = std::fs::read_to_string(dir.path().join(REQUEST)).unwrap();
        assert!(json.contains("\"comm_r_old\": \"0707") && json.contains("vanilla_proofs/00001.bin"), "{json}");
    }

    #[test]
    fn payload_files_stay_inside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let json = r#"{"proof_kind": "winning_post", "registered_proof": 0, "sector_size": 2048, "vanilla_proof_files": ["../secret"]}"#;
        std::fs::write(dir.path().join(REQUEST), json).unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("inside the request's folder"), "{e}");
        std::fs::write(dir.path().join(REQUEST), r#"{"proof_kind": "winning_post", "registered_proof": 0, "sector_size": 1, "randomness": "0g"}"#)
            .unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("\"0g\" is not hex: 'g' at character 1"), "{e}");
        std::fs::write(dir.path().join(REQUEST), r#"{"proof_kind": "winning_post", "registered_proof": 0, "sector_size": 1, "randomness": "abc"}"#)
            .unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("odd number of hex digits (3)"), "{e}");
        std::fs::write(dir.path().join(REQUEST), r#"{"proof_kind": "synthetic", "registered_proof": 0, "sector_size": 1}"#).unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("\"synthetic\" is not a Filecoin proof kind"), "{e}");
    }

    #[test]
    fn unknown_and_repeated_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let r = RequestFiles::snap(UpdateProof::from_registered(0).unwrap(), vec![vec![1]], [[7; 32], [8; 32], [9; 32]]);
        r.write(dir.path()).unwrap();
        let good = std::fs::read_to_string(dir.path().join(REQUEST)).unwrap();
        assert_eq!(RequestFiles::read(dir.path()).unwrap(), r);
        // A typo of a key: its field would keep its default.
        let typo = good.replacen("{", "{\"sector_numbr\": 7,", 1);
        std::fs::write(dir.path().join(REQUEST), typo).unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("unknown key \"sector_numbr\"") && e.contains("sector_number"), "{e}");
        let twice = good.replacen("{", "{\"miner_id\": 7,\"miner_id\": 8,", 1);
        std::fs::write(dir.path().join(REQUEST), twice).unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("miner_id"), "{e}");
    }
}
