"""Drives a running cuzk daemon through Python's grpcio with stubs generated from
crates/cuzk-server/proto: the wire contract does not depend on Rust.

usage: client.py <target>   (e.g. unix:///tmp/cuzk.sock or 127.0.0.1:9820)
Exits non-zero on the first check that fails.
"""
import json
import sys

import grpc

from cuzk.v1 import proving_pb2 as pb
from cuzk.v1 import proving_pb2_grpc as rpc


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def synthetic(log_size, partitions, seed, priority=pb.NORMAL, request_id=""):
    payload = json.dumps({"log_size": log_size, "partitions": partitions, "seed": seed}).encode()
    return pb.SubmitProofRequest(request_id=request_id, proof_kind=pb.PROOF_KIND_SYNTHETIC,
                                 priority=priority, vanilla_proof=payload)


def main():
    target = sys.argv[1]
    limit = 256 << 20
    options = [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)]
    # No grpc.default_authority: over a unix socket C-core sends the socket's path as
    # :authority, which the daemon accepts (crates/cuzk-server/src/authority.rs).
    channel = grpc.insecure_channel(target, options=options)
    stub = rpc.ProvingEngineStub(channel)

    r = stub.Prove(pb.ProveRequest(submit=synthetic(8, 2, 5)), timeout=300).result
    check(r.status == pb.AwaitProofResponse.COMPLETED, f"Prove completed ({r.error_message})")
    check(len(r.proof) == 2 * 192, "two 192-byte partition proofs")

    s = stub.SubmitProof(synthetic(8, 1, 6, pb.HIGH, "py-1"), timeout=60)
    s2 = stub.SubmitProof(synthetic(8, 1, 6, pb.HIGH, "py-1"), timeout=60)
    check(s.job_id and s.job_id == s2.job_id, "the same request_id gives the same job")
    # Other content under the same request_id (Curio's WindowPoSt partitions of one
    # deadline): a job of its own.
    o = stub.SubmitProof(synthetic(8, 1, 7, pb.HIGH, "py-1"), timeout=60)
    check(o.job_id and o.job_id != s.job_id, "a reused request_id with other content gets a job of its own")
    try:
        stub.SubmitProof(synthetic(8, 1, 8, pb.CRITICAL), timeout=60)
        check(False, "CRITICAL is WinningPoSt's")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, f"CRITICAL is WinningPoSt's ({e.details()})")
    a = stub.AwaitProof(pb.AwaitProofRequest(job_id=s.job_id, timeout_ms=120000), timeout=300)
    check(a.status == pb.AwaitProofResponse.COMPLETED and len(a.proof) == 192, "SubmitProof + AwaitProof")
    b = stub.AwaitProof(pb.AwaitProofRequest(job_id=o.job_id, timeout_ms=120000), timeout=300)
    check(b.status == pb.AwaitProofResponse.COMPLETED and len(b.proof) == 192 and b.proof != a.proof, "the other content's own proof")

    st = stub.GetStatus(pb.GetStatusRequest(), timeout=60)
    check(st.total_proofs_completed == 3, "GetStatus counts three completed jobs")
    check(any(x.circuit_id == "synthetic-2^8" for x in st.loaded_srs), "GetStatus lists the loaded parameters")
    m = stub.GetMetrics(pb.GetMetricsRequest(), timeout=60).prometheus_text
    check('cuzk_proofs_completed_total{kind="synthetic"} 3' in m, "GetMetrics")

    try:
        stub.SubmitProof(pb.SubmitProofRequest(proof_kind=pb.PROOF_KIND_UNSPECIFIED), timeout=60)
        check(False, "an unspecified kind is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, f"an unspecified kind is refused ({e.details()})")
    try:
        stub.AwaitProof(pb.AwaitProofRequest(job_id="job-none", timeout_ms=1), timeout=60)
        check(False, "an unknown job is NOT_FOUND")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND, "an unknown job is NOT_FOUND")

    ev = stub.EvictSRS(pb.EvictSRSRequest(circuit_id="synthetic-2^8"), timeout=60)
    check(ev.was_loaded and ev.freed_bytes > 0, "EvictSRS")
    print("all checks passed")


if __name__ == "__main__":
    main()
