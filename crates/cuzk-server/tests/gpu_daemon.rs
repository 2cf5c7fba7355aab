//! The daemon proving on a GPU: the gRPC round trip of tests/daemon.rs with the CUDA
//! backend behind the engine. Ignored by default (needs a GPU); where no GPU is usable
//! it says so and returns.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{check_proof, config, synthetic, Daemon};
use cuzk_cuda::{CudaBackend, Gpu};
use cuzk_server::pb;
use cuzk_server::pb::await_proof_response::Status as JobStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn the_daemon_proves_on_the_gpu_and_every_proof_verifies() {
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            return;
        }
    };
    // a, b, c in pinned buffers, as `cuzk daemon` does on GPUs.
    let g = gpu.clone();
    let pinned: Box<cuzk_engine::BufferMaker> = Box::new(move |len| {
        cuzk_cuda::PinnedScalars::storage(&g, len).map_err(|e| cuzk_engine::EngineError::ResourceExhausted(e.to_string()))
    });
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
    eprintln!("daemon on {:?}: 2 jobs × 3 partitions proved on the GPU and verified", st.gpus.iter().map(|g| &g.name).collect::<Vec<_>>());
    d.stop(Duration::from_secs(5)).await;
}
