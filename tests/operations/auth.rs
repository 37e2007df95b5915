//! Authentication and roles: refused calls change nothing and reveal nothing.

use crate::ledger::signed;
use opledger_proto::v1::{CreateWithdrawalRequest, GetBalanceRequest};
use opledger_tests::{ALICE, Stack, authed, new_key, payload, reason};
use tonic::Request;

#[tokio::test]
async fn unauthenticated_wrong_secret_and_wrong_role_are_refused() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let request = || CreateWithdrawalRequest {
        idempotency_key: new_key(),
        payload: Some(payload("1", ALICE)),
    };

    let err = client
        .create_withdrawal(Request::new(request()))
        .await
        .expect_err("no key");
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    assert_eq!(reason(&err), "CREDENTIALS_MISSING");

    // Right key id, wrong secret.
    let forged = format!(
        "{}{}",
        &acme.client[..acme.client.len() - 1],
        if acme.client.ends_with('0') { '1' } else { '0' }
    );
    for token in [forged.as_str(), "olk_garbage", "Basic abc"] {
        let err = client
            .create_withdrawal(authed(token, request()))
            .await
            .expect_err("bad key");
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
        assert_eq!(reason(&err), "CREDENTIALS_INVALID");
        assert!(!err.message().contains(token));
    }

    // An approver may not create withdrawals; a client may not credit accounts, even carrying
    // an operator's valid statement over exactly its request (the role is checked first).
    let err = client
        .create_withdrawal(authed(&acme.approver, request()))
        .await
        .expect_err("role");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");
    let err = client
        .credit_account(authed(
            &acme.client,
            signed(&acme, &new_key(), "treasury", "ETH", 5)?,
        ))
        .await
        .expect_err("role");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");

    // A revoked key stops working (new authenticator cache: a fresh key id was never cached).
    let issued = stack
        .admin
        .create_api_key(acme.id, opledger_store::keys::Role::Client, "short-lived")
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    stack
        .admin
        .revoke_api_key(&issued.key_id)
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    let err = client
        .create_withdrawal(authed(issued.token.as_str(), request()))
        .await
        .expect_err("revoked");
    assert_eq!(reason(&err), "CREDENTIALS_INVALID");

    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 0);
    assert_eq!(stack.count("credit_proposals", acme.id).await?, 0);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (1000, 0));
    Ok(())
}

#[tokio::test]
async fn a_tenant_cannot_read_another_tenants_balance() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let globex = stack.tenant("globex").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let ask = || GetBalanceRequest {
        account: "treasury".into(),
        asset: "ETH".into(),
    };
    let own = client
        .get_balance(authed(&acme.client, ask()))
        .await?
        .into_inner();
    assert_eq!((own.available.as_str(), own.held.as_str()), ("1000", "0"));
    let err = client
        .get_balance(authed(&globex.client, ask()))
        .await
        .expect_err("other tenant");
    assert_eq!(err.code(), tonic::Code::NotFound);
    Ok(())
}

#[tokio::test]
async fn health_and_reflection_are_served() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", stack.addr))?
        .connect()
        .await?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "opledger.v1.OperationsService".into(),
        })
        .await?
        .into_inner();
    assert_eq!(
        status.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await?
        .into_inner();
    let first = responses.message().await?.and_then(|r| r.message_response);
    let Some(MessageResponse::ListServicesResponse(list)) = first else {
        anyhow::bail!("reflection did not list services: {first:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    // Exactly what this port serves: no other opledger API (a client trusting the list must
    // never meet UNIMPLEMENTED).
    assert_eq!(
        names,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "opledger.v1.OperationsService"
        ]
    );
    Ok(())
}

/// A codec that sends its bytes as they are (the request message need not be protobuf) and
/// reads answers as raw bytes.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut as _;
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf as _;
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

#[tokio::test]
async fn a_request_that_does_not_decode_is_invalid_argument_before_authentication()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", stack.addr))?
        .connect()
        .await?;
    let mut grpc = tonic::client::Grpc::new(channel);
    // The bytes (a string field holding invalid UTF-8), a wrong wire type, a truncated
    // length-delimited field; to an API method and to health, without credentials.
    let cases: [&[u8]; 3] = [
        &[0x0a, 0x02, 0xff, 0xfe],
        &[0x0d, 0x01],
        &[0x0a, 0x10, 0x61],
    ];
    for path in [
        "/opledger.v1.OperationsService/GetBalance",
        "/opledger.v1.OperationsService/CreateWithdrawal",
        "/grpc.health.v1.Health/Check",
    ] {
        for bytes in cases {
            grpc.ready().await?;
            let answer = grpc
                .unary(
                    tonic::Request::new(bytes.to_vec()),
                    tonic::codegen::http::uri::PathAndQuery::from_static(path),
                    RawCodec,
                )
                .await;
            let err = answer.expect_err("malformed bytes were accepted");
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{path}: {err:?}");
            assert_eq!(reason(&err), "MALFORMED_REQUEST", "{path}");
        }
    }
    Ok(())
}
