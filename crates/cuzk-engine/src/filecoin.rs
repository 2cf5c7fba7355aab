//! The Filecoin proof kinds (cuzk-filecoin) as engine kinds: a request becomes a
//! decoded job whose partitions synthesize filecoin-proofs' circuits; parameters come
//! from the Filecoin parameter directory under their standard names; the assembled
//! proof is checked by filecoin-proofs' verifier before it is returned.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cuzk_filecoin::matrices::{load_if_present, load_or_compile, Provenance};
use cuzk_filecoin::{CheckedBy, Circuit, CircuitKind, FilecoinError, FilecoinJob, FilecoinRequest, InputChecks};
use cuzk_groth16::format::{read_params_header, read_params_placed, FormatError, PointCheck};
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::params::QueryPoints;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::{AuxBuffer, NoProgress, ParameterSet, Scalar, SynthesizedCircuit, Witness, SCALAR_BYTES};

use crate::error::EngineError;
use crate::kind::{JobPlan, KindHandler, ParameterSource, PartitionWork, TIMING_ONLY_NOTE};
use crate::request::ProofKind;
use cuzk_groth16::sync::lock;

fn engine_error(e: FilecoinError) -> EngineError {
    if e.is_client_error() {
        EngineError::InvalidArgument(e.to_string())
    } else {
        EngineError::Internal(e.to_string())
    }
}

/// One Filecoin proof kind, reading parameter sets from `parameter_dir` (the daemon's
/// `srs.param_cache`, which must also be filecoin-proofs' parameter directory:
/// [`cuzk_filecoin::env::use_parameter_dir`]).
pub struct FilecoinKind {
    kind: CircuitKind,
    parameter_dir: PathBuf,
    checks: InputChecks,
    /// What the parameter file headers say, per circuit.
    headers: Mutex<HashMap<Circuit, ParamsHeader>>,
    /// Where compiled matrices are kept, when partitions are synthesized witness-only
    /// and a, b, c computed by the backend ([`FilecoinKind::with_compiled_matrices`]),
    /// and whether they are compiled there when missing.
    matrices: Option<(PathBuf, MatricesUse)>,
    /// Background compiles, by circuit id (`MatricesUse::Background`).
    compiles: Arc<Mutex<HashMap<String, Compile>>>,
}

/// A circuit's matrices being compiled in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compile {
    Running,
    /// Written: the next load of the circuit's set uses them.
    Done,
    Failed,
}

/// When a kind with a matrices directory uses compiled matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MatricesUse {
    /// Where the circuit's file is there (made ahead by `cuzk compile`); else full
    /// synthesis while they are compiled in the background, and the set loaded again
    /// with them once they are written and no partition holds it.
    Background,
    /// Always: compiled on first use when missing, stale or corrupt.
    CompileOnUse,
}

/// What a plan needs of a parameter file, read from its header, and the file's length
/// and modification time when it was read (a file replaced since is read again).
#[derive(Clone, Copy)]
struct ParamsHeader {
    /// The length of a, b, c.
    domain_size: usize,
    /// Host bytes of the set loaded, with its points decoded and left in the file.
    host_bytes: [u64; 2],
    /// Random points (`cuzk setup --timing-params`): proofs made with them never verify.
    timing_points: bool,
    file: (u64, Option<std::time::SystemTime>),
}

fn file_stamp(path: &std::path::Path) -> Option<(u64, Option<std::time::SystemTime>)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()))
}

impl FilecoinKind {
    /// With [`InputChecks::TimingOnly`] the kind proves shape-true inputs and timing
    /// parameters, and its jobs return no proof; a daemon for real work uses
    /// [`InputChecks::Full`].
    pub fn new(kind: CircuitKind, parameter_dir: PathBuf, checks: InputChecks) -> Self {
        FilecoinKind { kind, parameter_dir, checks, headers: Mutex::new(HashMap::new()), matrices: None, compiles: Arc::default() }
    }

    /// Proves with compiled matrices kept in `dir` (`<params stem>.cuzk-matrices`,
    /// compiled on first use when missing, stale or corrupt): witness-only synthesis,
    /// a, b, c computed by the backend.
    pub fn with_compiled_matrices(mut self, dir: PathBuf) -> Self {
        self.matrices = Some((dir, MatricesUse::CompileOnUse));
        self
    }

    /// Proves with compiled matrices from `dir` for the circuits whose file is there
    /// (made ahead by `cuzk compile`); a circuit without one is compiled there in the
    /// background at its set's first load (at preload, or its first request) while
    /// its partitions are synthesized in full: no proof waits for minutes of compiling
    /// (a 32 GiB WindowPoSt circuit: 4–7 minutes on an H200 host, longer than a proving
    /// deadline allows). Once written, [`ParameterSource::matrices_ready`] tells the
    /// parameter cache to load the set again with them when no partition holds it.
    pub fn with_compiled_matrices_in_background(mut self, dir: PathBuf) -> Self {
        self.matrices = Some((dir, MatricesUse::Background));
        self
    }

    /// Starts compiling `circuit`'s matrices into `dir` on a thread of its own, unless
    /// that is under way already.
    fn compile_in_background(&self, circuit: Circuit, dir: &std::path::Path) {
        let id = circuit.id();
        {
            let mut compiles = lock(&self.compiles);
            if compiles.get(&id) == Some(&Compile::Running) {
                tracing::info!(circuit_id = %id, "compiled matrices still being made in the background: partitions are synthesized in full meanwhile");
                return;
            }
            compiles.insert(id.clone(), Compile::Running);
        }
        let (compiles, dir, thread_id) = (self.compiles.clone(), dir.to_owned(), id.clone());
        tracing::info!(
            circuit_id = %id,
            dir = %dir.display(),
            "no compiled matrices: compiling them in the background (about the matrices' size in host memory, one core mostly); partitions are synthesized in full until the set is loaded again with them"
        );
        let spawned = std::thread::Builder::new().name(format!("compile-{id}")).spawn(move || {
            let t = std::time::Instant::now();
            let state = match cuzk_filecoin::matrices::compile_to(circuit, &dir, &LogProgress::new(&thread_id)) {
                Ok((path, m)) => {
                    tracing::info!(
                        circuit_id = %thread_id,
                        path = %path.display(),
                        gb = format!("{:.2}", m.bytes() as f64 / 1e9),
                        secs = format!("{:.1}", t.elapsed().as_secs_f64()),
                        "compiled matrices written: the set is loaded again with them as soon as no partition holds it"
                    );
                    Compile::Done
                }
                Err(e) => {
                    tracing::warn!(circuit_id = %thread_id, error = %e, "compiling the matrices in the background failed: partitions stay on full synthesis (tried again at the set's next load)");
                    Compile::Failed
                }
            };
            lock(&compiles).insert(thread_id, state);
        });
        if let Err(e) = spawned {
            tracing::warn!(circuit_id = %id, error = %e, "could not start the background compile: partitions stay on full synthesis");
            lock(&self.compiles).insert(id, Compile::Failed);
        }
    }

    fn circuit(&self, circuit_id: &str) -> Result<Circuit, EngineError> {
        Circuit::from_id(circuit_id)
            .filter(|c| c.kind == self.kind)
            .ok_or_else(|| EngineError::NotFound(format!("not a {} circuit id: {}", self.kind(), crate::error::shown(circuit_id))))
    }

    fn params_path(&self, circuit: Circuit) -> Result<PathBuf, EngineError> {
        circuit.params_path(&self.parameter_dir).map_err(engine_error)
    }

    /// The circuit's parameter file header: the domain size (the length of a, b, c)
    /// and whether its points are timing ones.
    fn header(&self, circuit: Circuit) -> Result<ParamsHeader, EngineError> {
        let path = self.params_path(circuit)?;
        let Some(stamp) = file_stamp(&path) else {
            return Err(EngineError::NotFound(FilecoinError::MissingParameters { path }.to_string()));
        };
        if let Some(&h) = lock(&self.headers).get(&circuit) {
            if h.file == stamp {
                return Ok(h);
            }
        }
        let (vk, layout) = read_params_header(&path).map_err(|e| unusable_parameters(circuit, &path, &e))?;
        let host_bytes = [layout.host_bytes(false) as u64, layout.host_bytes(true) as u64];
        let h = ParamsHeader { domain_size: layout.domain_size(), host_bytes, timing_points: vk.is_timing_only(), file: stamp };
        lock(&self.headers).insert(circuit, h);
        Ok(h)
    }
}

impl FilecoinKind {
    fn timing_points_refusal(&self, circuit: Circuit) -> EngineError {
        tracing::error!(circuit = %circuit, dir = %self.parameter_dir.display(), "timing parameters where real ones are needed");
        EngineError::FailedPrecondition(format!(
            "the parameters of {circuit} in the daemon's parameter directory are timing parameters (random points, made by `cuzk setup --timing-params`): proofs made with them never verify; put the real parameter files there, or run a timing-only daemon (daemon.timing_only)"
        ))
    }
}

/// A parameter file that is there but cannot be used (damaged, cut, a directory): the
/// operator's to mend, so FAILED_PRECONDITION, its path in the daemon's log only (a
/// client is told the circuit and the problem, not the server's directories).
fn unusable_parameters(circuit: Circuit, path: &std::path::Path, e: &FormatError) -> EngineError {
    let why = match e {
        _ if path.is_dir() => "it is a directory, not a file".to_string(),
        FormatError::Io { source, .. } => source.to_string(),
        e => e.to_string(),
    };
    tracing::error!(circuit = %circuit, path = %path.display(), "parameter file unusable: {why}");
    EngineError::FailedPrecondition(format!(
        "the parameter file of {circuit} cannot be used ({why}); the daemon's log names it, and `cuzk params check --circuit {circuit}` on its host checks it"
    ))
}

struct FilecoinPartition {
    job: Arc<dyn FilecoinJob>,
    index: usize,
}

impl PartitionWork for FilecoinPartition {
    fn synthesize(&self, buffers: EvalBuffers) -> Result<SynthesizedCircuit, EngineError> {
        self.job.synthesize(self.index, buffers).map_err(engine_error)
    }

    fn witness(&self, aux: AuxBuffer) -> Result<Witness, EngineError> {
        self.job.witness(self.index, aux).map_err(engine_error)
    }

    fn public_inputs(&self) -> Option<Result<Vec<Scalar>, EngineError>> {
        Some(self.job.public_inputs(self.index).map_err(engine_error))
    }
}

impl ParameterSource for FilecoinKind {
    fn kind(&self) -> ProofKind {
        ProofKind::Filecoin(self.kind)
    }

    fn owns_circuit(&self, circuit_id: &str) -> bool {
        Circuit::from_id(circuit_id).is_some_and(|c| c.kind == self.kind)
    }

    fn matrices_ready(&self, circuit_id: &str) -> bool {
        lock(&self.compiles).get(circuit_id) == Some(&Compile::Done)
    }

    fn load_matrices(&self, circuit_id: &str) -> Result<Option<ConstraintMatrices>, EngineError> {
        let Some((dir, how)) = &self.matrices else { return Ok(None) };
        let circuit = self.circuit(circuit_id)?;
        let t = std::time::Instant::now();
        let failed = |e: FilecoinError| EngineError::Internal(format!("compiled matrices of {circuit}: {e}"));
        let (m, provenance) = match how {
            MatricesUse::CompileOnUse => load_or_compile(circuit, dir, &NoProgress).map_err(failed)?,
            MatricesUse::Background => match load_if_present(circuit, dir).map_err(failed)? {
                Some(m) => {
                    lock(&self.compiles).remove(circuit_id);
                    (m, Provenance::Read)
                }
                None => {
                    self.compile_in_background(circuit, dir);
                    return Ok(None);
                }
            },
        };
        tracing::info!(
            circuit_id,
            dir = %dir.display(),
            how = match provenance { Provenance::Read => "read from the file".to_string(), Provenance::Compiled(why) => format!("compiled ({why}) and written") },
            gb = format!("{:.2}", m.bytes() as f64 / 1e9),
            secs = format!("{:.2}", t.elapsed().as_secs_f64()),
            "compiled matrices ready: partitions are synthesized witness-only"
        );
        Ok(Some(m))
    }

    /// The set from its header, and the compiled matrices file's length where one is
    /// there to be read (its copy holds about as much: crate::array in cuzk-groth16).
    fn params_host_bytes(&self, circuit_id: &str, points_in_file: bool) -> Result<Option<u64>, EngineError> {
        let circuit = self.circuit(circuit_id)?;
        let set = self.header(circuit)?.host_bytes[points_in_file as usize];
        let matrices = match &self.matrices {
            Some((dir, _)) => cuzk_filecoin::matrices::matrices_path(circuit, dir)
                .ok()
                .and_then(|p| std::fs::metadata(p).ok())
                .filter(|m| m.is_file())
                .map_or(0, |m| m.len()),
            None => 0,
        };
        Ok(Some(set + matrices))
    }

    fn load_params(&self, circuit_id: &str, points_in_file: bool) -> Result<ParameterSet, EngineError> {
        let circuit = self.circuit(circuit_id)?;
        let path = self.params_path(circuit)?;
        if !path.exists() {
            return Err(EngineError::NotFound(FilecoinError::MissingParameters { path }.to_string()));
        }
        let t = std::time::Instant::now();
        let p = read_params_placed(&path, PointCheck::OnCurve, points_in_file, &NoProgress).map_err(|e| unusable_parameters(circuit, &path, &e))?;
        // Checked again here: the file may have changed since a plan read its header,
        // and PreloadSRS loads without a plan.
        if p.vk.is_timing_only() && self.checks == InputChecks::Full {
            return Err(self.timing_points_refusal(circuit));
        }
        tracing::info!(
            circuit_id,
            path = %path.display(),
            secs = t.elapsed().as_secs_f64(),
            points = if matches!(p.points(), QueryPoints::File(_)) { "left in the file for the GPUs" } else { "decoded in host memory" },
            "parameters loaded"
        );
        Ok(p)
    }
}

impl KindHandler<FilecoinRequest> for FilecoinKind {
    fn plan(&self, body: &FilecoinRequest) -> Result<JobPlan, EngineError> {
        let decode_start = std::time::Instant::now();
        let job: Arc<dyn FilecoinJob> = body.decode(self.checks).map_err(engine_error)?.into();
        let circuit = job.circuit();
        let header = self.header(circuit)?;
        let eval_len = header.domain_size;
        if header.timing_points && self.checks == InputChecks::Full {
            return Err(self.timing_points_refusal(circuit));
        }
        let timing_note = job.timing_only().then(|| {
            format!(
                "{TIMING_ONLY_NOTE}: the vanilla proofs were not checked{}; the proof is not checked and not returned: never for real work",
                if header.timing_points { " and the parameters are timing parameters" } else { "" }
            )
        });
        // The decode's time is the vanilla proofs' checks in production mode: part of
        // what production costs over timing-only.
        tracing::info!(
            job = job.describe().as_str(),
            circuit = %circuit,
            vanilla_checks = !job.timing_only(),
            decode_ms = decode_start.elapsed().as_millis() as u64,
            "decoded"
        );
        let partitions =
            (0..job.partitions()).map(|index| Arc::new(FilecoinPartition { job: job.clone(), index }) as Arc<dyn PartitionWork>).collect();
        let check = job.clone();
        let final_check = Arc::new(move |proof: &[u8]| match check.verify(proof) {
            Ok(CheckedBy::FilecoinProofs) => Ok("filecoin-proofs' verifier accepted the proof".to_string()),
            Ok(CheckedBy::PartitionsOnly(why)) => Ok(format!("each partition proof verified against storage-proofs' public inputs ({why})")),
            Err(e) => Err(e.to_string()),
        });
        Ok(JobPlan {
            circuit_id: circuit.id(),
            partitions,
            eval_len,
            // The aux assignment and densities: about one variable per constraint.
            partition_bytes: (SCALAR_BYTES * eval_len) as u64,
            final_check: Some(final_check),
            timing_note,
        })
    }
}

/// A background compile's progress in the log, every tenth of each stage.
struct LogProgress {
    circuit_id: String,
    stage: Mutex<(String, u64, u64, u64)>,
}

impl LogProgress {
    fn new(circuit_id: &str) -> Self {
        LogProgress { circuit_id: circuit_id.to_string(), stage: Mutex::new((String::new(), 0, 0, 0)) }
    }
}

impl cuzk_groth16::Progress for LogProgress {
    fn stage(&self, name: &str, total: u64) {
        *lock(&self.stage) = (name.to_string(), total, 0, 0);
        tracing::info!(circuit_id = %self.circuit_id, stage = name, total, "background compile");
    }

    fn advance(&self, n: u64) {
        let mut g = lock(&self.stage);
        let (name, total, done, logged) = &mut *g;
        *done += n;
        let tenth = (*done * 10).checked_div(*total).unwrap_or(0);
        if tenth > *logged && tenth < 10 {
            *logged = tenth;
            tracing::info!(circuit_id = %self.circuit_id, stage = %name, percent = tenth * 10, "background compile");
        }
    }
}
