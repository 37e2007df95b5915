//! Connections to the services and authenticated requests.

use crate::cli::{ApiKey, Global};
use crate::error::Failure;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::inbox_service_client::InboxServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_proto::v1::operator_service_client::OperatorServiceClient;
use std::time::Duration;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

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
}

impl Service {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Operations => "operations",
            Service::Approvals => "approvals",
            Service::Reconciler => "reconciler",
            Service::Inbox => "inbox",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Service::Operations => "--operations",
            Service::Approvals => "--approvals",
            Service::Reconciler => "--reconciler",
            Service::Inbox => "--inbox",
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
        }
    }

    /// Connects to `service` (exit 3 when it cannot be reached within --timeout).
    pub async fn channel(&self, service: Service) -> Result<Channel, Failure> {
        let url = self.url(service);
        let endpoint = endpoint(service, url, self.timeout())?;
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

/// The endpoint for `url`: plain HTTP/2 (the services serve no TLS yet).
fn endpoint(service: Service, url: &str, timeout: Duration) -> Result<Endpoint, Failure> {
    let problem = |what: &str| Failure::usage(format!("{}: {what}", service.flag()));
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(problem("expected a URL like http://127.0.0.1:15051"));
    };
    if scheme != "http" {
        return Err(problem(
            "only http:// URLs are supported (the services serve plain gRPC; reach a TLS \
             deployment through a local tunnel or proxy)",
        ));
    }
    Ok(Endpoint::from_shared(url.to_owned())
        .map_err(|_| problem("not a valid URL"))?
        .connect_timeout(timeout)
        .timeout(timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_before_connecting() {
        let t = Duration::from_secs(1);
        assert!(endpoint(Service::Operations, "http://127.0.0.1:15051", t).is_ok());
        for bad in [
            "127.0.0.1:15051",
            "https://example.com",
            "http://exa mple:1",
        ] {
            let f = endpoint(Service::Inbox, bad, t).expect_err(bad);
            assert_eq!(f.exit_code(), 2, "{bad}");
            assert!(f.message.starts_with("--inbox: "), "{}", f.message);
        }
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
