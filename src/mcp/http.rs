//! `toolhost mcp --http`: the server over MCP's streamable HTTP transport, at `/mcp`. The SDK's
//! `StreamableHttpService` speaks the transport (sessions, the event streams, DELETE); hyper serves
//! it on each connection; in front of it toolhost checks what the SDK leaves to the embedder.
//!
//! - **Origin** (the spec's defence against DNS rebinding): a request whose `Origin` is present
//!   and is not the server's own loopback origin (or one allowed with `--http-allow-origin`) gets
//!   403. A request without one (not from a browser) passes.
//! - **Bearer token**, when one is set: `Authorization: Bearer TOKEN`, compared in constant time;
//!   otherwise 401 with `WWW-Authenticate: Bearer`. Without a token the server only binds a
//!   loopback address ([`HttpOptions::new`]).
//! - **Every message answered**, as over standard input ([`super::wire`]): a body that is not
//!   JSON, not one JSON-RPC message, or of the wrong shape gets a JSON-RPC error (400 when it has
//!   no id); a body over [`MAX_MESSAGE_BYTES`] gets 413; a `tools/call` reaches the handler with its
//!   arguments as the text the client sent, so the call path judges them as it judges any caller's.
//!
//! Every session is served by the one host (one warm worker, one search index); calls from all of
//! them take turns at it, in the order they arrive.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE, ORIGIN, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use rmcp::model::{ErrorCode, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::server::McpServer;
use super::watch::{Listeners, ToolWatch};
use super::wire::{self, Inbound, RawArguments, MAX_MESSAGE_BYTES};
use crate::error::{Error, Result};

/// The path the server answers on.
pub const PATH: &str = "/mcp";

type Body = BoxBody<Bytes, Infallible>;

/// How `toolhost mcp --http` serves: where, with which token, for which other origins.
#[derive(Clone)]
pub struct HttpOptions {
    address: SocketAddr,
    token: Option<String>,
    origins: Vec<String>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never in a log.
        f.debug_struct("HttpOptions")
            .field("address", &self.address)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("origins", &self.origins)
            .finish()
    }
}

impl HttpOptions {
    /// Serving on `address` (port 0: any free port), requiring `token` as a bearer token when
    /// given, and letting browser pages from `origins` (`http://host:port`) in beside the server's
    /// own.
    ///
    /// # Errors
    /// A `config` error when `address` is not a loopback address and no token is set (anyone who
    /// can reach it could run the tools), when the token is empty, or when an origin is not
    /// `scheme://host[:port]`.
    pub fn new(address: SocketAddr, token: Option<String>, origins: Vec<String>) -> Result<HttpOptions> {
        if token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::config("the bearer token for --http is empty"));
        }
        if !address.ip().is_loopback() && token.is_none() {
            return Err(Error::config(format!(
                "refusing to serve MCP on {address}, which is not a loopback address, without a bearer token: \
                 anyone who can reach it could run this workspace's tools; bind 127.0.0.1 (the default), or set \
                 a token with --http-token-env NAME"
            )));
        }
        for origin in &origins {
            if parse_origin(origin).is_none() {
                return Err(Error::config(format!(
                    "--http-allow-origin {origin:?} is not an origin; write it as scheme://host:port \
                     (http://localhost:6274)"
                )));
            }
        }
        Ok(HttpOptions { address, token, origins })
    }

    /// The address to bind.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

/// An origin, normalized: scheme and host in lower case, the host without IPv6 brackets, the
/// port explicit.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

fn parse_origin(text: &str) -> Option<Origin> {
    let uri: hyper::Uri = text.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let port = uri.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() || host.is_empty() {
        return None;
    }
    Some(Origin { scheme, host, port })
}

/// What stands in front of the SDK's service.
struct Front {
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    /// The SHA-256 of the token: digests of equal length are compared in constant time.
    token: Option<[u8; 32]>,
    origins: Vec<Origin>,
}

/// The origins a page of this server's own would have, and the ones allowed besides.
fn allowed_origins(bound: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = bound.port();
    let mut origins =
        vec![format!("http://127.0.0.1:{port}"), format!("http://localhost:{port}"), format!("http://[::1]:{port}")];
    let ip = bound.ip();
    if !ip.is_loopback() && !ip.is_unspecified() {
        origins.push(match ip {
            IpAddr::V4(v4) => format!("http://{v4}:{port}"),
            IpAddr::V6(v6) => format!("http://[{v6}]:{port}"),
        });
    }
    origins.extend(extra.iter().cloned());
    origins
}

impl Front {
    fn new(server: McpServer, options: &HttpOptions, bound: SocketAddr) -> Front {
        let origins = allowed_origins(bound, &options.origins);
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins.clone())
            .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
        let ip = bound.ip();
        if ip.is_unspecified() {
            // Any name may reach it; the token (required off loopback) is what keeps others out.
            config = config.disable_allowed_hosts();
        } else if !ip.is_loopback() {
            config =
                config.with_allowed_hosts(["localhost".to_string(), "127.0.0.1".into(), "::1".into(), ip.to_string()]);
        }
        let mcp = StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
        Front {
            mcp,
            token: options.token.as_ref().map(|token| Sha256::digest(token.as_bytes()).into()),
            origins: origins.iter().filter_map(|o| parse_origin(o)).collect(),
        }
    }

    /// A present `Origin` that is not allowed.
    fn origin_refused(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        let origin = headers.get(ORIGIN)?;
        let allowed = origin.to_str().ok().and_then(parse_origin).is_some_and(|o| self.origins.contains(&o));
        (!allowed).then(|| {
            refusal(
                StatusCode::FORBIDDEN,
                format!(
                    "Forbidden: the Origin {:?} is not this server's; start toolhost with --http-allow-origin ORIGIN \
                     to let a page from it in",
                    String::from_utf8_lossy(origin.as_bytes())
                ),
            )
        })
    }

    /// A missing or wrong bearer token, when one is required.
    fn token_refused(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        let expected = self.token.as_ref()?;
        let given = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        let (challenge, why) = match given {
            None => ("Bearer", "Unauthorized: this server needs `Authorization: Bearer TOKEN`"),
            Some(token) if bool::from(Sha256::digest(token.as_bytes()).as_slice().ct_eq(expected)) => return None,
            Some(_) => (r#"Bearer error="invalid_token""#, "Unauthorized: the bearer token is not this server's"),
        };
        let mut response = refusal(StatusCode::UNAUTHORIZED, why.to_string());
        response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        Some(response)
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != PATH {
            return plain(StatusCode::NOT_FOUND, format!("Not found: MCP is served at {PATH}"));
        }
        if let Some(refused) = self.origin_refused(request.headers()).or_else(|| self.token_refused(request.headers()))
        {
            return refused;
        }
        if request.method() != Method::POST {
            return self.mcp.handle(request).await;
        }
        let (mut parts, body) = request.into_parts();
        let bytes = match Limited::new(body, MAX_MESSAGE_BYTES).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "Invalid request: the message is over the limit of {MAX_MESSAGE_BYTES} bytes, and was not read"
                    ),
                );
            }
            Err(e) => {
                return refusal(StatusCode::BAD_REQUEST, format!("Invalid request: the body could not be read: {e}"))
            }
        };
        let body = match wire::classify(&bytes) {
            Inbound::Nothing => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    "Invalid request: the body holds no JSON-RPC 2.0 message".to_string(),
                );
            }
            Inbound::Refused(error) => {
                // An error with an id answers its request; one without answers the body.
                let status = match &error {
                    JsonRpcMessage::Error(e) if e.id.is_some() => StatusCode::OK,
                    _ => StatusCode::BAD_REQUEST,
                };
                return json(status, &error);
            }
            Inbound::Request { message, is_call: true, .. } => {
                // The SDK reads the call without its arguments; the handler finds them, as sent, in
                // the request's parts.
                if let JsonRpcMessage::Request(call) = &message {
                    if let Some(raw) = call.request.extensions().get::<RawArguments>() {
                        parts.extensions.insert(raw.clone());
                    }
                }
                match serde_json::to_vec(&message) {
                    Ok(text) => Bytes::from(text),
                    Err(e) => return refusal(StatusCode::INTERNAL_SERVER_ERROR, format!("Internal error: {e}")),
                }
            }
            Inbound::Request { .. } | Inbound::Cancel(_) | Inbound::Other(_) => bytes,
        };
        self.mcp.handle(Request::from_parts(parts, Full::new(body))).await
    }
}

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response
}

fn json(status: StatusCode, message: &ServerJsonRpcMessage) -> Response<Body> {
    let text = serde_json::to_vec(message).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An HTTP error with a JSON-RPC error (without an id) as its body, as the spec allows.
fn refusal(status: StatusCode, message: String) -> Response<Body> {
    let code = if status == StatusCode::INTERNAL_SERVER_ERROR {
        ErrorCode::INTERNAL_ERROR
    } else {
        ErrorCode::INVALID_REQUEST
    };
    json(status, &wire::error(None, code, message))
}

impl McpServer {
    /// Serves MCP over streamable HTTP as `options` say, every session on this one host, until the
    /// process ends. `bound` is told the URL once the server listens (port 0 becomes a free port).
    ///
    /// # Errors
    /// When the runtime cannot start or the address cannot be bound.
    pub fn run_http(mut self, options: &HttpOptions, bound: impl FnOnce(&str)) -> Result<()> {
        let runtime = runtime()?;
        let listeners = Listeners::default();
        self.sessions = Some(listeners.clone());
        self.turns = Some(Arc::new(tokio::sync::Semaphore::new(1)));
        self.pipe = super::in_flight::WorkerPipe::default();
        let _watch =
            self.watch_tools.then(|| ToolWatch::start(self.handle.clone(), listeners, runtime.handle().clone()));
        let outcome = runtime.block_on(async {
            let address = options.address();
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| Error::config(format!("cannot serve MCP on {address}: {e}")))?;
            let local = listener
                .local_addr()
                .map_err(|e| Error::tool_failed(format!("cannot read the address served: {e}")))?;
            bound(&format!("http://{local}{}", PATH));
            serve(self, options, listener).await
        });
        runtime.shutdown_background();
        outcome
    }
}

/// The runtime the HTTP server runs on: two workers for the sessions' connections.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("toolhost-mcp-http")
        .enable_all()
        .build()
        .map_err(|e| Error::tool_failed(format!("cannot start the MCP server runtime: {e}")))
}

/// Serves `server` on `listener` (bound to `bound`) until the process ends.
pub(crate) async fn serve(server: McpServer, options: &HttpOptions, listener: tokio::net::TcpListener) -> Result<()> {
    let bound = listener.local_addr().map_err(|e| Error::tool_failed(format!("cannot read the bound address: {e}")))?;
    let front = Arc::new(Front::new(server, options, bound));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: wait a moment rather than spin.
                eprintln!("toolhost: an HTTP connection was not accepted: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        // Replies are small and written in pieces (headers, then events): without this, each
        // waits out the client's delayed acknowledgement.
        let _ = stream.set_nodelay(true);
        let front = Arc::clone(&front);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let front = Arc::clone(&front);
                async move { Ok::<_, Infallible>(front.answer(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_by_scheme_host_and_port() {
        let own = parse_origin("http://localhost:8080").unwrap();
        assert_eq!(parse_origin("HTTP://LocalHost:8080/"), Some(own));
        assert_eq!(parse_origin("http://[::1]:9").unwrap().host, "::1");
        assert_eq!(parse_origin("https://example.com").unwrap().port, 443);
        assert_ne!(parse_origin("http://localhost:8081"), parse_origin("http://localhost:8080"));
        for bad in ["null", "localhost", "http://a:1/path", ""] {
            assert_eq!(parse_origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_non_loopback_address_needs_a_token() {
        let open: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let error = HttpOptions::new(open, None, Vec::new()).unwrap_err();
        assert!(error.message().contains("not a loopback address, without a bearer token"), "{}", error.message());
        assert!(HttpOptions::new(open, Some("s3cret".into()), Vec::new()).is_ok());
        assert!(HttpOptions::new("127.0.0.1:0".parse().unwrap(), None, Vec::new()).is_ok());
        assert!(HttpOptions::new("[::1]:0".parse().unwrap(), None, vec!["nope".into()]).is_err());
        assert!(format!("{:?}", HttpOptions::new(open, Some("s3cret".into()), Vec::new()).unwrap()).contains("(set)"));
    }
}
