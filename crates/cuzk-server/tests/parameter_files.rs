//! PreloadSRS checks a Filecoin circuit's parameter files before loading them
//! (presence, the length their headers imply, the timing marker): a missing, cut or
//! timing file is named in a FAILED_PRECONDITION answer that says what to do.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{config, Daemon};
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_engine::ParameterSource;
use cuzk_filecoin::fixtures::fixtures_2k;
use cuzk_filecoin::{setup, Circuit, CircuitKind, InputChecks, SectorSize};
use cuzk_groth16::CpuBackend;
use cuzk_server::pb;
use cuzk_server::ParameterFiles;
use rand::SeedableRng;
use tonic::Code;

const WPOST_2K: Circuit = Circuit { kind: CircuitKind::WindowPost, size: SectorSize::S2KiB };

async fn daemon(dir: &Path, checks: InputChecks) -> Daemon {
    let kinds: Vec<cuzk_engine::Handler> =
        CircuitKind::ALL.into_iter().map(|k| cuzk_engine::Handler::filecoin(FilecoinKind::new(k, dir.to_owned(), checks))).collect();
    let files = ParameterFiles { dir: dir.to_owned(), timing_points_allowed: checks == InputChecks::TimingOnly };
    Daemon::start_checking(config(), vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain(), Some(files)).await
}

async fn preload(d: &Daemon, id: &str) -> Result<pb::PreloadSrsResponse, tonic::Status> {
    d.client().await.preload_srs(pb::PreloadSrsRequest { circuit_id: id.into() }).await.map(|r| r.into_inner())
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn preload_names_missing_cut_and_timing_files() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let (params, vk) = (WPOST_2K.params_path(&f.param_dir).unwrap(), WPOST_2K.vk_path(&f.param_dir).unwrap());

    // The fixture's real files pass and load.
    let d = daemon(&f.param_dir, InputChecks::Full).await;
    let r = preload(&d, "wpost-2k").await.unwrap_or_else(|e| panic!("{e:?}"));
    assert!(!r.already_loaded);
    d.stop(Duration::from_secs(5)).await;

    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), InputChecks::Full).await;
    let e = preload(&d, "wpost-2k").await.expect_err("files that are not there were loaded");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    for needle in [format!("{}: missing", name(&params)), format!("{}: missing", name(&vk)), "cuzk params check --circuit wpost-2k".into()] {
        assert!(e.message().contains(&needle), "{needle:?} not in {}", e.message());
    }
    // The client learns which file, not where the server keeps it.
    assert!(!e.message().contains(dir.path().to_str().unwrap()), "a server path in {}", e.message());

    // A download cut short: the .params 1000 bytes short, the .vk whole.
    let bytes = std::fs::read(&params).unwrap();
    std::fs::write(dir.path().join(name(&params)), &bytes[..bytes.len() - 1000]).unwrap();
    std::fs::copy(&vk, dir.path().join(name(&vk))).unwrap();
    let e = preload(&d, "wpost-2k").await.expect_err("a cut file was loaded");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains(&format!("{}: truncated", name(&params))), "{}", e.message());
    assert!(e.message().contains(&format!("at least {} in all", bytes.len())), "{}", e.message());
    assert!(!e.message().contains(&name(&vk)), "the whole .vk is not named: {}", e.message());
    // Unknown ids still get the engine's answer.
    assert_eq!(preload(&d, "porep-31g").await.unwrap_err().code(), Code::NotFound);
    d.stop(Duration::from_secs(5)).await;

    // Timing parameters under the real names: refused by a daemon for real work, loaded
    // by a timing-only one.
    let dir = tempfile::tempdir().unwrap();
    let shape = setup::blank_shape(WPOST_2K).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    cuzk_groth16::generator::write_timing_params(&shape, &WPOST_2K.params_path(dir.path()).unwrap(), &mut rng, &cuzk_groth16::NoProgress).unwrap();
    let d = daemon(dir.path(), InputChecks::Full).await;
    let e = preload(&d, "wpost-2k").await.expect_err("timing parameters were loaded by a daemon for real work");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("timing parameters") && e.message().contains("daemon.timing_only"), "{}", e.message());
    d.stop(Duration::from_secs(5)).await;
    let d = daemon(dir.path(), InputChecks::TimingOnly).await;
    preload(&d, "wpost-2k").await.unwrap_or_else(|e| panic!("a timing-only daemon refused timing parameters: {e:?}"));
    d.stop(Duration::from_secs(5)).await;
}

/// A file of the right length whose points are damaged, and a directory where the file
/// should be: FAILED_PRECONDITION naming the problem (never INTERNAL), no server path.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn preload_names_a_damaged_file_and_a_directory_in_its_place() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let (params, vk) = (WPOST_2K.params_path(&f.param_dir).unwrap(), WPOST_2K.vk_path(&f.param_dir).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(&params).unwrap();
    // Points near the end (the last section's) overwritten: the length is right.
    let at = bytes.len() - 2000;
    bytes[at..at + 400].fill(0x55);
    std::fs::write(dir.path().join(name(&params)), &bytes).unwrap();
    std::fs::copy(&vk, dir.path().join(name(&vk))).unwrap();
    let d = daemon(dir.path(), InputChecks::Full).await;
    let e = preload(&d, "wpost-2k").await.expect_err("a damaged file was loaded");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("cannot be used") && e.message().contains("point"), "{}", e.message());
    assert!(!e.message().contains(dir.path().to_str().unwrap()), "a server path in {}", e.message());
    d.stop(Duration::from_secs(5)).await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(name(&params))).unwrap();
    std::fs::copy(&vk, dir.path().join(name(&vk))).unwrap();
    let d = daemon(dir.path(), InputChecks::Full).await;
    let e = preload(&d, "wpost-2k").await.expect_err("a directory was loaded");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("is a directory") && !e.message().contains("No such device"), "{}", e.message());
    assert!(!e.message().contains(dir.path().to_str().unwrap()), "a server path in {}", e.message());
    d.stop(Duration::from_secs(5)).await;
}

/// The Filecoin kind, counting the sets it loads.
struct CountingLoads(FilecoinKind, Arc<std::sync::atomic::AtomicUsize>);

impl cuzk_engine::KindHandler<cuzk_filecoin::FilecoinRequest> for CountingLoads {
    fn plan(&self, body: &cuzk_filecoin::FilecoinRequest) -> Result<cuzk_engine::JobPlan, cuzk_engine::EngineError> {
        self.0.plan(body)
    }
}

impl ParameterSource for CountingLoads {
    fn kind(&self) -> cuzk_engine::ProofKind {
        self.0.kind()
    }
    fn owns_circuit(&self, circuit_id: &str) -> bool {
        self.0.owns_circuit(circuit_id)
    }
    fn load_params(&self, circuit_id: &str, points_in_file: bool) -> Result<cuzk_groth16::ParameterSet, cuzk_engine::EngineError> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.load_params(circuit_id, points_in_file)
    }
    fn params_host_bytes(&self, circuit_id: &str, points_in_file: bool) -> Result<Option<u64>, cuzk_engine::EngineError> {
        self.0.params_host_bytes(circuit_id, points_in_file)
    }
}

/// A parameter set larger than the whole memory budget is refused from its file's
/// header, before any of its points is read (it used to be read, then refused); one
/// that fits is charged what its header said, which is what it holds once loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_set_larger_than_the_budget_is_refused_before_any_byte_is_read() {
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let start = |budget: u64, loads: Arc<std::sync::atomic::AtomicUsize>| {
        let kind = CountingLoads(FilecoinKind::new(CircuitKind::WindowPost, f.param_dir.clone(), InputChecks::Full), loads);
        let cfg = cuzk_engine::EngineConfig { memory_budget_bytes: budget, ..config() };
        Daemon::start_with_kinds(cfg, vec![Arc::new(CpuBackend::new())], vec![cuzk_engine::Handler::filecoin(kind)], cuzk_engine::Buffers::plain())
    };
    let loads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let d = start(64 << 10, loads.clone()).await;
    let e = preload(&d, "wpost-2k").await.expect_err("a set larger than the budget was loaded");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("from its file's header") && e.message().contains("nothing of it was read"), "{}", e.message());
    assert_eq!(loads.load(std::sync::atomic::Ordering::SeqCst), 0, "the set was read before it was refused");
    d.stop(Duration::from_secs(5)).await;

    let d = start(1 << 30, loads.clone()).await;
    preload(&d, "wpost-2k").await.unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(loads.load(std::sync::atomic::Ordering::SeqCst), 1);
    let (_, layout) = cuzk_groth16::format::read_params_header(&WPOST_2K.params_path(&f.param_dir).unwrap()).unwrap();
    let st = d.engine.status();
    let set = st.parameter_sets.iter().find(|p| p.circuit_id == "wpost-2k").expect("the set is loaded");
    assert_eq!((set.size_bytes, st.memory_used_bytes), (layout.host_bytes(false) as u64, layout.host_bytes(false) as u64));
    d.stop(Duration::from_secs(5)).await;
}
