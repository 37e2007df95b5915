//! How a command prints its result: text for humans, or one JSON value with `--json`.

pub(crate) fn print(json: bool, text: &str, value: serde_json::Value) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}
