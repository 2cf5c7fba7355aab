//! Device faults injected into the CUDA backend (cuzk_cuda::fault) behind a daemon over
//! a real socket: a failed copy or launch mid-partition, a lost device, a failed
//! allocation at load. Ignored by default (needs a GPU); where no GPU is usable it says
//! so and returns. The engine's side with CPU stand-ins is cuzk-engine's tests/faults.rs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{check_proof, config, synthetic, Daemon};
use cuzk_cuda::{CudaBackend, FaultPoint, Faults};
use cuzk_groth16::{CpuBackend, ParameterSet, ProofRandomness, ProveError, ProveOutput, ProvingBackend, SynthesizedCircuit, Urgency};
use cuzk_server::pb;
use cuzk_server::pb::await_proof_response::Status as JobStatus;

fn faulty(point: FaultPoint, nth: usize) -> Option<Arc<dyn ProvingBackend>> {
    let gpu = cuzk_cuda::gpu_for_tests()?;
    Some(Arc::new(CudaBackend::new(gpu).with_faults(Faults::at(point, nth))))
}

async fn prove(d: &Daemon, log: u32, partitions: u32, seed: u64) -> pb::AwaitProofResponse {
    let mut c = d.client().await;
    c.prove(pb::ProveRequest { submit: Some(synthetic(log, partitions, seed, pb::Priority::Normal, "")) }).await.unwrap().into_inner().result.unwrap()
}

/// The second partition's copy (or launch) fails: that partition is proved again, the
/// job completes with a proof that verifies, the GPU stays in service and the next job
/// completes too. An allocation failure while the set's points are placed (another
/// process took memory after the plan) has the set planned and charged again, and the
/// partition proved once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn a_failed_copy_launch_or_allocation_is_proved_again_and_the_daemon_keeps_serving() {
    for (point, nth) in [(FaultPoint::Copy, 2), (FaultPoint::Launch, 2), (FaultPoint::Alloc, 1)] {
        let Some(backend) = faulty(point, nth) else { return };
        let d = Daemon::start_with(config(), vec![backend]).await;
        let r = prove(&d, 12, 3, 50).await;
        assert_eq!(r.status, JobStatus::Completed as i32, "{point:?}: {}", r.error_message);
        check_proof(&r.proof, 12, 3, 50);
        let r = prove(&d, 12, 2, 51).await;
        assert_eq!(r.status, JobStatus::Completed as i32, "{point:?}: {}", r.error_message);
        check_proof(&r.proof, 12, 2, 51);
        let st = d.client().await.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
        assert!(st.gpus.iter().all(|g| g.out_of_service.is_empty()), "{point:?}: {:?}", st.gpus);
        assert_eq!((st.total_proofs_completed, st.total_proofs_failed), (2, 0), "{point:?}");
        eprintln!("{point:?} fault at its {nth}th reach: proved again, 2 jobs completed and verified");
        d.stop(Duration::from_secs(5)).await;
    }
}

/// The CPU backend, proving once `gpu` is out of service (at most a minute later).
struct AfterLoss {
    gpu: Arc<CudaBackend>,
    inner: CpuBackend,
}

impl ProvingBackend for AfterLoss {
    fn name(&self) -> String {
        "cpu-after-loss".into()
    }
    fn prove_with(&self, u: Urgency, p: &ParameterSet, c: &mut [SynthesizedCircuit], r: &[ProofRandomness]) -> Result<ProveOutput, ProveError> {
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while self.gpu.in_service() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.inner.prove_with(u, p, c, r)
    }
}

/// A lost device (a sticky error) takes its GPU out of service, said in the status:
/// with another backend beside it, that one proves the work; alone, the job fails
/// saying no backend is in service, and new jobs are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn a_lost_device_takes_its_gpu_out_of_service() {
    let Some(gpu) = cuzk_cuda::gpu_for_tests() else { return };
    let lost = Arc::new(CudaBackend::new(gpu).with_faults(Faults::at(FaultPoint::Lost, 1)));
    // The CPU proves only once the GPU was lost, so a GPU worker takes a partition first.
    let cpu = Arc::new(AfterLoss { gpu: lost.clone(), inner: CpuBackend::new() });
    let d = Daemon::start_with(config(), vec![lost, cpu]).await;
    let r = prove(&d, 10, 4, 60).await;
    assert_eq!(r.status, JobStatus::Completed as i32, "{}", r.error_message);
    check_proof(&r.proof, 10, 4, 60);
    let st = d.client().await.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert!(st.gpus[0].name.starts_with("cuda") && st.gpus[0].out_of_service.contains("device lost"), "{:?}", st.gpus);
    assert!(st.gpus[1].out_of_service.is_empty(), "{:?}", st.gpus);
    d.stop(Duration::from_secs(5)).await;

    let Some(lost) = faulty(FaultPoint::Lost, 1) else { return };
    let d = Daemon::start_with(config(), vec![lost]).await;
    let r = prove(&d, 10, 2, 61).await;
    assert_eq!(r.status, JobStatus::Failed as i32);
    assert!(r.proof.is_empty());
    assert!(r.error_message.contains("no proving backend is in service") && r.error_message.contains("ILLEGAL_ADDRESS"), "{}", r.error_message);
    let refused = d.client().await.prove(pb::ProveRequest { submit: Some(synthetic(10, 1, 62, pb::Priority::Normal, "")) }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("no proving backend is in service"), "{refused:?}");
    eprintln!("lost device: out of service; with the CPU beside it the job completed; alone: {}", r.error_message);
    d.stop(Duration::from_secs(5)).await;
}
