//! Parameter generation (setup) for any circuit, from random "toxic waste".
//!
//! The circuit is run in shape mode (no witness), recording which variables appear in
//! which constraint of A, B and C with which coefficient. With τ random, the Lagrange
//! basis at τ comes from one inverse NTT of the powers of τ; each variable's uᵢ(τ),
//! vᵢ(τ), wᵢ(τ) are sums over its terms; and every query point is a fixed-base scalar
//! multiplication with precomputed window tables, in parallel.

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use std::io::Write;
use std::path::Path;

use crate::domain::{powers, Domain, DomainError};
use crate::format::{write_file_atomically, FilePoint, FormatError};
use crate::params::{timing_marker, ParameterSet, VerifyingKey};
use crate::progress::Progress;
use crate::shape::CircuitShape;
use crate::synthesis::{Density, SynthesizedCircuit};

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("circuit synthesis failed: {0}")]
    Synthesis(#[from] SynthesisError),
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("a random secret came out zero; try again")]
    ZeroSecret,
    #[error("aux variable {0} appears in no constraint: its L point would be the identity, which bellperson-format readers reject")]
    UnconstrainedVariable(usize),
    #[error("fixed-base multiplication on {on} failed: {reason}")]
    FixedBase { on: String, reason: String },
    #[error("writing the parameters: {0}")]
    Write(String),
}

/// The secrets of a setup. Whoever knows them can forge proofs; they are dropped
/// right after use.
#[derive(Clone, Copy)]
pub struct ToxicWaste {
    pub tau: Scalar,
    pub alpha: Scalar,
    pub beta: Scalar,
    pub gamma: Scalar,
    pub delta: Scalar,
}

impl ToxicWaste {
    pub fn random(rng: &mut impl RngCore) -> Self {
        ToxicWaste {
            tau: Scalar::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
        }
    }
}

/// One matrix entry: variable `var` has coefficient `coeff` in constraint `row`.
struct Term {
    var: Index,
    row: u32,
    coeff: Scalar,
}

/// The constraint system that records the circuit's shape.
#[derive(Default)]
struct ShapeAssembly {
    num_inputs: usize,
    num_aux: usize,
    num_constraints: usize,
    a: Vec<Term>,
    b: Vec<Term>,
    c: Vec<Term>,
}

fn record(terms: &mut Vec<Term>, lc: &LinearCombination<Scalar>, row: u32) {
    for (&i, coeff) in lc.iter_inputs() {
        if !coeff.is_zero_vartime() {
            terms.push(Term { var: Index::Input(i), row, coeff: *coeff });
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if !coeff.is_zero_vartime() {
            terms.push(Term { var: Index::Aux(i), row, coeff: *coeff });
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeAssembly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.num_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.num_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let row = self.num_constraints as u32;
        record(&mut self.a, &a(LinearCombination::zero()), row);
        record(&mut self.b, &b(LinearCombination::zero()), row);
        record(&mut self.c, &c(LinearCombination::zero()), row);
        self.num_constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// Per-variable polynomial values at τ, for inputs and aux separately.
pub(crate) struct QapAtTau {
    pub(crate) input: Vec<Scalar>,
    pub(crate) aux: Vec<Scalar>,
}

/// The scalars of a setup's queries, from u, v, w at τ: IC's (β·u + α·v + w)/γ for the
/// inputs, L's /δ for the aux, A's u and B's v for the variables in each query.
pub(crate) struct QueryScalars {
    pub(crate) ic: Vec<Scalar>,
    pub(crate) l: Vec<Scalar>,
    pub(crate) a: Vec<Scalar>,
    pub(crate) b: Vec<Scalar>,
    pub(crate) delta_inv: Scalar,
}

/// [`QueryScalars`] for the secrets `tw` (checked non-zero), the densities selecting A's
/// aux and B's inputs and aux (every input is in A).
pub(crate) fn query_scalars(
    tw: &ToxicWaste,
    u: QapAtTau,
    v: QapAtTau,
    w: QapAtTau,
    a_aux: &Density,
    b_in: &Density,
    b_aux: &Density,
) -> Result<QueryScalars, SetupError> {
    let (Some(gamma_inv), Some(delta_inv)) = (Option::from(tw.gamma.invert()), Option::from(tw.delta.invert())) else {
        return Err(SetupError::ZeroSecret);
    };
    let combine = |u: &[Scalar], v: &[Scalar], w: &[Scalar], k: Scalar| -> Vec<Scalar> {
        u.par_iter().zip(v).zip(w).map(|((u, v), w)| (tw.beta * u + tw.alpha * v + w) * k).collect()
    };
    let select = |vals: &QapAtTau, din: Option<&Density>, daux: &Density| -> Vec<Scalar> {
        let inputs = vals.input.iter().enumerate().filter(|(i, _)| din.map_or(true, |d| d.get(*i)));
        let aux = vals.aux.iter().enumerate().filter(|(i, _)| daux.get(*i));
        inputs.chain(aux).map(|(_, x)| *x).collect()
    };
    let ic = combine(&u.input, &v.input, &w.input, gamma_inv);
    let l = combine(&u.aux, &v.aux, &w.aux, delta_inv);
    if let Some(i) = l.iter().position(|x| x.is_zero_vartime()) {
        return Err(SetupError::UnconstrainedVariable(i));
    }
    drop(w);
    let a = select(&u, None, a_aux);
    drop(u);
    let b = select(&v, Some(b_in), b_aux);
    Ok(QueryScalars { ic, l, a, b, delta_inv })
}

/// The verifying key of the secrets `tw`, with IC's points.
pub(crate) fn verifying_key(tw: &ToxicWaste, ic: Vec<G1Affine>) -> VerifyingKey {
    let g1 = |k: &Scalar| (G1Projective::generator() * k).to_affine();
    let g2 = |k: &Scalar| (G2Projective::generator() * k).to_affine();
    VerifyingKey {
        alpha_g1: g1(&tw.alpha),
        beta_g1: g1(&tw.beta),
        beta_g2: g2(&tw.beta),
        gamma_g2: g2(&tw.gamma),
        delta_g1: g1(&tw.delta),
        delta_g2: g2(&tw.delta),
        ic,
    }
}

fn evaluate(terms: &[Term], lagrange: &[Scalar], n_in: usize, n_aux: usize) -> QapAtTau {
    let mut q = QapAtTau { input: vec![Scalar::ZERO; n_in], aux: vec![Scalar::ZERO; n_aux] };
    for t in terms {
        let v = t.coeff * lagrange[t.row as usize];
        match t.var {
            Index::Input(i) => q.input[i] += v,
            Index::Aux(i) => q.aux[i] += v,
        }
    }
    q
}

fn density_of(terms: &[Term], n_in: usize, n_aux: usize) -> (Density, Density) {
    let (mut din, mut daux) = (Density::empty(n_in), Density::empty(n_aux));
    for t in terms {
        match t.var {
            Index::Input(i) => din.set(i),
            Index::Aux(i) => daux.set(i),
        }
    }
    (din, daux)
}

/// Precomputed multiples of one base point G in windows of `bits` bits:
/// `table[w][d] = d · 2^(bits·w) · G` (entry 0 is the identity), so k·G is one addition
/// per non-zero digit of k.
pub struct FixedBase<A> {
    bits: usize,
    table: Vec<Vec<A>>,
}

/// The CPU's window: 32 tables of 256 points.
const WINDOW: usize = 8;

/// Projective → affine for many points with one field inversion (blst's batch
/// conversion). The `group` crate's default `batch_normalize` inverts once per point:
/// it made setup and random points ~10× slower.
pub trait BatchAffine: Curve {
    fn to_affine_batch(p: &[Self], out: &mut [Self::AffineRepr]);
}

impl BatchAffine for G1Projective {
    fn to_affine_batch(p: &[Self], out: &mut [G1Affine]) {
        assert_eq!(p.len(), out.len(), "batch conversion needs equal lengths");
        let ptrs: Vec<*const blst::blst_p1> = p.iter().map(|x| x as *const G1Projective as *const blst::blst_p1).collect();
        // SAFETY: G1Projective and G1Affine are #[repr(transparent)] wrappers of blst_p1
        // and blst_p1_affine; `ptrs` holds p.len() valid pointers and `out` as many slots.
        unsafe { blst::blst_p1s_to_affine(out.as_mut_ptr() as *mut blst::blst_p1_affine, ptrs.as_ptr(), p.len()) }
    }
}

impl BatchAffine for G2Projective {
    fn to_affine_batch(p: &[Self], out: &mut [G2Affine]) {
        assert_eq!(p.len(), out.len(), "batch conversion needs equal lengths");
        let ptrs: Vec<*const blst::blst_p2> = p.iter().map(|x| x as *const G2Projective as *const blst::blst_p2).collect();
        // SAFETY: as for G1, with blst_p2 and blst_p2_affine.
        unsafe { blst::blst_p2s_to_affine(out.as_mut_ptr() as *mut blst::blst_p2_affine, ptrs.as_ptr(), p.len()) }
    }
}

impl<A> FixedBase<A>
where
    A: PrimeCurveAffine + Send + Sync,
    A::Curve: Curve<AffineRepr = A> + BatchAffine + Send + Sync,
{
    /// Tables of `bits`-bit windows (a divisor of 8 or a multiple of 8, up to 16) for
    /// `base`, the windows built in parallel.
    pub fn new(base: A::Curve, bits: usize) -> Self {
        assert!(matches!(bits, 1 | 2 | 4 | 8 | 16), "window of {bits} bits: must be 1, 2, 4, 8 or 16");
        let windows = (Scalar::NUM_BITS as usize).div_ceil(bits);
        let mut window_bases = Vec::with_capacity(windows);
        let mut b = base;
        for _ in 0..windows {
            window_bases.push(b);
            for _ in 0..bits {
                b = b.double();
            }
        }
        let table = window_bases
            .into_par_iter()
            .map(|wb| {
                let mut row = vec![A::Curve::identity(); 1 << bits];
                for d in 1..row.len() {
                    row[d] = row[d - 1] + wb;
                }
                let mut affine = vec![A::identity(); row.len()];
                A::Curve::to_affine_batch(&row, &mut affine);
                affine
            })
            .collect();
        FixedBase { bits, table }
    }

    /// The window width in bits.
    pub fn window_bits(&self) -> usize {
        self.bits
    }

    /// The tables, window by window (each 2^bits points, entry 0 the identity).
    pub fn windows(&self) -> &[Vec<A>] {
        &self.table
    }

    /// Window w's digit of k (little-endian, canonical).
    fn digit(&self, repr: &[u8], w: usize) -> usize {
        let bit = w * self.bits;
        let mut d = 0usize;
        for (j, byte) in repr[bit / 8..].iter().take(self.bits.div_ceil(8)).enumerate() {
            d |= (*byte as usize) << (8 * j);
        }
        (d >> (bit % 8)) & ((1 << self.bits) - 1)
    }

    /// k·G.
    pub fn mul(&self, k: &Scalar) -> A::Curve {
        let bytes = k.to_repr();
        let mut acc = A::Curve::identity();
        for (w, row) in self.table.iter().enumerate() {
            let d = self.digit(bytes.as_ref(), w);
            if d != 0 {
                <A::Curve as std::ops::AddAssign<&A>>::add_assign(&mut acc, &row[d]);
            }
        }
        acc
    }

    /// k·G for every k, in parallel, as affine points.
    fn mul_many(&self, ks: &[Scalar], progress: &dyn Progress) -> Vec<A> {
        const CHUNK: usize = 1024;
        let mut out = vec![A::identity(); ks.len()];
        out.par_chunks_mut(CHUNK).zip(ks.par_chunks(CHUNK)).for_each(|(o, k)| {
            let proj: Vec<A::Curve> = k.iter().map(|k| self.mul(k)).collect();
            A::Curve::to_affine_batch(&proj, o);
            progress.advance(k.len() as u64);
        });
        out
    }
}

/// Fixed-base scalar multiplications by the generators of G1 and G2: nearly all of a
/// setup's time. Implementations must return exactly k·G for every k, in order.
pub trait FixedBaseMul: Sync {
    /// Where the multiplications run, for logs ("CPU", "GPU 0 (NVIDIA H200)").
    fn name(&self) -> String;
    /// k·G1 for every k, advancing `progress` by one per scalar.
    fn g1(&self, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G1Affine>, SetupError>;
    /// k·G2 for every k, advancing `progress` by one per scalar.
    fn g2(&self, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G2Affine>, SetupError>;
}

/// [`FixedBaseMul`] on the CPU: 8-bit window tables, every core.
pub struct CpuFixedBase {
    g1: FixedBase<G1Affine>,
    g2: FixedBase<G2Affine>,
}

impl CpuFixedBase {
    pub fn new() -> Self {
        CpuFixedBase { g1: FixedBase::new(G1Projective::generator(), WINDOW), g2: FixedBase::new(G2Projective::generator(), WINDOW) }
    }
}

impl Default for CpuFixedBase {
    fn default() -> Self {
        Self::new()
    }
}

impl FixedBaseMul for CpuFixedBase {
    fn name(&self) -> String {
        "CPU".into()
    }
    fn g1(&self, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G1Affine>, SetupError> {
        Ok(self.g1.mul_many(ks, progress))
    }
    fn g2(&self, ks: &[Scalar], progress: &dyn Progress) -> Result<Vec<G2Affine>, SetupError> {
        Ok(self.g2.mul_many(ks, progress))
    }
}

/// Generates a parameter set for `circuit` from fresh randomness, on the CPU.
pub fn generate_parameters<C: Circuit<Scalar>>(circuit: C, rng: &mut impl RngCore, progress: &dyn Progress) -> Result<ParameterSet, SetupError> {
    generate_parameters_with(circuit, &ToxicWaste::random(rng), &CpuFixedBase::new(), progress)
}

/// Generates a parameter set for `circuit` from the given secrets, the fixed-base
/// multiplications done by `mul`.
pub fn generate_parameters_with<C: Circuit<Scalar>>(
    circuit: C,
    tw: &ToxicWaste,
    mul: &dyn FixedBaseMul,
    progress: &dyn Progress,
) -> Result<ParameterSet, SetupError> {
    if [tw.tau, tw.alpha, tw.beta, tw.gamma, tw.delta].iter().any(|x| x.is_zero_vartime()) {
        return Err(SetupError::ZeroSecret);
    }
    let mut cs = ShapeAssembly::default();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    // The input constraints x_i · 0 = 0, exactly as the prover adds them.
    for i in 0..cs.num_inputs {
        cs.enforce(|| "", |lc| lc + Variable::new_unchecked(Index::Input(i)), |lc| lc, |lc| lc);
    }
    let (n_in, n_aux) = (cs.num_inputs, cs.num_aux);
    let domain = Domain::for_size(cs.num_constraints)?;
    let m = domain.size();
    if tw.tau.pow_vartime([m as u64]) == Scalar::ONE {
        // τ in the domain makes Z(τ) = 0; vanishingly unlikely for a random τ.
        return Err(SetupError::ZeroSecret);
    }

    // Lagrange basis at τ: Lⱼ(τ) = (1/m) Σₖ (τ ω^{-j})^k, i.e. the inverse NTT of τ^k.
    let t = std::time::Instant::now();
    let mut lagrange = powers(tw.tau, Scalar::ONE, m);
    domain.ifft(&mut lagrange);
    let (u, (v, w)) = rayon::join(
        || evaluate(&cs.a, &lagrange, n_in, n_aux),
        || rayon::join(|| evaluate(&cs.b, &lagrange, n_in, n_aux), || evaluate(&cs.c, &lagrange, n_in, n_aux)),
    );
    drop(lagrange);
    let (_, a_aux) = density_of(&cs.a, n_in, n_aux);
    let (b_in, b_aux) = density_of(&cs.b, n_in, n_aux);
    drop(cs);
    tracing::info!(domain = m, inputs = n_in, aux = n_aux, secs = t.elapsed().as_secs_f64(), "setup: QAP evaluated at τ");

    let QueryScalars { ic: ic_scalars, l: l_scalars, a: a_scalars, b: b_scalars, delta_inv } = query_scalars(tw, u, v, w, &a_aux, &b_in, &b_aux)?;
    let h_len = m - 1;

    // Each query's scalars are dropped once its points are made: at 2^27 they are
    // 4 GB a query, beside ~47 GB of points.
    // Another implementation's results are checked for count before use.
    let counted = |what: &str, n: usize, got: usize| -> Result<(), SetupError> {
        if n == got {
            Ok(())
        } else {
            Err(SetupError::FixedBase { on: mul.name(), reason: format!("{what}: {got} points for {n} scalars") })
        }
    };
    let t = std::time::Instant::now();
    let g1_total = (ic_scalars.len() + l_scalars.len() + h_len + a_scalars.len() + b_scalars.len()) as u64;
    progress.stage(&format!("setup: G1 points ({})", mul.name()), g1_total);
    let ic = mul.g1(&ic_scalars, progress)?;
    counted("IC", ic_scalars.len(), ic.len())?;
    let l = mul.g1(&l_scalars, progress)?;
    counted("L", l_scalars.len(), l.len())?;
    drop(l_scalars);
    let a = mul.g1(&a_scalars, progress)?;
    counted("A", a_scalars.len(), a.len())?;
    drop(a_scalars);
    let h = {
        let z_over_delta = domain.vanishing_at(tw.tau) * delta_inv;
        mul.g1(&powers(tw.tau, z_over_delta, h_len), progress)?
    };
    counted("H", h_len, h.len())?;
    let b_g1 = mul.g1(&b_scalars, progress)?;
    counted("B (G1)", b_scalars.len(), b_g1.len())?;
    progress.stage(&format!("setup: G2 points ({})", mul.name()), b_scalars.len() as u64);
    let b_g2 = mul.g2(&b_scalars, progress)?;
    counted("B (G2)", b_scalars.len(), b_g2.len())?;
    tracing::info!(on = %mul.name(), secs = t.elapsed().as_secs_f64(), "setup: fixed-base multiplications done");

    Ok(ParameterSet::new(verifying_key(tw, ic), h, l, a, b_g1, b_g2))
}

/// A verifying key of random points whose α is the [`timing_marker`].
fn timing_vk(inputs: usize, rng: &mut impl RngCore) -> VerifyingKey {
    VerifyingKey {
        alpha_g1: timing_marker(),
        beta_g1: G1Projective::random(&mut *rng).to_affine(),
        beta_g2: G2Projective::random(&mut *rng).to_affine(),
        gamma_g2: G2Projective::random(&mut *rng).to_affine(),
        delta_g1: G1Projective::random(&mut *rng).to_affine(),
        delta_g2: G2Projective::random(&mut *rng).to_affine(),
        ic: random_points::<G1Affine>(inputs, rng, &crate::progress::NoProgress),
    }
}

/// A parameter set of the shape `c` needs whose points are random curve points,
/// unrelated to any setup: proofs made with it do NOT verify, and its α is the
/// [`timing_marker`]. It times full-size proofs without a full setup (hours of
/// fixed-base multiplications on a CPU), and, written to a file, lets other provers be
/// timed on the very same points.
pub fn timing_parameters(c: &SynthesizedCircuit, rng: &mut impl RngCore, progress: &dyn Progress) -> ParameterSet {
    let q = CircuitShape::of(c).query_lens();
    progress.stage("timing parameters: random G1 points", (q.h + q.l + q.a + q.b_g1) as u64);
    let h = random_points::<G1Affine>(q.h, rng, progress);
    let l = random_points::<G1Affine>(q.l, rng, progress);
    let a = random_points::<G1Affine>(q.a, rng, progress);
    let b_g1 = random_points::<G1Affine>(q.b_g1, rng, progress);
    progress.stage("timing parameters: random G2 points", q.b_g2 as u64);
    let b_g2 = random_points::<G2Affine>(q.b_g2, rng, progress);
    ParameterSet::new(timing_vk(c.num_inputs(), rng), h, l, a, b_g1, b_g2)
}

/// Points made and written per step by [`write_timing_params`]: 2^20 G2 points are
/// 192 MiB of file, so memory stays far below a file of tens of gigabytes.
const TIMING_CHUNK: usize = 1 << 20;

/// Writes a timing parameter set (as [`timing_parameters`]) of `shape` straight to
/// `params_path` and its `.vk` beside it, a chunk of points at a time, so that a
/// 47 GB file needs no more than a few hundred megabytes of memory.
/// Each file is written whole or not at all (`write_file_atomically`).
pub fn write_timing_params(shape: &CircuitShape, params_path: &Path, rng: &mut impl RngCore, progress: &dyn Progress) -> Result<(), FormatError> {
    let vk_path = crate::format::vk_path_for(params_path)?;
    let q = shape.query_lens();
    if [q.h, q.l, q.a, q.b_g1].iter().any(|&n| n > u32::MAX as usize) {
        return Err(FormatError::Inconsistent(format!("a query of {q:?} has more than 2^32 - 1 points")));
    }
    let vk = timing_vk(shape.inputs, rng);
    write_file_atomically(params_path, |out| {
        crate::format::write_vk(out, &vk)?;
        progress.stage("timing parameters: random G1 points", (q.h + q.l + q.a + q.b_g1) as u64);
        for n in [q.h, q.l, q.a, q.b_g1] {
            write_random_section::<G1Affine>(out, n, rng, progress)?;
        }
        progress.stage("timing parameters: random G2 points", q.b_g2 as u64);
        write_random_section::<G2Affine>(out, q.b_g2, rng, progress)
    })?;
    write_file_atomically(&vk_path, |f| crate::format::write_vk(f, &vk))
}

/// One section: the big-endian count, then `n` random points, made a chunk at a time.
fn write_random_section<A>(out: &mut impl Write, n: usize, rng: &mut impl RngCore, progress: &dyn Progress) -> std::io::Result<()>
where
    A: PrimeCurveAffine + FilePoint + Send + Sync,
    A::Curve: Curve<AffineRepr = A> + BatchAffine + Send + Sync,
{
    out.write_all(&(n as u32).to_be_bytes())?;
    let mut bytes = Vec::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(TIMING_CHUNK);
        let points = random_points::<A>(k, rng, progress);
        bytes.resize(k * A::BYTES, 0);
        bytes.par_chunks_exact_mut(A::BYTES).zip(points.par_iter()).for_each(|(o, p)| p.encode(o));
        out.write_all(&bytes)?;
        left -= k;
    }
    Ok(())
}

/// n distinct points P + i·Q, P and Q random: one addition per point, chunks in
/// parallel, each chunk normalized with one inversion.
pub fn random_points<A>(n: usize, rng: &mut impl RngCore, progress: &dyn Progress) -> Vec<A>
where
    A: PrimeCurveAffine + Send + Sync,
    A::Curve: Curve<AffineRepr = A> + BatchAffine + Send + Sync,
{
    const CHUNK: usize = 1 << 12;
    let (p, q) = (A::Curve::random(&mut *rng), A::Curve::random(&mut *rng));
    let q_affine = q.to_affine();
    let mut out = vec![A::identity(); n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(k, o)| {
        let mut acc = p + q * A::Scalar::from((k * CHUNK) as u64);
        let proj: Vec<A::Curve> = (0..o.len())
            .map(|_| {
                let r = acc;
                acc += q_affine;
                r
            })
            .collect();
        A::Curve::to_affine_batch(&proj, o);
        progress.advance(o.len() as u64);
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use rand::SeedableRng;

    #[test]
    fn unconstrained_aux_variable_is_an_error() {
        struct Loose;
        impl Circuit<Scalar> for Loose {
            fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
                let x = cs.alloc(|| "x", || Ok(Scalar::ONE))?;
                cs.alloc(|| "loose", || Ok(Scalar::ONE))?;
                cs.enforce(|| "x", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
                Ok(())
            }
        }
        let r = generate_parameters(Loose, &mut rand_chacha::ChaCha20Rng::seed_from_u64(1), &NoProgress);
        assert!(matches!(r, Err(SetupError::UnconstrainedVariable(1))));
    }

    #[test]
    fn timing_parameters_fit_the_circuit_and_hold_distinct_points() {
        let shape = crate::synthetic::SyntheticShape::for_domain(8);
        let c = crate::synthesize(shape.circuit(1)).unwrap();
        let p = timing_parameters(&c, &mut rand_chacha::ChaCha20Rng::seed_from_u64(5), &NoProgress);
        p.check_shape(&c).unwrap();
        assert!(p.vk.is_timing_only());
        let real = generate_parameters(shape.circuit(1), &mut rand_chacha::ChaCha20Rng::seed_from_u64(5), &NoProgress).unwrap();
        assert!(!real.vk.is_timing_only(), "a setup's key is not marked");
        let p = p.host().unwrap();
        let mut all: Vec<[u8; 48]> = p.h.iter().chain(&p.l).chain(&p.a).map(|q| q.to_compressed()).collect();
        assert!(p.h.iter().all(|q| bool::from(q.is_on_curve()) && !bool::from(q.is_identity())));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "random points repeat");
        // The chain P + i·Q across a chunk boundary.
        let pts = random_points::<G1Affine>(3 << 11, &mut rand_chacha::ChaCha20Rng::seed_from_u64(6), &NoProgress);
        let q = G1Projective::from(pts[1]) - G1Projective::from(pts[0]);
        assert_eq!(G1Projective::from(pts[4096]) - G1Projective::from(pts[4095]), q);
    }

    /// The streamed writer makes a file of the counted shape, chunk after chunk, that
    /// reads back as a marked timing set fitting the circuit.
    #[test]
    fn timing_params_are_written_a_chunk_at_a_time() {
        let shape = crate::synthetic::SyntheticShape::for_domain(9);
        let c = crate::synthesize(shape.circuit(2)).unwrap();
        let counted = crate::shape::count_shape(shape.circuit(2)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.params");
        write_timing_params(&counted, &path, &mut rand_chacha::ChaCha20Rng::seed_from_u64(8), &NoProgress).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), counted.params_file_bytes());
        let p = crate::format::read_params(&path, crate::format::PointCheck::Subgroup).unwrap();
        p.check_shape(&c).unwrap();
        assert!(p.vk.is_timing_only());
        let vk = crate::format::read_vk(&path.with_extension("vk"), crate::format::PointCheck::OnCurve).unwrap();
        assert_eq!(vk, p.vk);
    }

    #[test]
    fn fixed_base_matches_scalar_multiplication() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let mut ks: Vec<Scalar> = (0..50).map(|_| Scalar::random(&mut rng)).collect();
        ks.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(0xffffu64), Scalar::from(0x1_0000u64)]);
        for bits in [4, 8] {
            let t1 = FixedBase::<G1Affine>::new(G1Projective::generator(), bits);
            let t2 = FixedBase::<G2Affine>::new(G2Projective::generator(), bits);
            let got = t1.mul_many(&ks, &NoProgress);
            for (k, p) in ks.iter().zip(&got) {
                assert_eq!(G1Projective::from(*p), G1Projective::generator() * k, "{bits}-bit windows");
                assert_eq!(t2.mul(k), G2Projective::generator() * k, "{bits}-bit windows");
            }
        }
    }
}
