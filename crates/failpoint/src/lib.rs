//! Named failpoints for fault-injection tests.
//!
//! A failpoint is a named step boundary (`"create.after_operation_insert"`). With the `enabled`
//! feature off, [`hit`] compiles to nothing. With it on, the environment variable
//! `OPLEDGER_FAILPOINTS` arms failpoints for the whole process, for example
//! `OPLEDGER_FAILPOINTS="create.after_operation_insert=abort;sign.before_commit=sleep(200)"`.
//!
//! Actions: `abort` ends the process at once (as a `SIGKILL` would, no unwinding, no cleanup),
//! `sleep(MS)` blocks the calling thread for MS milliseconds, `off` does nothing.
//! This crate must never be able to change a result silently: it can only stop or delay.

/// Marks a step boundary; does what `OPLEDGER_FAILPOINTS` says for `name`, if anything.
#[inline]
pub fn hit(name: &'static str) {
    #[cfg(feature = "enabled")]
    armed::hit(name);
    #[cfg(not(feature = "enabled"))]
    let _ = name;
}

/// The environment variable that arms failpoints.
pub const ENV_VAR: &str = "OPLEDGER_FAILPOINTS";

/// What an armed failpoint does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// End the process immediately.
    Abort,
    /// Block the calling thread for this many milliseconds.
    Sleep(u64),
    /// Do nothing.
    Off,
}

/// Parses a failpoint specification `name=action;name=action`. Malformed entries are errors, so
/// a typo in a fault test fails loudly instead of silently testing nothing.
pub fn parse_spec(spec: &str) -> Result<Vec<(String, Action)>, String> {
    let mut out = Vec::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, action) = entry
            .split_once('=')
            .ok_or_else(|| format!("failpoint entry without '=': {entry}"))?;
        let action = match action.trim() {
            "abort" => Action::Abort,
            "off" => Action::Off,
            other => match other
                .strip_prefix("sleep(")
                .and_then(|r| r.strip_suffix(')'))
            {
                Some(ms) => Action::Sleep(
                    ms.parse()
                        .map_err(|_| format!("failpoint sleep needs milliseconds: {entry}"))?,
                ),
                None => return Err(format!("unknown failpoint action: {entry}")),
            },
        };
        out.push((name.trim().to_owned(), action));
    }
    Ok(out)
}

#[cfg(feature = "enabled")]
mod armed {
    use super::{Action, ENV_VAR, parse_spec};
    use std::sync::OnceLock;

    fn table() -> &'static [(String, Action)] {
        static TABLE: OnceLock<Vec<(String, Action)>> = OnceLock::new();
        TABLE.get_or_init(|| match std::env::var(ENV_VAR) {
            Ok(spec) => match parse_spec(&spec) {
                Ok(table) => table,
                Err(message) => {
                    eprintln!("invalid {ENV_VAR}: {message}");
                    std::process::abort();
                }
            },
            Err(_) => Vec::new(),
        })
    }

    pub(super) fn hit(name: &'static str) {
        for (armed, action) in table() {
            if armed == name {
                match action {
                    Action::Abort => {
                        eprintln!("failpoint {name}: abort");
                        std::process::abort();
                    }
                    Action::Sleep(ms) => std::thread::sleep(std::time::Duration::from_millis(*ms)),
                    Action::Off => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_action_and_refuses_typos() {
        assert_eq!(
            parse_spec("a=abort; b=sleep(20);c=off"),
            Ok(vec![
                ("a".to_owned(), Action::Abort),
                ("b".to_owned(), Action::Sleep(20)),
                ("c".to_owned(), Action::Off)
            ])
        );
        assert!(parse_spec("a=abrot").is_err());
        assert!(parse_spec("a").is_err());
        assert!(parse_spec("a=sleep(x)").is_err());
        assert_eq!(parse_spec(""), Ok(vec![]));
    }
}
