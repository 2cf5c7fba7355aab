//! The HTTP status endpoint (daemon.status_listen): `GET /status` answers JSON (queues,
//! backends and their devices, parameter sets, memory, per-job partition state), `GET /metrics` the
//! Prometheus text, `GET /timeline` the stage events as JSON lines (the input of
//! `cuzk timeline`). Plain HTTP/1.1, one request per connection, GET only.
//! With the daemon's token (daemon.auth_token_file) every request must carry it
//! (`Authorization: Bearer <token>`, else 401) and jobs are listed by their whole ids;
//! without one, by their labels (a job's id is what lets a client cancel it).
//! At most 64 requests at once, each within 10 s; at the descriptor limit the accept
//! loop backs off as the gRPC port's does.

use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{label_of, Engine};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::access::AccessToken;
use crate::connections::{is_exhaustion, Throttled};

/// A job id as the endpoint shows it: whole, or its label.
fn shown_id(id: &str, whole_ids: bool) -> String {
    if whole_ids {
        id.to_string()
    } else {
        label_of(id).to_string()
    }
}

/// The JSON document of `GET /status`; job ids whole only where `whole_ids`.
pub fn status_json(engine: &Engine, whole_ids: bool) -> serde_json::Value {
    let s = engine.status();
    json!({
        "uptime_seconds": s.uptime.as_secs(),
        "proofs_completed": s.completed,
        "proofs_failed": s.failed,
        "memory": {
            "budget_bytes": s.memory_budget_bytes, "used_bytes": s.memory_used_bytes,
            "peak_bytes": s.memory_peak_bytes, "pinned_bytes": s.memory_pinned_bytes,
            "idle_bytes": s.memory_idle_bytes,
            "aux_vectors_reused": s.aux_vectors_reused, "aux_vectors_fresh": s.aux_vectors_fresh,
        },
        // One entry per proving backend (the key predates the name).
        "workers": s.backends.iter().map(|b| json!({
            "backend": b.name,
            "device": b.device.as_ref().map(|d| json!({
                "ordinal": d.ordinal, "name": d.name, "total_memory_bytes": d.total_memory, "free_memory_bytes": d.free_memory,
                "pool_used_bytes": d.pool_used, "pool_used_high_bytes": d.pool_used_high,
            })),
            "current_job": b.current_job.as_ref().map(|(j, _)| shown_id(&j.0, whole_ids)),
            "current_kind": b.current_job.as_ref().map(|(_, k)| k.to_string()),
            // Why it proves nothing more (its device lost); null while in service.
            "out_of_service": b.out_of_service,
        })).collect::<Vec<_>>(),
        "queues": s.queues.iter().map(|q| json!({
            "kind": q.kind.to_string(), "pending": q.pending, "in_progress": q.in_progress,
        })).collect::<Vec<_>>(),
        "parameters": s.parameter_sets.iter().map(|p| json!({
            "circuit_id": p.circuit_id, "size_bytes": p.size_bytes, "ref_count": p.ref_count,
            "idle_seconds": p.idle.as_secs(),
        })).collect::<Vec<_>>(),
        "jobs": engine.job_summaries().iter().map(|j| json!({
            "job_id": shown_id(&j.job_id.0, whole_ids), "kind": j.kind.to_string(), "priority": format!("{:?}", j.priority),
            "status": format!("{:?}", j.status), "partitions": j.partitions.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn response(status: &str, content_type: &str, body: &str) -> String {
    format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
}

/// Whether a request head carries `token` in its Authorization header.
fn authorized(head: &str, token: &AccessToken) -> bool {
    let value = head.lines().skip(1).find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim().eq_ignore_ascii_case("authorization").then(|| value.trim())
    });
    token.admits(value.map(str::as_bytes))
}

/// [`serve_status_with`] no token.
pub async fn serve_status(listener: TcpListener, engine: Arc<Engine>) {
    serve_status_with(listener, engine, None).await
}

/// Status requests served at once: a connection beyond it is closed at once (a scraper
/// retries), so idle or slow peers cannot hold the port or the process's descriptors.
const MAX_STATUS_CONNECTIONS: usize = 64;
/// A whole request, its head read and its answer written, at most.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until the task is dropped; with `token`, only to requests carrying it. When
/// accepting fails for lack of descriptors or memory, the loop backs off (10 ms,
/// doubling to 1 s) instead of retrying at once (which spun a core at EMFILE).
pub async fn serve_status_with(listener: TcpListener, engine: Arc<Engine>, token: Option<Arc<AccessToken>>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_STATUS_CONNECTIONS));
    let mut backoff = Duration::from_millis(10);
    let mut throttle = Throttled::new();
    loop {
        let mut sock = match listener.accept().await {
            Ok((sock, _)) => {
                backoff = Duration::from_millis(10);
                sock
            }
            Err(e) if is_exhaustion(&e) => {
                if let Some(skipped) = throttle.due(Duration::from_secs(10)) {
                    tracing::warn!(skipped, "status endpoint: accepting a connection: {e}; backing off");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
            // A connection reset before it was accepted, and the like: the next one.
            Err(_) => continue,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            // At the cap: closed at once.
            drop(sock);
            continue;
        };
        let engine = engine.clone();
        let token = token.clone();
        tokio::spawn(tokio::time::timeout(REQUEST_TIMEOUT, async move {
            let _permit = permit;
            let mut buf = vec![0u8; 4096];
            let mut n = 0;
            // Read up to the end of the request head (or 4 KiB, or 5 s).
            let read = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while n < buf.len() {
                    match sock.read(&mut buf[n..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => {
                            n += k;
                            if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                                break;
                            }
                        }
                    }
                }
            })
            .await;
            if read.is_err() {
                return;
            }
            let head = String::from_utf8_lossy(&buf[..n]);
            let mut parts = head.split_whitespace();
            let whole_ids = token.is_some();
            let reply = match (parts.next(), parts.next()) {
                _ if token.as_ref().is_some_and(|t| !authorized(&head, t)) => {
                    response("401 Unauthorized", "text/plain", "this daemon requires its token: Authorization: Bearer <token>\n")
                }
                (Some("GET"), Some("/status")) => {
                    let body = serde_json::to_string_pretty(&status_json(&engine, whole_ids)).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
                    response("200 OK", "application/json", &body)
                }
                (Some("GET"), Some("/metrics")) => response("200 OK", "text/plain; version=0.0.4", &engine.metrics_text()),
                (Some("GET"), Some("/timeline")) => {
                    let body: String = engine
                        .timeline_events()
                        .into_iter()
                        .map(|mut e| {
                            e.job = shown_id(&e.job, whole_ids);
                            e
                        })
                        .filter_map(|e| serde_json::to_string(&e).ok())
                        .map(|l| l + "\n")
                        .collect();
                    response("200 OK", "application/x-ndjson", &body)
                }
                (Some("GET"), Some(_)) => response("404 Not Found", "text/plain", "GET /status, /metrics or /timeline\n"),
                _ => response("405 Method Not Allowed", "text/plain", "GET only\n"),
            };
            let _ = sock.write_all(reply.as_bytes()).await;
            let _ = sock.shutdown().await;
        }));
    }
}
