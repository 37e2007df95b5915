//! The operator API: list dead letters, quarantines and UNHANDLED events; replay; resolve.

use opledger_proto::v1 as pb;
use opledger_tests::inbox::{ALL_TYPES, World, deposit, event_id, eventually, kyt, rows};
use opledger_tests::{authed, reason};
use std::time::Duration;

#[tokio::test]
async fn operators_list_replay_and_resolve_inbox_issues_and_every_action_is_logged()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, acme, ep, sender) = (&world.stack, &world.acme, &world.ep, &world.sender);
    let globex = world.stack.tenant("globex").await?;
    // A dead letter (unknown operation), a quarantine and an UNHANDLED event.
    let unknown_op = uuid::Uuid::now_v7().to_string();
    assert_eq!(
        sender
            .send(ep, &event_id(), &kyt(&unknown_op, "pass", "r1"))
            .await?
            .0,
        200
    );
    let id = event_id();
    assert_eq!(
        sender
            .send(ep, &id, &deposit("d1", "treasury", "ETH", "1"))
            .await?
            .0,
        200
    );
    assert_eq!(
        sender
            .send(ep, &id, &deposit("d1", "treasury", "ETH", "2"))
            .await?
            .0,
        200
    );
    assert_eq!(
        sender
            .send(ep, &event_id(), r#"{"type":"refund.created","data":{}}"#)
            .await?
            .0,
        200
    );
    eventually(Duration::from_secs(15), || async {
        Ok(world.rows("inbox_work", "AND status = 'DEAD'").await? == 1)
    })
    .await?;

    let mut api = world.inbox.operator().await?;
    let listed = api
        .list_inbox_issues(authed(
            &acme.operator,
            pb::ListInboxIssuesRequest { page_size: 0 },
        ))
        .await?
        .into_inner()
        .issues;
    let kinds: Vec<(i32, String)> = listed
        .iter()
        .map(|i| (i.kind, i.reason_code.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (
                pb::InboxIssueKind::DeadLetter as i32,
                "ATTEMPTS_EXHAUSTED".to_owned()
            ),
            (
                pb::InboxIssueKind::Quarantined as i32,
                "DIFFERENT_BODY".to_owned()
            ),
            (
                pb::InboxIssueKind::Unhandled as i32,
                "UNKNOWN_TYPE".to_owned()
            ),
        ]
    );
    assert_eq!(listed[0].owner, "payments-operations");
    assert_eq!(listed[0].attempts, 3);
    assert!(
        listed
            .iter()
            .all(|i| i.source == "chainwatch" && i.age_seconds >= 0)
    );

    // Other tenants and other roles see nothing of it.
    let other = api
        .list_inbox_issues(authed(
            &globex.operator,
            pb::ListInboxIssuesRequest { page_size: 0 },
        ))
        .await?
        .into_inner();
    assert!(other.issues.is_empty());
    let denied = api
        .list_inbox_issues(authed(
            &acme.client,
            pb::ListInboxIssuesRequest { page_size: 0 },
        ))
        .await
        .expect_err("clients are not operators");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    let foreign = api
        .replay_inbox_item(authed(
            &globex.operator,
            pb::ReplayInboxItemRequest {
                inbox_id: listed[0].inbox_id,
                reason: "x".to_owned(),
            },
        ))
        .await
        .expect_err("not globex's dead letter");
    assert_eq!(foreign.code(), tonic::Code::NotFound);
    let empty_reason = api
        .resolve_inbox_item(authed(
            &acme.operator,
            pb::ResolveInboxItemRequest {
                inbox_id: listed[1].inbox_id,
                reason: " ".to_owned(),
            },
        ))
        .await
        .expect_err("a reason is required");
    assert_eq!(reason(&empty_reason), "INVALID_FIELD");

    // Replay: the dead letter goes back to the processor with fresh attempts (and dies again,
    // since the operation still does not exist).
    api.replay_inbox_item(authed(
        &acme.operator,
        pb::ReplayInboxItemRequest {
            inbox_id: listed[0].inbox_id,
            reason: "upstream fixed".to_owned(),
        },
    ))
    .await?;
    eventually(Duration::from_secs(15), || async {
        Ok(rows(
            stack,
            "inbox_work",
            "AND status = 'DEAD' AND attempts = 3",
            acme.id,
        )
        .await?
            == 1
            && world.rows("inbox_actions", "AND action = 'REPLAY'").await? == 1)
    })
    .await?;

    // Resolve all three: nothing is deleted, each stops paging, each action is logged.
    for issue in &listed {
        api.resolve_inbox_item(authed(
            &acme.operator,
            pb::ResolveInboxItemRequest {
                inbox_id: issue.inbox_id,
                reason: "checked with the provider".to_owned(),
            },
        ))
        .await?;
    }
    let after = api
        .list_inbox_issues(authed(
            &acme.operator,
            pb::ListInboxIssuesRequest { page_size: 0 },
        ))
        .await?
        .into_inner();
    assert!(after.issues.is_empty());
    assert_eq!(
        world
            .rows("inbox_actions", "AND action = 'RESOLVE'")
            .await?,
        3
    );
    assert_eq!(world.rows("inbox_events", "").await?, 3);
    assert_eq!(
        world.inbox.metric("opledger_inbox_dead_letters").await?,
        0.0
    );
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_open_quarantines")
            .await?,
        0.0
    );
    assert_eq!(
        world.inbox.metric("opledger_inbox_open_unhandled").await?,
        0.0
    );
    let again = api
        .resolve_inbox_item(authed(
            &acme.operator,
            pb::ResolveInboxItemRequest {
                inbox_id: listed[0].inbox_id,
                reason: "twice".to_owned(),
            },
        ))
        .await
        .expect_err("already resolved");
    assert_eq!(again.code(), tonic::Code::NotFound);
    // Every gRPC call is counted by method and status code on the service's /metrics.
    let resolved = "opledger_grpc_requests_total{service=\"opledger.v1.InboxService\",\
        method=\"/opledger.v1.InboxService/ResolveInboxItem\",code=\"OK\"}";
    assert_eq!(world.inbox.metric(resolved).await?, 3.0);
    let missing = "opledger_grpc_requests_total{service=\"opledger.v1.InboxService\",\
        method=\"/opledger.v1.InboxService/ResolveInboxItem\",code=\"NOT_FOUND\"}";
    assert_eq!(world.inbox.metric(missing).await?, 1.0);
    world.stop().await
}
