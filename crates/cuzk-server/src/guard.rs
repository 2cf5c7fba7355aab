//! Every call's admission and refusal, in one tower layer around the gRPC service: the
//! daemon's token checked before any handler runs (UNAUTHENTICATED without it), and
//! every refusal — a handler's, the decoder's (crate::codec), tonic's own — bounded,
//! without server paths and logged, rate-limited (crate::rejection), in the
//! trailers-only response that carries it (every RPC here is unary, so an error's
//! status travels in the response's headers). The handlers only say what is wrong.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::{Code, Status};

use crate::access::AccessToken;
use crate::rejection::Rejections;

/// The layer: with a token, every call must carry it (`authorization: Bearer <token>`);
/// `message_limit` is the service's decoding limit, named in an oversized request's
/// refusal.
#[derive(Clone, Default)]
pub struct GuardLayer {
    token: Option<Arc<AccessToken>>,
    rejections: Arc<Rejections>,
    message_limit: usize,
}

impl GuardLayer {
    pub fn new(token: Option<Arc<AccessToken>>, message_limit: usize) -> Self {
        GuardLayer { token, rejections: Arc::default(), message_limit }
    }
}

impl<S> tower::Layer<S> for GuardLayer {
    type Service = Guard<S>;
    fn layer(&self, inner: S) -> Guard<S> {
        Guard { inner, token: self.token.clone(), rejections: self.rejections.clone(), message_limit: self.message_limit }
    }
}

#[derive(Clone)]
pub struct Guard<S> {
    inner: S,
    token: Option<Arc<AccessToken>>,
    rejections: Arc<Rejections>,
    message_limit: usize,
}

impl<S, ReqB, ResB> tower::Service<http::Request<ReqB>> for Guard<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Send + 'static,
    ResB: Default + Send + 'static,
{
    type Response = http::Response<ResB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        // "/cuzk.v1.ProvingEngine/SubmitProof" → "SubmitProof", for the log.
        let method = req.uri().path().rsplit('/').next().unwrap_or_default().to_string();
        if let Some(t) = &self.token {
            if !t.admits(req.headers().get("authorization").map(|v| v.as_bytes())) {
                let status = self.rejections.refuse(
                    &method,
                    Status::unauthenticated("this daemon requires its token: send `authorization: Bearer <token>` (daemon.auth_token_file)"),
                );
                return Box::pin(async move { Ok(status.into_http()) });
            }
        }
        // The service that was polled ready serves this call; its clone the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (rejections, limit) = (self.rejections.clone(), self.message_limit);
        Box::pin(async move {
            let mut response = inner.call(req).await?;
            refuse_in(&rejections, &method, limit, response.headers_mut());
            Ok(response)
        })
    }
}

/// A trailers-only response's error status, refused: bounded, without paths, logged;
/// tonic's OUT_OF_RANGE for a message over the decoding limit told as gRPC's
/// RESOURCE_EXHAUSTED. A response without a status in its headers passes unchanged.
fn refuse_in(rejections: &Rejections, method: &str, message_limit: usize, headers: &mut http::HeaderMap) {
    let Some(status) = Status::from_header_map(headers) else { return };
    if status.code() == Code::Ok {
        return;
    }
    let status = if status.code() == Code::OutOfRange && status.message().contains("decoded message length too large") {
        Status::resource_exhausted(format!("request larger than the {} MiB message limit ({})", message_limit >> 20, status.message()))
    } else {
        status
    };
    let refused = rejections.refuse(method, status);
    headers.remove("grpc-status");
    headers.remove("grpc-message");
    headers.remove("grpc-status-details-bin");
    if refused.add_header(headers).is_err() {
        // A message no header can carry (never, after bounding): the code alone.
        headers.insert("grpc-status", http::HeaderValue::from(refused.code() as i32));
    }
}
