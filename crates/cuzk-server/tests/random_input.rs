//! Randomized input (issue 26) to every decoder a client or an operator can reach: the
//! gRPC conversions over a real socket (every kind, every field), the Filecoin
//! decoders (PoRep envelope and C1 JSON, bincode vanilla proofs), the configuration
//! file, and the `.params`/`.vk`/proof readers. Each must answer with a clean error,
//! never panic, and the daemon must keep serving. Fixed seeds and case counts, so a
//! CI run is repeatable; a failure prints the (shrunk) input.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, Daemon};
use cuzk_engine::filecoin::FilecoinKind;
use cuzk_engine::synthetic::SyntheticKind;
use cuzk_filecoin::CircuitKind;
use cuzk_filecoin::{FilecoinRequest, InputChecks};
use cuzk_groth16::{CpuBackend, Proof};
use cuzk_server::config::DaemonConfig;
use cuzk_server::pb;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tonic::Code;

/// A runner with a fixed seed (distinct per test) and `cases` cases.
fn runner(seed: u8, cases: u32) -> TestRunner {
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]))
}

/// JSON values whose objects use the field names the decoders look for, so random
/// documents get past the first layer of checks.
fn json() -> impl Strategy<Value = serde_json::Value> {
    let names = prop::sample::select(vec![
        "SectorNum",
        "Phase1Out",
        "SectorSize",
        "registered_proof",
        "vanilla_proofs",
        "comm_r",
        "comm_d",
        "replica_id",
        "seed",
        "ticket",
        "log_size",
        "partitions",
        "premade",
        "c2",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (0u64..40).prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)),
        "[a-zA-Z0-9+/=]{0,40}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            vec((names.clone(), inner), 0..6).prop_map(|kv| serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// Bytes as a client might send: random, JSON, base64 of JSON, or a bincode-like
/// length prefix before random bytes.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..300),
        json().prop_map(|v| v.to_string().into_bytes()),
        json().prop_map(|v| {
            use base64::Engine as _;
            serde_json::json!({"SectorNum": 1, "Phase1Out": base64::engine::general_purpose::STANDARD.encode(v.to_string())}).to_string().into_bytes()
        }),
        ((0u64..8), vec(any::<u8>(), 0..300)).prop_map(|(n, rest)| {
            let mut b = n.to_le_bytes().to_vec();
            b.extend(rest);
            b
        }),
    ]
}

fn field() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(Vec::new()), vec(any::<u8>(), 32..=32), vec(any::<u8>(), 0..40)]
}

#[test]
fn the_filecoin_decoders_answer_random_input_with_errors() {
    let mut r = runner(1, 512);
    let strategy =
        (0u64..22, prop_oneof![Just(0u64), Just(2048u64), any::<u64>()], payload(), vec(payload(), 0..4), field(), field(), field(), any::<u32>());
    r.run(&strategy, |(registered, size, one, many, a, b, c, index)| {
        for checks in [InputChecks::Full, InputChecks::TimingOnly] {
            // Random input is refused with a message (a panic fails the test).
            let refused =
                |r: Result<Box<dyn cuzk_filecoin::FilecoinJob>, cuzk_filecoin::FilecoinError>| r.err().map_or(true, |e| !e.to_string().is_empty());
            let porep = FilecoinRequest {
                vanilla_proof: one.to_vec(),
                registered_proof: registered,
                sector_size: size,
                sector_number: 1,
                miner_id: 1000,
                ..FilecoinRequest::new(CircuitKind::Porep)
            };
            prop_assert!(refused(porep.decode(checks)));
            let post = FilecoinRequest {
                registered_proof: registered,
                sector_size: size,
                vanilla_proofs: many.to_vec(),
                randomness: a.to_vec(),
                miner_id: 1000,
                partition_index: index,
                ..FilecoinRequest::new(CircuitKind::WindowPost)
            };
            prop_assert!(refused(post.decode(checks)));
            let winning = FilecoinRequest { kind: CircuitKind::WinningPost, ..post };
            prop_assert!(refused(winning.decode(checks)));
            let snap = FilecoinRequest {
                registered_proof: registered,
                sector_size: size,
                vanilla_proofs: many.to_vec(),
                comm_r_old: a.to_vec(),
                comm_r_new: b.to_vec(),
                comm_d_new: c.to_vec(),
                ..FilecoinRequest::new(CircuitKind::Snap)
            };
            prop_assert!(refused(snap.decode(checks)));
        }
        Ok(())
    })
    .unwrap();
}

/// Configuration text: keys cuzk reads (and others) with values of every TOML type.
fn toml_text() -> impl Strategy<Value = String> {
    let keys = prop::sample::select(vec![
        "daemon.listen",
        "daemon.status_listen",
        "daemon.socket_mode",
        "daemon.socket_group",
        "daemon.max_connections",
        "daemon.handshake_timeout",
        "daemon.auth_token_file",
        "daemon.allow_insecure",
        "srs.param_cache",
        "srs.preload",
        "memory.total_budget",
        "memory.safety_margin",
        "memory.eviction_min_idle",
        "gpus.devices",
        "gpus.gpu_workers_per_device",
        "pipeline.synthesis_concurrency",
        "synthetic.max_log_size",
        "admission.max_queued_jobs",
        "admission.critical_kinds",
        "other.key",
    ]);
    let value = prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "[ -~]{0,20}".prop_map(|s| toml::Value::String(s).to_string()),
        "[0-9]{1,4}(ms|s|m|h|d|GiB|MiB|GB|x)?".prop_map(|s| format!("\"{s}\"")),
        vec(any::<i32>(), 0..4).prop_map(|v| format!("{v:?}")),
        Just("[\"porep-32g\", \"winning_post\", 3]".to_string()),
        Just("1.5".to_string()),
    ];
    prop_oneof![
        vec((keys, value), 0..8).prop_map(|kv| {
            kv.iter()
                .map(|(k, v)| {
                    let (section, key) = k.split_once('.').unwrap_or(("x", k));
                    format!("[{section}]\n{key} = {v}\n")
                })
                .collect::<String>()
        }),
        "[ -~\n\\[\\]=\"]{0,200}",
    ]
}

#[test]
fn the_configuration_parser_answers_random_files_with_errors_or_a_configuration() {
    let mut r = runner(2, 1024);
    r.run(&toml_text(), |text| {
        // Either result is fine; a panic is not. A configuration it accepts prints and
        // reads back to itself.
        if let Ok((c, _)) = DaemonConfig::from_toml(&text) {
            let (back, _) = DaemonConfig::from_toml(&c.to_toml()).map_err(|e| TestCaseError::fail(format!("{e}\n{}", c.to_toml())))?;
            // srs.param_cache then comes from the file, wherever it came from before.
            let back = DaemonConfig { parameter_dir_origin: c.parameter_dir_origin, ..back };
            prop_assert_eq!(back, c);
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn the_parameter_and_proof_readers_answer_damaged_files_with_errors() {
    let params = SyntheticKind::parameters(4).unwrap();
    let mut file = Vec::new();
    cuzk_groth16::format::write_params(&mut file, &params).unwrap();
    let mut vk = Vec::new();
    cuzk_groth16::format::write_vk(&mut vk, &params.vk).unwrap();
    let mut r = runner(3, 512);
    // A whole file damaged at a few places, cut, or extended; or random bytes.
    let damage = (vec((any::<prop::sample::Index>(), any::<u8>()), 0..6), any::<prop::sample::Index>(), any::<bool>(), vec(any::<u8>(), 0..64));
    r.run(&damage, |(flips, cut, shorten, extra)| {
        for original in [&file, &vk] {
            let mut bytes = original.clone();
            for (at, x) in &flips {
                let i = at.index(bytes.len());
                bytes[i] ^= x | 1;
            }
            if shorten {
                bytes.truncate(cut.index(bytes.len()));
            } else {
                bytes.extend(&extra);
            }
            // Every damage is refused (two flips of one byte may undo each other: then
            // the file is whole and decodes).
            let changed = bytes != *original;
            let decoded = if std::ptr::eq(original, &file) {
                cuzk_groth16::format::decode_params(&bytes, cuzk_groth16::format::PointCheck::Subgroup).map(drop).map_err(|e| e.to_string())
            } else {
                cuzk_groth16::format::decode_vk(&bytes, cuzk_groth16::format::PointCheck::Subgroup).map(drop).map_err(|e| e.to_string())
            };
            prop_assert_eq!(decoded.is_err(), changed, "damaged: {}, decoded: {:?}", changed, decoded);
            // Read as proofs, the file's bytes must return (an error or proofs), not panic.
            let _ = Proof::decode_many(&bytes);
        }
        prop_assert!(cuzk_groth16::format::decode_params(&extra, cuzk_groth16::format::PointCheck::Subgroup).is_err());
        prop_assert!(cuzk_groth16::format::decode_vk(&extra, cuzk_groth16::format::PointCheck::Subgroup).is_err());
        prop_assert!(Proof::from_bytes(&extra).is_err());
        Ok(())
    })
    .unwrap();
}

fn request() -> impl Strategy<Value = pb::SubmitProofRequest> {
    let ids = prop_oneof![Just(String::new()), "[a-z]{1,3}", "[ -~]{0,300}"];
    (
        (ids, -1i32..7, -1i32..6, 0u64..22, prop_oneof![Just(0u64), Just(2048u64), any::<u64>()]),
        (payload(), vec(payload(), 0..3), any::<u64>(), any::<u64>()),
        (field(), any::<u32>(), field(), field(), field()),
    )
        .prop_map(|((request_id, kind, priority, registered, size), (one, many, sector, miner), (randomness, index, a, b, c))| {
            pb::SubmitProofRequest {
                request_id,
                proof_kind: kind,
                priority,
                sector_size: size,
                registered_proof: registered,
                vanilla_proof: one,
                vanilla_proofs: many,
                sector_number: sector,
                miner_id: miner,
                randomness,
                partition_index: index,
                comm_r_old: a,
                comm_r_new: b,
                comm_d_new: c,
            }
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_submissions_over_the_socket_get_clean_errors_and_the_daemon_keeps_serving() {
    let params = tempfile::tempdir().unwrap();
    let mut kinds: Vec<cuzk_engine::Handler> = vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(10))];
    for k in CircuitKind::ALL {
        kinds.push(cuzk_engine::Handler::filecoin(FilecoinKind::new(k, params.path().to_path_buf(), InputChecks::Full)));
    }
    let d = Daemon::start_with_kinds(config(), vec![Arc::new(CpuBackend::new())], kinds, cuzk_engine::Buffers::plain()).await;
    let c = d.client().await;
    // Drawn from the seeded runner up front (its `run` is synchronous), sent one by one;
    // a failing case is printed whole by the assertion.
    let mut rng = runner(4, 192);
    let strategy = request();
    let cases: Vec<pb::SubmitProofRequest> = (0..192).map(|_| strategy.new_tree(&mut rng).unwrap().current()).collect();
    for r in cases {
        let mut client = c.clone();
        let shown: String = format!("{r:?}").chars().take(3000).collect();
        match client.submit_proof(r).await {
            // A random synthetic request can be valid: it was queued, fine.
            Ok(_) => {}
            Err(e) => {
                let clean = [Code::InvalidArgument, Code::NotFound, Code::FailedPrecondition, Code::ResourceExhausted, Code::PermissionDenied];
                assert!(clean.contains(&e.code()), "{shown}: {:?} {}", e.code(), e.message());
                assert!(e.message().len() <= cuzk_server::rejection::MESSAGE_BYTES + 64, "{shown}: a {}-byte message", e.message().len());
            }
        }
    }
    let mut client = c.clone();
    client.get_status(pb::GetStatusRequest {}).await.unwrap();
    d.stop(Duration::from_secs(1)).await;
}
