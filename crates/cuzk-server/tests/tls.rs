//! TLS on the daemon's port (issue 26), over a real TCP socket: with a client CA, only
//! clients presenting a certificate it signed are served; a plaintext client is not.
//! The certificates are made here with the `openssl` command.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::synthetic::SyntheticKind;
use cuzk_engine::Engine;
use cuzk_groth16::CpuBackend;
use cuzk_server::access::TlsFiles;
use cuzk_server::connections::ConnectionLimits;
use cuzk_server::pb;
use cuzk_server::pb::proving_engine_client::ProvingEngineClient;
use cuzk_server::{serve_service_tls, ListenAddr, Listener, ProvingService};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl").args(args).current_dir(dir).output().expect("the openssl command");
    assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// A CA, a server certificate for localhost and a client certificate, signed by it.
fn certificates(dir: &Path) {
    let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    openssl(dir, &[&["req", "-x509"][..], &key, &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=cuzk test CA"]].concat());
    std::fs::write(dir.join("server.ext"), "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n").unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for who in ["server", "client"] {
        let (k, csr, pem, ext, cn) = (format!("{who}.key"), format!("{who}.csr"), format!("{who}.pem"), format!("{who}.ext"), format!("/CN={who}"));
        openssl(dir, &[&["req"][..], &key, &["-keyout", &k, "-out", &csr, "-subj", &cn]].concat());
        openssl(
            dir,
            &["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", &pem, "-days", "2", "-extfile", &ext],
        );
    }
}

async fn client(addr: std::net::SocketAddr, dir: &Path, with_identity: bool) -> Result<ProvingEngineClient<Channel>, tonic::transport::Error> {
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("ca.pem"))).domain_name("localhost");
    if with_identity {
        tls = tls.identity(Identity::from_pem(read("client.pem"), read("client.key")));
    }
    let channel = Channel::from_shared(format!("https://{addr}")).unwrap().tls_config(tls)?.connect().await?;
    Ok(ProvingEngineClient::new(channel))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_a_client_ca_only_clients_with_its_certificates_are_served() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let files = TlsFiles { cert: dir.path().join("server.pem"), key: dir.path().join("server.key"), client_ca: Some(dir.path().join("ca.pem")) };
    let tls = files.server_config(Duration::from_secs(10)).unwrap();
    let engine = Arc::new(
        Engine::start(common::config(), vec![Arc::new(CpuBackend::new())], vec![cuzk_engine::Handler::synthetic(SyntheticKind::new(10))]).unwrap(),
    );
    let listener = Listener::bind(&"127.0.0.1:0".parse::<ListenAddr>().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service = ProvingService::new(engine.clone());
    let served = tokio::spawn(async move {
        serve_service_tls(listener, service, &ConnectionLimits::default(), Some(tls), async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });

    let mut c = client(addr, dir.path(), true).await.unwrap();
    let r = c.prove(pb::ProveRequest { submit: Some(common::synthetic(6, 1, 0, pb::Priority::Normal, "")) }).await.unwrap().into_inner();
    assert_eq!(r.result.unwrap().status, pb::await_proof_response::Status::Completed as i32);

    // Without a client certificate: the handshake (or the first call) fails.
    let refused = match client(addr, dir.path(), false).await {
        Err(_) => true,
        Ok(mut c) => c.get_status(pb::GetStatusRequest {}).await.is_err(),
    };
    assert!(refused, "a client without a certificate was served");
    // Plaintext: not served.
    let plain = async {
        let mut c = ProvingEngineClient::connect(format!("http://{addr}")).await.ok()?;
        c.get_status(pb::GetStatusRequest {}).await.ok()
    };
    assert!(tokio::time::timeout(Duration::from_secs(20), plain).await.map_or(true, |r| r.is_none()), "a plaintext client was served");

    let e = engine.clone();
    tokio::task::spawn_blocking(move || e.shutdown(Duration::from_secs(5))).await.unwrap();
    let _ = stop.send(());
    served.await.unwrap();
}

#[test]
fn unreadable_tls_files_are_named() {
    let files = TlsFiles { cert: "/nonexistent/cert.pem".into(), key: "/nonexistent/key.pem".into(), client_ca: None };
    let e = files.server_config(Duration::from_secs(1)).unwrap_err().to_string();
    assert!(e.starts_with("daemon.tls_cert_file /nonexistent/cert.pem"), "{e}");
}
