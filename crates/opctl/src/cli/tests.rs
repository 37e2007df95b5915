//! Unit tests of the command line: parsing, help text, defaults and redaction.

use super::*;
use clap::CommandFactory;
use opledger_proto::v1::WithdrawalState;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("opctl").chain(args.iter().copied()))
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn help_documents_every_exit_code() {
    let help = Cli::command().render_long_help().to_string();
    for code in [
        "0  success",
        "1  the service refused",
        "2  usage",
        "3  cannot connect",
    ] {
        assert!(help.contains(code), "{code} missing from --help");
    }
    assert!(help.contains("4  watch") && help.contains("5  watch"));
    assert!(help.contains(
        "6  approve, reject, credit sign: the operations service's answer did not verify"
    ));
    assert!(help.contains("operator: credit"));
    for flag in ["--ca-file", "OPCTL_CA_FILE", "--allow-clear-text"] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

#[test]
fn tls_flags_are_global() {
    let cli = parse(&[
        "get",
        "0190c4c8-4b5d-7c6e-8f90-123456789abc",
        "--ca-file",
        "/etc/opledger/ca.pem",
        "--allow-clear-text",
    ])
    .expect("valid");
    assert_eq!(
        cli.global.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/opledger/ca.pem"))
    );
    assert!(cli.global.allow_clear_text);
    if std::env::var_os("OPCTL_CA_FILE").is_none() {
        let cli = parse(&["get", "0190c4c8-4b5d-7c6e-8f90-123456789abc"]).expect("valid");
        assert_eq!(
            (cli.global.ca_file, cli.global.allow_clear_text),
            (None, false)
        );
    }
}

#[test]
fn the_api_key_from_the_environment_is_never_shown_in_help() {
    let help = Cli::command().render_long_help().to_string();
    assert!(help.contains("OPCTL_API_KEY"));
    assert!(!help.contains("OPCTL_API_KEY="));
}

#[test]
fn keys_never_appear_in_debug_output() {
    let cli = parse(&[
        "--api-key",
        "olk_abc_secretsecret",
        "create",
        "--account",
        "treasury",
        "--asset",
        "ETH",
        "--network",
        "anvil",
        "--to",
        "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
        "--amount",
        "1000",
        "--fee-cap",
        "10",
        "--idempotency-key",
        "f3c1f1a2-7d0e-4a43-9d55-0f7b0f1e2d3c",
    ])
    .expect("valid");
    let debug = format!("{cli:?}");
    assert!(!debug.contains("secretsecret"));
    assert!(!debug.contains("f3c1f1a2"));
    assert_eq!(
        cli.global.api_key.as_ref().map(ApiKey::expose),
        Some("olk_abc_secretsecret")
    );
}

#[test]
fn a_repeated_flag_takes_the_last_value_and_states_accumulate() {
    let cli = parse(&[
        "--operations",
        "http://a:1",
        "list",
        "--operations",
        "http://b:2",
        "--state",
        "unknown",
        "--state",
        "signed",
    ])
    .expect("valid");
    assert_eq!(cli.global.operations, "http://b:2");
    match cli.command {
        Command::List(list) => assert_eq!(list.states.len(), 2),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn defaults_are_the_services_default_ports() {
    let cli = parse(&["get", "0190c4c8-4b5d-7c6e-8f90-123456789abc"]).expect("valid");
    let g = &cli.global;
    // The environment may override them; only check when it does not.
    if std::env::var_os("OPCTL_OPERATIONS_URL").is_none() {
        assert_eq!(g.operations, "http://127.0.0.1:15051");
    }
    if std::env::var_os("OPCTL_RECONCILER_URL").is_none() {
        assert_eq!(g.reconciler, "http://127.0.0.1:15055");
    }
    if std::env::var_os("OPCTL_CUSTODIAN_URL").is_none() {
        assert_eq!(g.custodian, "http://127.0.0.1:15058");
    }
    assert_eq!((g.timeout, g.json), (10, false));
}

#[test]
fn malformed_values_are_usage_errors() {
    for args in [
        &["get", "not-a-uuid"][..],
        &[
            "resolve",
            "0190c4c8-4b5d-7c6e-8f90-123456789abc",
            "--outcome",
            "PAID",
            "--reason",
            "x",
        ],
        &["list", "--state", "PAID"],
        &["create", "--account", "a"],
        &[
            "watch",
            "0190c4c8-4b5d-7c6e-8f90-123456789abc",
            "--interval-ms",
            "1",
        ],
    ] {
        let err = parse(args).expect_err("usage error");
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
    let err = parse(&[
        "create",
        "--account",
        "a",
        "--asset",
        "ETH",
        "--network",
        "anvil",
        "--to",
        "0x0",
        "--amount",
        "01",
        "--fee-cap",
        "1",
    ])
    .expect_err("leading zero");
    assert!(err.to_string().contains("leading zero"));
}

#[test]
fn credit_commands_parse_ids_amounts_and_versions_and_never_show_keys() {
    let id = "AB".repeat(32);
    let cli = parse(&[
        "credit",
        "sign",
        &id,
        "--tenant",
        "0190c4c8-0000-7c6e-8f90-123456789abc",
        "--operator-signing-key",
        &"5e".repeat(32),
        "--policy-version",
        "2",
    ])
    .expect("valid");
    assert!(!format!("{cli:?}").contains(&"5e".repeat(32)));
    match cli.command {
        Command::Credit {
            command: CreditCommand::Sign(args),
        } => {
            assert_eq!(args.credit_id.to_hex(), "ab".repeat(32));
            assert_eq!(args.policy_version, Some(2));
            assert_eq!(
                args.signing
                    .operator_signing_key
                    .as_ref()
                    .map(SecretHex::expose),
                Some("5e".repeat(32).as_str())
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let create = |amount: &'static str, version: &'static str| {
        parse(&[
            "credit",
            "create",
            "--account",
            "treasury",
            "--asset",
            "ETH",
            "--amount",
            amount,
            "--tenant",
            "0190c4c8-0000-7c6e-8f90-123456789abc",
            "--policy-version",
            version,
        ])
    };
    assert!(create("500", "1").is_ok());
    for (amount, version) in [("0", "1"), ("05", "1"), ("500", "0"), ("500", "x")] {
        let err = create(amount, version).expect_err("usage error");
        assert_eq!(err.exit_code(), 2, "{amount} {version}");
    }
    for bad in ["00", "not-an-id", &"g".repeat(64)] {
        let err = parse(&["credit", "get", bad]).expect_err("not a credit id");
        assert_eq!(err.exit_code(), 2, "{bad}");
    }
    let help = Cli::command()
        .find_subcommand_mut("credit")
        .and_then(|c| c.find_subcommand_mut("sign"))
        .map(|c| c.render_long_help().to_string())
        .unwrap_or_default();
    assert!(help.contains("OPLEDGER_OPERATOR_KEY") && !help.contains("OPLEDGER_OPERATOR_KEY="));
    assert!(help.contains("--key-file") && help.contains("OPCTL_TENANT_ID"));
}

#[test]
fn outcomes_and_states_parse_case_insensitively() {
    let cli = parse(&[
        "resolve",
        "0190c4c8-4b5d-7c6e-8f90-123456789abc",
        "--outcome",
        "verified_not_sent",
        "--reason",
        "x",
    ])
    .expect("valid");
    match cli.command {
        Command::Resolve { outcome, .. } => {
            assert_eq!(outcome.state(), WithdrawalState::VerifiedNotSent);
        }
        other => panic!("unexpected {other:?}"),
    }
    let cli = parse(&[
        "list",
        "--state",
        "unknown,Failed-Terminal",
        "--state",
        "CONFIRMED",
    ])
    .expect("valid");
    match cli.command {
        Command::List(list) => assert_eq!(
            list.states,
            vec![
                WithdrawalState::Unknown,
                WithdrawalState::FailedTerminal,
                WithdrawalState::Confirmed
            ]
        ),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn custodian_commands_take_a_withdrawal_id_a_provider_id_and_a_reason() {
    let id = "0190c4c8-4b5d-7c6e-8f90-123456789abc";
    let cli = parse(&[
        "--custodian",
        "http://127.0.0.1:1",
        "custodian",
        "bind",
        id,
        "prime-tx-1",
        "--reason",
        "console shows it paid",
    ])
    .expect("valid");
    assert_eq!(cli.global.custodian, "http://127.0.0.1:1");
    match cli.command {
        Command::Custodian {
            command:
                CustodianCommand::Bind {
                    id: bound,
                    provider_id,
                    reason,
                },
        } => assert_eq!(
            (bound.as_str(), provider_id.as_str(), reason.as_str()),
            (id, "prime-tx-1", "console shows it paid")
        ),
        other => panic!("unexpected {other:?}"),
    }
    assert!(parse(&["custodian", "candidates", id]).is_ok());
    for args in [
        &["custodian", "candidates", "not-a-uuid"][..],
        &["custodian", "bind", id, "prime-tx-1"],
        &["custodian", "bind", id, "--reason", "x"],
    ] {
        let err = parse(args).expect_err("usage error");
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
}
