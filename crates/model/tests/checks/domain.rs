//! The domain's decisions, with every fault the model has at once.

use opledger_model::properties::{REACH_ESCALATED_NO_VERDICT, REACH_NONCE_MOVED};
use opledger_model::{Config, Endpoint, Rotation, Until, check};

use crate::assert_holds;

#[test]
fn every_property_holds_with_a_liar_a_laggard_reorgs_a_rotation_crashes_and_webhooks() {
    // The default configuration, with a second reorganization (the variants below keep one).
    let config = Config {
        reorgs: 2,
        ..Config::default()
    };
    let report = check(
        "domain decisions, default configuration, two reorganizations",
        config,
        Until::Exhausted,
    );
    assert_holds(&report);
}

#[test]
fn a_dropped_retired_key_ends_escalated_never_in_a_second_payment() {
    let config = Config {
        rotation: Rotation::MayDropRetiredKey,
        ..Config::default()
    };
    let report = check(
        "domain decisions, retired key may be dropped",
        config,
        Until::Exhausted,
    );
    assert_holds(&report);
    assert!(report.discoveries.contains_key(REACH_ESCALATED_NO_VERDICT));
}

#[test]
fn a_compromised_key_is_escalated_to_security_and_never_released() {
    let config = Config {
        compromised_key: true,
        ..Config::default()
    };
    let report = check(
        "domain decisions, compromised key",
        config,
        Until::Exhausted,
    );
    assert_holds(&report);
    assert!(report.discoveries.contains_key(REACH_NONCE_MOVED));
}

#[test]
fn two_endpoints_with_a_quorum_of_two_and_one_of_them_faulty() {
    for faulty in [Endpoint::Lagging { blocks: 2 }, Endpoint::Liar] {
        // Liveness does not depend on the endpoints here (fair continuations read honest ones):
        // the default check covers it.
        let config = Config {
            endpoints: vec![Endpoint::Honest, faulty],
            liveness: false,
            ..Config::default()
        };
        let report = check(
            &format!("domain decisions, honest and {faulty:?}, quorum 2"),
            config,
            Until::Exhausted,
        );
        assert_holds(&report);
    }
}
