//! The settings' checks: finality named once, the depth floor and its opt-in, the warnings at
//! start, the counter.

use super::*;

fn settings(confirmations: Option<u64>, finalized: bool) -> NetworkEvidence {
    NetworkEvidence {
        urls: vec!["http://127.0.0.1:1".to_owned()],
        chain_id: 1,
        quorum: 1,
        confirmations,
        finalized,
        min_confirmations: DEFAULT_MIN_CONFIRMATIONS,
        max_lag_blocks: 8,
        allow_shallow_finality: false,
        insecure_clear_text: false,
    }
}

/// `settings` at `confirmations` with the development opt-in set.
fn shallow(confirmations: u64) -> NetworkEvidence {
    NetworkEvidence {
        allow_shallow_finality: true,
        ..settings(Some(confirmations), false)
    }
}

#[test]
fn finality_is_named_exactly_once() {
    assert_eq!(
        settings(Some(12), false).finality(),
        Ok(Finality::Confirmations(12))
    );
    assert_eq!(settings(None, true).finality(), Ok(Finality::FinalizedTag));
    assert_eq!(
        settings(None, false).finality(),
        Err(SettingsError::Finality)
    );
    assert_eq!(
        settings(Some(12), true).finality(),
        Err(SettingsError::Finality)
    );
}

/// A configuration mistake (or an operator in a hurry) setting `confirmations = 1` on a real
/// network: a reorganization of two blocks would undo a settlement or a release. Refused
/// below the floor, whatever the depth, unless the development opt-in is explicit.
#[test]
fn shallow_confirmations_are_refused_below_the_network_floor() {
    for n in 1..DEFAULT_MIN_CONFIRMATIONS {
        assert_eq!(
            settings(Some(n), false).finality(),
            Err(SettingsError::ShallowFinality {
                confirmations: n,
                min_confirmations: DEFAULT_MIN_CONFIRMATIONS
            }),
            "{n} confirmations"
        );
        assert_eq!(shallow(n).finality(), Ok(Finality::Confirmations(n)));
        assert_eq!(shallow(n).shallow_confirmations(), Some(n));
    }
    let at_floor = settings(Some(DEFAULT_MIN_CONFIRMATIONS), false);
    assert_eq!(
        at_floor.finality(),
        Ok(Finality::Confirmations(DEFAULT_MIN_CONFIRMATIONS))
    );
    assert_eq!(at_floor.shallow_confirmations(), None);
    // The floor is per network: a chain with deeper reorganizations raises it.
    let deep = NetworkEvidence {
        min_confirmations: 64,
        ..settings(Some(32), false)
    };
    assert_eq!(
        deep.finality(),
        Err(SettingsError::ShallowFinality {
            confirmations: 32,
            min_confirmations: 64
        })
    );
    // A floor of zero refuses nothing, so it is refused itself; zero confirmations is not
    // even the including block, opt-in or not.
    let no_floor = NetworkEvidence {
        min_confirmations: 0,
        ..settings(Some(12), false)
    };
    assert_eq!(no_floor.finality(), Err(SettingsError::ZeroFloor));
    assert_eq!(shallow(0).finality(), Err(SettingsError::ZeroConfirmations));
}

#[test]
fn the_protocols_finality_passes_any_floor() {
    let finalized = NetworkEvidence {
        min_confirmations: 1_000,
        ..settings(None, true)
    };
    assert_eq!(finalized.finality(), Ok(Finality::FinalizedTag));
    assert_eq!(finalized.shallow_confirmations(), None);
}

#[test]
fn every_refusal_names_its_key_and_the_way_out() {
    let mut evidence = BTreeMap::from([("mainnet".to_owned(), settings(Some(1), false))]);
    let networks = ["mainnet".to_owned()];
    let (field, problem) = check_evidence(&networks, &evidence)
        .err()
        .unwrap_or_default();
    assert_eq!(field, "evidence.confirmations");
    for way_out in [
        "min_confirmations (12 unless set)",
        "raise confirmations",
        "finalized = true",
        "allow_shallow_finality = true",
    ] {
        assert!(problem.contains(way_out), "{problem}");
    }
    assert_eq!(
        SettingsError::ShallowFinality {
            confirmations: 1,
            min_confirmations: 12
        }
        .to_string(),
        "confirmations 1 is below min_confirmations 12: raise confirmations, use \
         finalized = true, or set allow_shallow_finality = true (development only)"
    );
    evidence.insert("mainnet".to_owned(), shallow(1));
    assert_eq!(check_evidence(&networks, &evidence), Ok(()));
    evidence.insert(
        "mainnet".to_owned(),
        NetworkEvidence {
            min_confirmations: 0,
            ..shallow(1)
        },
    );
    assert_eq!(
        check_evidence(&networks, &evidence),
        Err(("evidence.min_confirmations", "must be at least 1"))
    );
}

/// What a service logs while building its readers.
fn logged_while(build: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, build);
    let bytes = captured
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_quorum_of_one_is_a_warning_at_start_and_two_are_not() {
    let one = settings(Some(12), false);
    let logs = logged_while(|| {
        assert!(service_reader("anvil", Some(&one), Duration::from_secs(1), None, []).is_ok());
    });
    assert!(
        logs.contains("WARN") && logs.contains("evidence rests on a single endpoint"),
        "{logs}"
    );
    assert!(
        logs.contains("network=anvil") && logs.contains("quorum=1"),
        "{logs}"
    );
    let two = NetworkEvidence {
        urls: vec![
            "http://127.0.0.1:1".to_owned(),
            "http://127.0.0.1:2".to_owned(),
        ],
        quorum: 2,
        ..settings(Some(12), false)
    };
    let logs = logged_while(|| {
        assert!(service_reader("anvil", Some(&two), Duration::from_secs(1), None, []).is_ok());
    });
    assert_eq!(logs, "", "no warning at quorum 2");
}

/// Two endpoints, so that only the depth can be warned about.
fn two(settings: NetworkEvidence) -> NetworkEvidence {
    NetworkEvidence {
        urls: vec![
            "http://127.0.0.1:1".to_owned(),
            "http://127.0.0.1:2".to_owned(),
        ],
        quorum: 2,
        ..settings
    }
}

#[test]
fn a_shallow_depth_starts_only_by_explicit_opt_in_and_with_a_warning() {
    let start = |settings: &NetworkEvidence| {
        service_reader("anvil", Some(settings), Duration::from_secs(1), None, [])
    };
    let logs = logged_while(|| {
        let refused = start(&two(settings(Some(2), false))).err();
        assert!(
            matches!(
                refused,
                Some(ReaderError::Settings(SettingsError::ShallowFinality {
                    confirmations: 2,
                    min_confirmations: 12
                }))
            ),
            "{refused:?}"
        );
    });
    assert_eq!(logs, "", "a refusal is an error, not a warning");
    let logs = logged_while(|| assert!(start(&two(shallow(2))).is_ok()));
    assert!(
        logs.contains("WARN") && logs.contains("finality shallower than min_confirmations"),
        "{logs}"
    );
    assert!(
        logs.contains("network=anvil")
            && logs.contains("confirmations=2")
            && logs.contains("min_confirmations=12"),
        "{logs}"
    );
    // The opt-in changes nothing at a safe depth or under the protocol's finality.
    for safe in [shallow(12), two(settings(None, true))] {
        let safe = NetworkEvidence {
            allow_shallow_finality: true,
            ..two(safe)
        };
        let logs = logged_while(|| assert!(start(&safe).is_ok()));
        assert_eq!(logs, "", "no warning at {:?}", safe.finality());
    }
}

#[test]
fn the_counter_renders_per_network_and_reason() {
    let counter = NoEvidenceCounter::default();
    counter.record("anvil", "lag");
    counter.record("anvil", "lag");
    counter.record("anvil", "disagreement");
    let text = counter.render("reconciler");
    assert!(text.contains(
        "opledger_evidence_no_verdict_total{service=\"reconciler\",network=\"anvil\",reason=\"lag\"} 2"
    ));
    assert!(text.contains("reason=\"disagreement\"} 1"));
}
