//! A request on disk, as Curio would send it: `request.json` holds the fields of a
//! SubmitProofRequest (bytes in hex) and names the payload files beside it.
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
use crate::{Circuit, FilecoinJob, InputChecks, PorepRequest, PostRequest, SnapRequest};

const REQUEST: &str = "request.json";
const ENVELOPE: &str = "envelope.json";
const C1: &str = "c1.json";
const VANILLA_DIR: &str = "vanilla_proofs";

/// The fields of a SubmitProofRequest that are not the payload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFields {
    /// The engine's name of the proof kind: "porep_seal_commit", "snap_deals_update",
    /// "window_post_partition" or "winning_post".
    pub proof_kind: String,
    pub registered_proof: u64,
    pub sector_size: u64,
    #[serde(default)]
    pub sector_number: u64,
    #[serde(default)]
    pub miner_id: u64,
    #[serde(default, with = "hex_field")]
    pub randomness: Vec<u8>,
    #[serde(default)]
    pub partition_index: u32,
    #[serde(default, with = "hex_field")]
    pub comm_r_old: Vec<u8>,
    #[serde(default, with = "hex_field")]
    pub comm_r_new: Vec<u8>,
    #[serde(default, with = "hex_field")]
    pub comm_d_new: Vec<u8>,
}

/// A whole request: its fields and payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFiles {
    pub fields: RequestFields,
    /// PoRep: the envelope.
    pub vanilla_proof: Vec<u8>,
    /// The other kinds: one bincode vanilla proof each.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// PoRep: the C1 output inside the envelope.
    pub c1: Vec<u8>,
    /// Set for shape-true inputs: the seed of their random values.
    pub shape_true_seed: Option<u64>,
}

/// What `request.json` holds besides the fields.
#[derive(Serialize, Deserialize)]
struct RequestJson {
    #[serde(flatten)]
    fields: RequestFields,
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
        let fields = RequestFields {
            proof_kind: CircuitKind::Porep.proof_kind_name().into(),
            registered_proof: proof.id,
            sector_size: proof.size.bytes(),
            sector_number,
            miner_id,
            ..Default::default()
        };
        Ok(RequestFiles { fields, vanilla_proof: envelope, c1, ..Default::default() })
    }

    /// A SnapDeals request: one vanilla proof per partition and comm_r_old, comm_r_new,
    /// comm_d_new.
    pub fn snap(proof: UpdateProof, vanilla_proofs: Vec<Vec<u8>>, [old, new, d]: [[u8; 32]; 3]) -> Self {
        let fields = RequestFields {
            proof_kind: CircuitKind::Snap.proof_kind_name().into(),
            registered_proof: proof.size as u64,
            sector_size: proof.size.bytes(),
            comm_r_old: old.to_vec(),
            comm_r_new: new.to_vec(),
            comm_d_new: d.to_vec(),
            ..Default::default()
        };
        RequestFiles { fields, vanilla_proofs, ..Default::default() }
    }

    /// A PoSt request (WindowPoSt partition 0): one vanilla proof per sector.
    pub fn post(proof: PostProof, vanilla_proofs: Vec<Vec<u8>>, randomness: [u8; 32], miner_id: u64) -> Result<Self, FilecoinError> {
        let fields = RequestFields {
            proof_kind: proof.circuit().kind.proof_kind_name().into(),
            registered_proof: proof.registered()?,
            sector_size: proof.size.bytes(),
            miner_id,
            randomness: randomness.to_vec(),
            ..Default::default()
        };
        Ok(RequestFiles { fields, vanilla_proofs, ..Default::default() })
    }

    pub fn kind(&self) -> Result<CircuitKind, FilecoinError> {
        CircuitKind::from_proof_kind_name(&self.fields.proof_kind)
            .ok_or_else(|| FilecoinError::invalid(format!("proof_kind {:?} is not a Filecoin proof kind", self.fields.proof_kind)))
    }

    /// Decodes the request as the daemon would.
    pub fn decode(&self, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        let f = &self.fields;
        match self.kind()? {
            CircuitKind::Porep => crate::decode_porep(&PorepRequest {
                vanilla_proof: &self.vanilla_proof,
                registered_proof: f.registered_proof,
                sector_size: f.sector_size,
                sector_number: f.sector_number,
                miner_id: f.miner_id,
                checks,
            }),
            CircuitKind::Snap => crate::decode_snap(&SnapRequest {
                registered_proof: f.registered_proof,
                sector_size: f.sector_size,
                vanilla_proofs: &self.vanilla_proofs,
                comm_r_old: &f.comm_r_old,
                comm_r_new: &f.comm_r_new,
                comm_d_new: &f.comm_d_new,
                checks,
            }),
            kind @ (CircuitKind::WindowPost | CircuitKind::WinningPost) => {
                let req = PostRequest {
                    registered_proof: f.registered_proof,
                    sector_size: f.sector_size,
                    vanilla_proofs: &self.vanilla_proofs,
                    randomness: &f.randomness,
                    miner_id: f.miner_id,
                    partition_index: f.partition_index,
                    checks,
                };
                if kind == CircuitKind::WindowPost {
                    crate::decode_window_post(&req)
                } else {
                    crate::decode_winning_post(&req)
                }
            }
        }
    }

    /// The circuit the request is proved with.
    pub fn circuit(&self) -> Result<Circuit, FilecoinError> {
        let kind = self.kind()?;
        let n = self.fields.registered_proof;
        Ok(match kind {
            CircuitKind::Porep => SealProof::from_registered(n)?.circuit(),
            CircuitKind::Snap => UpdateProof::from_registered(n)?.circuit(),
            CircuitKind::WindowPost | CircuitKind::WinningPost => PostProof::from_registered(n)?.circuit(),
        })
    }

    /// Writes `request.json` and the payload files into `dir` (made if missing).
    pub fn write(&self, dir: &Path) -> Result<(), FilecoinError> {
        let io = |path: &Path, source: std::io::Error| FilecoinError::Io { path: path.to_owned(), source };
        fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut json = RequestJson {
            fields: self.fields.clone(),
            vanilla_proof_file: None,
            c1_file: None,
            vanilla_proof_files: Vec::new(),
            shape_true: self.shape_true_seed.map(|seed| ShapeTrueNote {
                seed,
                note: "shape-true timing input: the real structure, random values; its vanilla proofs do not verify, so it is refused unless checks are off for timing".into(),
            }),
        };
        if !self.vanilla_proof.is_empty() {
            let path = dir.join(ENVELOPE);
            fs::write(&path, &self.vanilla_proof).map_err(|e| io(&path, e))?;
            json.vanilla_proof_file = Some(ENVELOPE.into());
        }
        if !self.c1.is_empty() {
            let path = dir.join(C1);
            fs::write(&path, &self.c1).map_err(|e| io(&path, e))?;
            json.c1_file = Some(C1.into());
        }
        if !self.vanilla_proofs.is_empty() {
            let sub = dir.join(VANILLA_DIR);
            fs::create_dir_all(&sub).map_err(|e| io(&sub, e))?;
            for (i, p) in self.vanilla_proofs.iter().enumerate() {
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
        let json: RequestJson =
            serde_json::from_slice(&read(REQUEST)?).map_err(|e| FilecoinError::invalid(format!("{}: {e}", dir.join(REQUEST).display())))?;
        for name in json.vanilla_proof_file.iter().chain(&json.c1_file).chain(&json.vanilla_proof_files) {
            if Path::new(name).components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                return Err(FilecoinError::invalid(format!("{REQUEST} names {name:?}: payload files must lie inside the request's folder")));
            }
        }
        let vanilla_proof = json.vanilla_proof_file.as_deref().map(read).transpose()?.unwrap_or_default();
        let vanilla_proofs = json.vanilla_proof_files.iter().map(|n| read(n)).collect::<Result<_, _>>()?;
        let c1 = json.c1_file.as_deref().map(read).transpose()?.unwrap_or_default();
        Ok(RequestFiles { fields: json.fields, vanilla_proof, vanilla_proofs, c1, shape_true_seed: json.shape_true.map(|n| n.seed) })
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes as a hex string in JSON.
mod hex_field {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hex(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom(format!("{s:?} is not an even number of hex digits")));
        }
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(serde::de::Error::custom)).collect()
    }
}

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
        std::fs::write(dir.path().join(REQUEST), r#"{"proof_kind": "x", "registered_proof": 0, "sector_size": 1, "randomness": "0g"}"#).unwrap();
        let e = RequestFiles::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("hex"), "{e}");
    }
}
