//! The daemon proving on a GPU: the gRPC round trip of tests/daemon.rs with the CUDA
//! backend behind the engine. Ignored by default (needs a GPU); where no GPU is usable
//! it says so and returns.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{check_proof, config, synthetic, Daemon};
use cuzk_cuda::{CudaBackend, Gpu};
use cuzk_filecoin::CircuitKind;
use cuzk_server::pb;
use cuzk_server::pb::await_proof_response::Status as JobStatus;

/// Device 0; None where this machine has no CUDA driver or device, unless
/// CUZK_REQUIRE_GPU=1; any other failure panics (cuzk_cuda::gpu_for_tests).
fn gpu() -> Option<Arc<Gpu>> {
    cuzk_cuda::gpu_for_tests()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn the_daemon_proves_on_the_gpu_and_every_proof_verifies() {
    let Some(gpu) = gpu() else { return };
    // a, b, c in pinned buffers, as `cuzk daemon` does on GPUs.
    let g = gpu.clone();
    let pinned = cuzk_engine::Buffers::pinned(Box::new(move |len| {
        cuzk_cuda::PinnedScalars::storage(&g, len).map_err(|e| cuzk_engine::EngineError::ResourceExhausted(e.to_string()))
    }));
    let d = Daemon::start_with_buffers(config(), vec![Arc::new(CudaBackend::new(gpu))], pinned).await;
    let mut c = d.client().await;
    // Two jobs of three partitions each, in flight together: both workers share the GPU.
    let (mut c1, mut c2) = (c.clone(), c.clone());
    let (r1, r2) = tokio::join!(
        c1.prove(pb::ProveRequest { submit: Some(synthetic(12, 3, 21, pb::Priority::Normal, "")) }),
        c2.prove(pb::ProveRequest { submit: Some(synthetic(14, 3, 40, pb::Priority::High, "")) }),
    );
    for (r, log, seed) in [(r1, 12, 21), (r2, 14, 40)] {
        let r = r.unwrap().into_inner().result.unwrap();
        assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
        check_proof(&r.proof, log, 3, seed);
    }
    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.total_proofs_completed, 2);
    assert!(st.gpus.iter().all(|g| g.name.starts_with("cuda")), "{:?}", st.gpus);
    // The device's own ordinal and memory, asked now; the pooled a/b/c are pinned.
    assert_eq!(st.gpus[0].ordinal, 0);
    assert!(st.gpus.iter().all(|g| g.vram_total_bytes > 0 && g.vram_free_bytes <= g.vram_total_bytes), "{:?}", st.gpus);
    assert!(st.pinned_memory_bytes > 0 && st.pinned_memory_bytes <= st.pinned_memory_limit_bytes, "{st:?}");
    eprintln!("daemon on {:?}: 2 jobs × 3 partitions proved on the GPU and verified", st.gpus.iter().map(|g| &g.name).collect::<Vec<_>>());
    d.stop(Duration::from_secs(5)).await;
}

/// Filecoin requests (2 KiB PoRep C2 and WindowPoSt, as Curio sends them) proved by the
/// daemon on the GPU with the parameters read from their files onto the device (the
/// host keeps only their headers), and accepted by filecoin-proofs' verifiers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn filecoin_proofs_from_parameter_files_read_onto_the_gpu_are_accepted() {
    let Some(gpu) = gpu() else { return };
    filecoin_proofs_on(CudaBackend::new(gpu), false).await;
}

/// The same with the points streamed from pinned host memory (forced, through the
/// smallest chunk buffers), as on a GPU too small for the sets; the engine charges the
/// pinned copies to its host budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn filecoin_proofs_with_streamed_parameter_points_are_accepted() {
    let Some(gpu) = gpu() else { return };
    let chunk_bytes = cuzk_cuda::msm::streamed::MIN_CHUNK_BYTES;
    let backend = CudaBackend::new(gpu).with_overrides(cuzk_cuda::Overrides { chunk_bytes: Some(chunk_bytes), ..Default::default() }).unwrap();
    filecoin_proofs_on(backend, true).await;
}

async fn filecoin_proofs_on(backend: CudaBackend, streamed: bool) {
    use cuzk_engine::filecoin::FilecoinKind;
    use cuzk_filecoin::fixtures::fixtures_2k;
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let kinds: Vec<cuzk_engine::Handler> = [CircuitKind::Porep, CircuitKind::WindowPost]
        .into_iter()
        .map(|k| cuzk_engine::Handler::filecoin(FilecoinKind::new(k, f.param_dir.clone(), cuzk_filecoin::InputChecks::Full)))
        .collect();
    let d = Daemon::start_with_kinds(config(), vec![Arc::new(backend)], kinds, cuzk_engine::Buffers::plain()).await;
    let mut c = d.client().await;
    let p = &f.porep;
    let porep = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: p.registered_proof,
        vanilla_proof: p.envelope.clone(),
        sector_number: p.sector_number,
        miner_id: p.miner_id,
        ..Default::default()
    };
    let r = c.prove(pb::ProveRequest { submit: Some(porep) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(p.filecoin_proofs_accepts(&r.proof, p.comm_r, p.seed), "verify_seal accepts the GPU's PoRep proof");
    let w = &f.window;
    let window = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::WindowPostPartition as i32,
        sector_size: 2048,
        registered_proof: w.registered_proof,
        vanilla_proofs: w.vanilla_proofs.clone(),
        randomness: w.randomness.to_vec(),
        miner_id: w.miner_id,
        partition_index: 0,
        ..Default::default()
    };
    let r = c.prove(pb::ProveRequest { submit: Some(window) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    assert!(w.filecoin_proofs_accepts(&r.proof, &w.randomness, &w.comm_rs), "filecoin-proofs accepts the GPU's WindowPoSt proof");
    let st = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    let largest_file = std::fs::read_dir(&f.param_dir).unwrap().filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).max().unwrap();
    assert_eq!(st.loaded_srs.len(), 2, "{:?}", st.loaded_srs);
    if streamed {
        // The pinned copies of the points are charged with the sets.
        let charged: u64 = st.loaded_srs.iter().map(|s| s.size_bytes).sum();
        assert!(charged > largest_file / 2, "{charged} bytes charged for streamed sets; the largest file has {largest_file}");
    } else {
        // Only the headers stay in host memory: each loaded set is a small part of its file.
        for s in &st.loaded_srs {
            assert!(s.size_bytes < largest_file / 4, "{} holds {} bytes on the host", s.circuit_id, s.size_bytes);
        }
    }
    let mode = if streamed { "streamed from pinned host memory" } else { "read onto the GPU" };
    eprintln!(
        "PoRep C2 and WindowPoSt at 2 KiB proved on the GPU, points {mode}; filecoin-proofs accepts both; host charged {:?}",
        st.loaded_srs.iter().map(|s| (&s.circuit_id, s.size_bytes)).collect::<Vec<_>>()
    );
    d.stop(Duration::from_secs(5)).await;
}

/// Every Filecoin kind (2 KiB, compiled matrices) on the paths a small card's plan
/// takes — one staging slot shared by two prover workers, twiddles computed past stage
/// 10, points streamed through the least chunks, the witness's other values left on the
/// host (a, b, c then computed there, the split lists built a window at a time) —
/// submitted at once: every proof is accepted by filecoin-proofs' verifiers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn every_kind_on_a_small_cards_paths_with_two_workers_is_accepted() {
    use cuzk_engine::filecoin::FilecoinKind;
    use cuzk_engine::EngineConfig;
    use cuzk_filecoin::fixtures::fixtures_2k;
    let Some(gpu) = gpu() else { return };
    let f = fixtures_2k().unwrap_or_else(|e| panic!("2 KiB fixtures: {e}"));
    let matrices = tempfile::tempdir().unwrap();
    let kinds: Vec<cuzk_engine::Handler> = CircuitKind::ALL
        .into_iter()
        .map(|k| {
            let kind = FilecoinKind::new(k, f.param_dir.clone(), cuzk_filecoin::InputChecks::Full);
            cuzk_engine::Handler::filecoin(kind.with_compiled_matrices(matrices.path().to_owned()))
        })
        .collect();
    let small = cuzk_cuda::Overrides {
        chunk_bytes: Some(cuzk_cuda::msm::streamed::MIN_CHUNK_BYTES),
        slots: Some(1),
        table_log: Some(10),
        witness_least: true,
        ..Default::default()
    };
    let backend = CudaBackend::new(gpu).with_overrides(small).unwrap();
    // The four sets' points are pinned on the host (streamed): 2 KiB PoRep's alone are
    // 1.5 GB, and the default test budget of 2 GiB would hold one set at a time.
    let cfg = EngineConfig { workers_per_backend: 2, synthesis_workers: 2, memory_budget_bytes: 16 << 30, ..config() };
    let d = Daemon::start_with_kinds(cfg, vec![Arc::new(backend)], kinds, cuzk_engine::Buffers::plain()).await;
    let c = d.client().await;
    let post = |kind: pb::ProofKind, p: &cuzk_filecoin::fixtures::PostFixture| pb::SubmitProofRequest {
        proof_kind: kind as i32,
        sector_size: 2048,
        registered_proof: p.registered_proof,
        vanilla_proofs: p.vanilla_proofs.clone(),
        randomness: p.randomness.to_vec(),
        miner_id: p.miner_id,
        ..Default::default()
    };
    let (p, s) = (&f.porep, &f.snap);
    let porep = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: p.registered_proof,
        vanilla_proof: p.envelope.clone(),
        sector_number: p.sector_number,
        miner_id: p.miner_id,
        ..Default::default()
    };
    let snap = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::SnapDealsUpdate as i32,
        sector_size: 2048,
        registered_proof: s.registered_proof,
        vanilla_proofs: s.vanilla_proofs.clone(),
        comm_r_old: s.comm_r_old.to_vec(),
        comm_r_new: s.comm_r_new.to_vec(),
        comm_d_new: s.comm_d_new.to_vec(),
        ..Default::default()
    };
    let prove = |r: pb::SubmitProofRequest| {
        let mut c = c.clone();
        async move { c.prove(pb::ProveRequest { submit: Some(r) }).await.unwrap().into_inner().result.unwrap() }
    };
    let (rp, rs, rw, rn) = tokio::join!(
        prove(porep),
        prove(snap),
        prove(post(pb::ProofKind::WindowPostPartition, &f.window)),
        prove(post(pb::ProofKind::WinningPost, &f.winning))
    );
    for r in [&rp, &rs, &rw, &rn] {
        assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    }
    assert!(p.filecoin_proofs_accepts(&rp.proof, p.comm_r, p.seed), "verify_seal refuses the PoRep proof");
    assert!(s.filecoin_proofs_accepts(&rs.proof, s.comm_r_new, s.comm_d_new), "the SnapDeals proof is refused");
    assert!(f.window.filecoin_proofs_accepts(&rw.proof, &f.window.randomness, &f.window.comm_rs), "the WindowPoSt proof is refused");
    assert!(f.winning.filecoin_proofs_accepts(&rn.proof, &f.winning.randomness, &f.winning.comm_rs), "the WinningPoSt proof is refused");
    eprintln!("all four kinds at 2 KiB on a small card's paths (one slot, two workers): accepted by filecoin-proofs");
    d.stop(Duration::from_secs(5)).await;
}
