//! Dockerfile: stages with their base, their instructions and the user they run as.

use crate::common::{deploy, read};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug)]
pub(crate) struct Stage {
    pub(crate) name: String,
    pub(crate) from: String,
    /// Instructions, continuation lines joined, comments dropped.
    instructions: Vec<String>,
}

impl Stage {
    pub(crate) fn with(&self, keyword: &str) -> impl Iterator<Item = &str> {
        let prefix = format!("{keyword} ");
        self.instructions
            .iter()
            .filter_map(move |i| i.strip_prefix(prefix.as_str()))
    }
}

pub(crate) fn dockerfile_stages(path: &Path) -> Vec<Stage> {
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut stages: Vec<Stage> = Vec::new();
    let mut joined = String::new();
    let mut instructions = Vec::new();
    for line in read(path).lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && joined.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                joined.push_str(part);
                joined.push(' ');
            }
            None => {
                joined.push_str(trimmed);
                instructions.push(std::mem::take(&mut joined));
            }
        }
    }
    for instruction in instructions {
        if let Some(rest) = instruction.strip_prefix("FROM ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let mut from = words[0].to_owned();
            for (k, v) in &args {
                from = from.replace(&format!("${{{k}}}"), v);
            }
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => (*name).to_owned(),
                _ => String::new(),
            };
            stages.push(Stage {
                name,
                from,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(instruction);
        } else if let Some((k, v)) = instruction
            .strip_prefix("ARG ")
            .and_then(|a| a.split_once('='))
        {
            args.insert(k.to_owned(), v.to_owned());
        }
    }
    stages
}

pub(crate) fn dockerfile() -> Vec<Stage> {
    dockerfile_stages(&deploy().join("docker/Dockerfile"))
}

/// The user a stage runs as: its last USER, else its parent stage's.
pub(crate) fn effective_user(stages: &[Stage], stage: &Stage) -> Option<String> {
    if let Some(user) = stage.with("USER").last() {
        return Some(user.trim().to_owned());
    }
    let parent = stages.iter().find(|s| s.name == stage.from)?;
    effective_user(stages, parent)
}
