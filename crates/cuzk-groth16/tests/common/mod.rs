//! Circuits shared by the integration tests.
#![allow(dead_code)]

use bellpepper::gadgets::{multipack, sha256::sha256};
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

/// A real circuit: "I know a preimage of this SHA-256 hash", the hash packed into
/// public inputs. Built from bellpepper's gadgets, so it has the mix of booleans and
/// packed values of Filecoin's circuits.
#[derive(Clone)]
pub struct Sha256Preimage {
    pub preimage: Vec<u8>,
}

impl Sha256Preimage {
    /// The public inputs this circuit exposes for `hash` (without the constant one).
    pub fn public_inputs(hash: &[u8]) -> Vec<Scalar> {
        multipack::compute_multipacking(&multipack::bytes_to_bits(hash))
    }
}

impl Circuit<Scalar> for Sha256Preimage {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits = multipack::bytes_to_bits(&self.preimage);
        let input: Vec<Boolean> = bits
            .into_iter()
            .enumerate()
            .map(|(i, b)| AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(b)).map(Boolean::from))
            .collect::<Result<_, _>>()?;
        let hash = sha256(cs.namespace(|| "sha256"), &input)?;
        multipack::pack_into_inputs(cs.namespace(|| "pack"), &hash)
    }
}

/// SHA-256 in plain Rust (FIPS 180-4), to compute expected public inputs.
pub fn sha256_bytes(msg: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
        0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
        0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
        0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
        0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
        0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ];
    let mut h: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut data = msg.to_vec();
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
    for block in data.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        for (h, v) in h.iter_mut().zip(v) {
            *h = h.wrapping_add(v);
        }
    }
    let mut out = [0u8; 32];
    for (o, h) in out.chunks_mut(4).zip(h) {
        o.copy_from_slice(&h.to_be_bytes());
    }
    out
}

/// A circuit with only public inputs and no aux variables at all.
#[derive(Clone)]
pub struct InputsOnly {
    pub values: Vec<Scalar>,
}

impl Circuit<Scalar> for InputsOnly {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (i, v) in self.values.into_iter().enumerate() {
            cs.alloc_input(|| format!("x{i}"), || Ok(v))?;
        }
        Ok(())
    }
}

/// `n` aux variables all holding `value`, each constrained by x · 1 = x and with a
/// public input x₀ · x₀ = y checking the first one.
#[derive(Clone)]
pub struct Constant {
    pub n: usize,
    pub value: Scalar,
}

impl Circuit<Scalar> for Constant {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let v = self.value;
        let y = cs.alloc_input(|| "y", || Ok(v.square()))?;
        let mut first = None;
        for i in 0..self.n {
            let x = cs.alloc(|| format!("x{i}"), || Ok(v))?;
            cs.enforce(|| "x", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
            first.get_or_insert(x);
        }
        if let Some(x) = first {
            cs.enforce(|| "square", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        }
        Ok(())
    }
}

pub fn nonzero(x: Scalar) -> bool {
    !x.is_zero_vartime()
}
