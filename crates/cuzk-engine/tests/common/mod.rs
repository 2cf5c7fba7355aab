//! What the engine's test files share: synthetic requests and the check of their proofs.

use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::synthetic::SyntheticRequest;
use cuzk_engine::{JobRequest, Priority};
use cuzk_groth16::verifier::{verify_proof, PreparedVerifyingKey};
use cuzk_groth16::{synthesize, Proof};

pub fn synthetic(log_size: u32, partitions: u32, seed: u64, priority: Priority, request_id: &str) -> JobRequest {
    synthetic_json(format!(r#"{{"log_size": {log_size}, "partitions": {partitions}, "seed": {seed}}}"#).as_bytes(), priority, request_id)
}

/// A synthetic request of the JSON payload `json`, as given.
pub fn synthetic_json(json: &[u8], priority: Priority, request_id: &str) -> JobRequest {
    JobRequest::new(request_id, priority, SyntheticRequest(json.to_vec()))
}

/// Checks each 192-byte partition proof against the synthetic circuit's inputs.
#[allow(dead_code)] // not every test file checks proofs
pub fn check_proof(bytes: &[u8], log_size: u32, partitions: u32, seed: u64) {
    assert_eq!(bytes.len(), 192 * partitions as usize);
    let params = SyntheticKind::parameters(log_size).unwrap();
    let pvk = PreparedVerifyingKey::new(&params.vk);
    let shape = cuzk_groth16::synthetic::SyntheticShape::for_domain(log_size);
    for i in 0..partitions as usize {
        let proof = Proof::from_bytes(&bytes[i * 192..(i + 1) * 192]).unwrap();
        let inputs = synthesize(shape.circuit(seed + i as u64)).unwrap().input[1..].to_vec();
        assert!(verify_proof(&pvk, &proof, &inputs).unwrap(), "partition {i} does not verify");
        // And not against another partition's inputs.
        let other = synthesize(shape.circuit(seed + i as u64 + 1000)).unwrap().input[1..].to_vec();
        assert!(!verify_proof(&pvk, &proof, &other).unwrap());
    }
}
