//! The dev stack: `scripts/dev.sh` builds, starts, stops and lists every service, each with its
//! own login.

use crate::common::{SERVICES, assert_none, read, repo};

#[test]
fn the_dev_stack_builds_starts_stops_and_lists_every_service_each_with_its_own_login() {
    let dev = read(&repo().join("scripts/dev.sh"));
    let lines: Vec<&str> = dev.lines().collect();
    let summary = dev
        .split("<<EOF2")
        .nth(1)
        .and_then(|rest| rest.split("\nEOF2").next())
        .expect("the printed summary");
    let logins = lines
        .iter()
        .find(|l| l.trim_start().starts_with("FOREACH service IN ARRAY"))
        .expect("the loop creating the services' logins");
    let mut problems = Vec::new();
    for service in SERVICES {
        let (name, binary) = (service.name, service.binary());
        if !dev.contains(&format!("-p {binary} ")) {
            problems.push(format!("{name}: not built"));
        }
        // Started in the background and remembered: Ctrl-C, or any service exiting, stops it.
        let start = format!("\"$bin/{binary}\" &");
        match lines.iter().position(|l| l.contains(&start)) {
            Some(i) if lines.get(i + 1).map(|l| l.trim()) == Some("pids+=(\"$!\")") => {}
            Some(_) => problems.push(format!("{name}: started but not stopped with the stack")),
            None => problems.push(format!("{name}: not started")),
        }
        if !dev.contains(&format!("127.0.0.1:{}", service.grpc)) {
            problems.push(format!("{name}: not on its port {}", service.grpc));
        }
        if !summary
            .lines()
            .any(|l| l.starts_with(&format!("  {name} ")))
        {
            problems.push(format!("{name}: not listed in the printed summary"));
        }
        // Its own login, a member of its own service's group role only.
        let own_login = if name == "signer" {
            dev.contains("CREATE ROLE opledger_dev_signer LOGIN PASSWORD '${app_password}' IN ROLE opledger_signer;")
        } else {
            logins.contains(&format!("'{name}'"))
                && dev.contains(
                    "'opledger_dev_' || service, '${app_password}', 'opledger_' || service",
                )
        };
        if !own_login {
            problems.push(format!("{name}: no login of its own in opledger_{name}"));
        }
    }
    assert_none(problems, "scripts/dev.sh");
}
