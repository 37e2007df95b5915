//! Connections to the services and authenticated requests: `https://` trusting only the CA of
//! `--ca-file`, clear-text `http://` only to a loopback host unless `--allow-clear-text`.

use crate::cli::{ApiKey, Global};
use crate::error::Failure;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::custodian_operator_service_client::CustodianOperatorServiceClient;
use opledger_proto::v1::inbox_service_client::InboxServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_proto::v1::operator_service_client::OperatorServiceClient;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// The services opctl talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// OperationsService.
    Operations,
    /// ApprovalsService.
    Approvals,
    /// The reconciler's OperatorService.
    Reconciler,
    /// InboxService.
    Inbox,
    /// The custodian executor's CustodianOperatorService.
    Custodian,
}

impl Service {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Operations => "operations",
            Service::Approvals => "approvals",
            Service::Reconciler => "reconciler",
            Service::Inbox => "inbox",
            Service::Custodian => "custodian executor",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Service::Operations => "--operations",
            Service::Approvals => "--approvals",
            Service::Reconciler => "--reconciler",
            Service::Inbox => "--inbox",
            Service::Custodian => "--custodian",
        }
    }
}

/// Addresses, the API key and the timeout of one invocation.
#[derive(Debug, Clone)]
pub struct Session {
    global: Global,
    authorization: Option<MetadataValue<tonic::metadata::Ascii>>,
    traceparent: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl Session {
    /// A session for these flags; fails (usage) when the API key cannot be a header value.
    pub fn new(global: &Global) -> Result<Session, Failure> {
        let authorization = global
            .api_key
            .as_ref()
            .filter(|key| !key.expose().is_empty())
            .map(bearer)
            .transpose()?;
        Ok(Session {
            global: global.clone(),
            authorization,
            traceparent: None,
        })
    }

    /// The same session with another API key.
    pub fn with_key(&self, key: &crate::cli::ApiKey) -> Result<Session, Failure> {
        let mut global = self.global.clone();
        global.api_key = Some(key.clone());
        let mut session = Session::new(&global)?;
        session.traceparent = self.traceparent.clone();
        Ok(session)
    }

    /// The same session, sending this W3C `traceparent` with every call.
    pub fn with_traceparent(mut self, traceparent: &str) -> Result<Session, Failure> {
        self.traceparent = Some(
            traceparent
                .parse()
                .map_err(|_| Failure::usage("traceparent is not a header value"))?,
        );
        Ok(self)
    }

    /// The per-call timeout (`--timeout`).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.global.timeout)
    }

    /// `message` with the `authorization` metadata, if a key was given.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        if let Some(value) = &self.traceparent {
            request.metadata_mut().insert("traceparent", value.clone());
        }
        request
    }

    fn url(&self, service: Service) -> &str {
        match service {
            Service::Operations => &self.global.operations,
            Service::Approvals => &self.global.approvals,
            Service::Reconciler => &self.global.reconciler,
            Service::Inbox => &self.global.inbox,
            Service::Custodian => &self.global.custodian,
        }
    }

    /// Connects to `service` (exit 3 when it cannot be reached within --timeout).
    pub async fn channel(&self, service: Service) -> Result<Channel, Failure> {
        let url = self.url(service);
        let transport = Transport {
            ca_file: self.global.ca_file.as_deref(),
            allow_clear_text: self.global.allow_clear_text,
        };
        let endpoint = endpoint(service, url, self.timeout(), &transport)?;
        endpoint
            .connect()
            .await
            .map_err(|e| Failure::unreachable(service.name(), url, &e))
    }

    /// An OperationsService client.
    pub async fn operations(&self) -> Result<OperationsServiceClient<Channel>, Failure> {
        Ok(OperationsServiceClient::new(
            self.channel(Service::Operations).await?,
        ))
    }

    /// An ApprovalsService client.
    pub async fn approvals(&self) -> Result<ApprovalsServiceClient<Channel>, Failure> {
        Ok(ApprovalsServiceClient::new(
            self.channel(Service::Approvals).await?,
        ))
    }

    /// The reconciler's OperatorService client.
    pub async fn reconciler(&self) -> Result<OperatorServiceClient<Channel>, Failure> {
        Ok(OperatorServiceClient::new(
            self.channel(Service::Reconciler).await?,
        ))
    }

    /// An InboxService client.
    pub async fn inbox(&self) -> Result<InboxServiceClient<Channel>, Failure> {
        Ok(InboxServiceClient::new(self.channel(Service::Inbox).await?))
    }

    /// The custodian executor's CustodianOperatorService client.
    pub async fn custodian(&self) -> Result<CustodianOperatorServiceClient<Channel>, Failure> {
        Ok(CustodianOperatorServiceClient::new(
            self.channel(Service::Custodian).await?,
        ))
    }
}

/// `Bearer <key>` as a sensitive header value; the key is never part of the error.
fn bearer(key: &ApiKey) -> Result<MetadataValue<tonic::metadata::Ascii>, Failure> {
    let mut value: MetadataValue<tonic::metadata::Ascii> =
        format!("Bearer {}", key.expose()).parse().map_err(|_| {
            Failure::usage("--api-key / OPCTL_API_KEY holds characters a header cannot carry")
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// How opctl may reach a service: `--ca-file` and `--allow-clear-text`.
#[derive(Debug, Clone, Copy, Default)]
struct Transport<'a> {
    /// The CA trusted alone for `https://` URLs.
    ca_file: Option<&'a Path>,
    /// Accept `http://` to a host that is not loopback.
    allow_clear_text: bool,
}

/// True when `host` (as a URI gives it, IPv6 in brackets) is a loopback address or `localhost`.
fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

/// The endpoint for `url`, checked before anything connects: `https://` with the CA of
/// `--ca-file` as its only root, `http://` only to a loopback host or with `--allow-clear-text`.
/// Messages never quote the URL (it may carry credentials).
fn endpoint(
    service: Service,
    url: &str,
    timeout: Duration,
    transport: &Transport<'_>,
) -> Result<Endpoint, Failure> {
    let problem = |what: &str| Failure::usage(format!("{}: {what}", service.flag()));
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(problem("expected a URL like https://ops.example:15051"));
    };
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|_| problem("not a valid URL"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let Some(host) = endpoint.uri().host() else {
        return Err(problem("the URL names no host"));
    };
    match scheme {
        "http" if is_loopback(host) || transport.allow_clear_text => Ok(endpoint),
        "http" => Err(Failure::usage_because(
            "CLEAR_TEXT_NOT_ALLOWED",
            format!(
                "{}: http:// to a host that is not loopback is refused: in clear text the API key \
                 can be read and every answer, what you approve included, changed on the way; \
                 use https:// with --ca-file, or --allow-clear-text on a private segment you \
                 trust",
                service.flag()
            ),
        )),
        "https" => {
            let Some(ca_file) = transport.ca_file else {
                return Err(problem(
                    "https:// needs --ca-file (or OPCTL_CA_FILE): the PEM certificate of the CA \
                     that issued the service's certificate, trusted alone",
                ));
            };
            let pem = std::fs::read(ca_file).map_err(|e| {
                Failure::usage(format!("--ca-file: cannot read {}: {e}", ca_file.display()))
            })?;
            if !pem
                .windows(CERTIFICATE_PEM.len())
                .any(|w| w == CERTIFICATE_PEM)
            {
                return Err(Failure::usage(format!(
                    "--ca-file: {} holds no PEM certificate",
                    ca_file.display()
                )));
            }
            // Only this CA: no system or bundled roots are added.
            let tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(pem))
                .timeout(timeout);
            endpoint.tls_config(tls).map_err(|e| {
                Failure::usage(format!(
                    "--ca-file: {} is not a usable CA certificate: {}",
                    ca_file.display(),
                    crate::error::error_chain(&e)
                ))
            })
        }
        _ => Err(problem(
            "expected an https:// URL (or http:// to a loopback host)",
        )),
    }
}

/// The line that opens a PEM certificate.
const CERTIFICATE_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----";

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(1);

    #[test]
    fn urls_are_checked_before_connecting() {
        let plain = Transport::default();
        for ok in [
            "http://127.0.0.1:15051",
            "http://127.8.9.10:1",
            "http://[::1]:15051",
            "http://localhost:15051",
            "http://LOCALHOST:1/",
        ] {
            assert!(endpoint(Service::Operations, ok, T, &plain).is_ok(), "{ok}");
        }
        for bad in [
            "127.0.0.1:15051",
            "https://example.com",
            "http://exa mple:1",
            "ftp://127.0.0.1:1",
        ] {
            let f = endpoint(Service::Inbox, bad, T, &plain).expect_err(bad);
            assert_eq!(f.exit_code(), 2, "{bad}");
            assert!(f.message.starts_with("--inbox: "), "{}", f.message);
        }
    }

    /// A man in the middle on the network between an approver and the operations service.
    #[test]
    fn clear_text_off_loopback_is_refused_unless_allowed() {
        for url in [
            "http://10.0.0.5:15051",
            "http://ops.example:15051",
            "http://127.0.0.1.example:15051",
            "http://[::ffff:127.0.0.1]:1",
            "http://0.0.0.0:15051",
            "http://user:secret@ops.example:1",
        ] {
            let f = endpoint(Service::Operations, url, T, &Transport::default()).expect_err(url);
            assert_eq!(
                (f.reason.as_str(), f.exit_code()),
                ("CLEAR_TEXT_NOT_ALLOWED", 2),
                "{url}"
            );
            assert!(
                f.message.starts_with("--operations: http:// "),
                "{}",
                f.message
            );
            assert!(!f.message.contains("secret") && !f.message.contains("example"));
            let allowed = Transport {
                allow_clear_text: true,
                ..Transport::default()
            };
            assert!(
                endpoint(Service::Operations, url, T, &allowed).is_ok(),
                "{url}"
            );
        }
    }

    #[test]
    fn https_needs_a_readable_pem_ca_file() {
        let f = endpoint(
            Service::Approvals,
            "https://approvals.example:15052",
            T,
            &Transport::default(),
        )
        .expect_err("no CA");
        assert_eq!(f.exit_code(), 2);
        assert!(f.message.contains("--ca-file"), "{}", f.message);
        let dir = std::env::temp_dir().join(format!("opctl-ca-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = dir.join("missing.pem");
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").expect("write");
        for path in [&missing, &not_pem] {
            let with = Transport {
                ca_file: Some(path),
                allow_clear_text: false,
            };
            let f = endpoint(Service::Approvals, "https://approvals.example:1", T, &with)
                .expect_err("unusable CA file");
            assert_eq!(f.exit_code(), 2);
            assert!(f.message.starts_with("--ca-file: "), "{}", f.message);
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn the_bearer_header_is_sensitive_and_errors_do_not_quote_the_key() {
        let value = bearer(&test_key("olk_a_b")).expect("ascii");
        assert!(value.is_sensitive());
        assert_eq!(value.to_str().ok(), Some("Bearer olk_a_b"));
        let f = bearer(&test_key("olk_\nsecret")).expect_err("newline");
        assert_eq!(f.exit_code(), 2);
        assert!(!f.message.contains("secret"));
    }

    fn test_key(text: &str) -> ApiKey {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "opctl",
            "--api-key",
            text,
            "get",
            "0190c4c8-4b5d-7c6e-8f90-123456789abc",
        ])
        .expect("parses");
        cli.global.api_key.expect("given")
    }
}
