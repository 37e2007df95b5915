//! Kubernetes: kustomizations rendered just far enough to check them (resources, namespaces,
//! ConfigMap and Secret generators, patch files).

use crate::common::{
    array_at, canonical, deploy, files_under, read, str_at, strings, yaml_doc, yaml_docs,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const WORKLOAD_KINDS: [&str; 3] = ["Deployment", "StatefulSet", "Job"];

/// A manifest with the namespace it ends up in.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub(crate) path: PathBuf,
    pub(crate) namespace: String,
    pub(crate) doc: Value,
}

impl Manifest {
    pub(crate) fn kind(&self) -> &str {
        str_at(&self.doc, "/kind").unwrap_or_default()
    }

    pub(crate) fn name(&self) -> &str {
        str_at(&self.doc, "/metadata/name").unwrap_or_default()
    }

    pub(crate) fn pod_spec(&self) -> Option<&Value> {
        WORKLOAD_KINDS
            .contains(&self.kind())
            .then(|| self.doc.pointer("/spec/template/spec"))
            .flatten()
    }

    pub(crate) fn containers(&self) -> Vec<&Value> {
        let Some(pod) = self.pod_spec() else {
            return Vec::new();
        };
        ["/containers", "/initContainers"]
            .iter()
            .flat_map(|p| array_at(pod, p))
            .collect()
    }

    pub(crate) fn at(&self) -> String {
        format!(
            "{} {}/{} ({})",
            self.kind(),
            self.namespace,
            self.name(),
            self.path.display()
        )
    }
}

/// Generated ConfigMaps or Secrets: (namespace, name) -> data.
pub(crate) type Generated = BTreeMap<(String, String), BTreeMap<String, String>>;

/// What a kustomization directory renders to: its resources, its generated ConfigMaps and
/// Secrets (namespace, name -> data), and its patch files.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    pub(crate) resources: Vec<Manifest>,
    pub(crate) config_maps: Generated,
    pub(crate) secrets: Generated,
    pub(crate) patches: Vec<Manifest>,
}

fn kustomization(dir: &Path) -> Value {
    yaml_doc(&dir.join("kustomization.yaml"))
}

/// Renders `dir` the way kustomize does for what these artifacts use: resources (files and
/// kustomization directories), `namespace`, generators with create/merge/replace, patch files.
pub(crate) fn render(dir: &Path) -> Rendered {
    let k = kustomization(dir);
    let namespace = str_at(&k, "/namespace").map(str::to_owned);
    let mut out = Rendered::default();
    for resource in strings(&k["resources"]) {
        let path = canonical(&dir.join(&resource));
        if path.is_dir() {
            let sub = render(&path);
            out.resources.extend(sub.resources);
            out.config_maps.extend(sub.config_maps);
            out.secrets.extend(sub.secrets);
            out.patches.extend(sub.patches);
        } else {
            for doc in yaml_docs(&path) {
                let ns = str_at(&doc, "/metadata/namespace").map(str::to_owned);
                out.resources.push(Manifest {
                    path: path.clone(),
                    namespace: namespace.clone().or(ns).unwrap_or_default(),
                    doc,
                });
            }
        }
    }
    // The namespace transformer moves everything below this kustomization, bases included.
    if let Some(ns) = &namespace {
        for m in &mut out.resources {
            m.namespace = ns.clone();
        }
        out.config_maps = rename_namespace(out.config_maps, ns);
        out.secrets = rename_namespace(out.secrets, ns);
    }
    for (field, target) in [
        ("configMapGenerator", &mut out.config_maps),
        ("secretGenerator", &mut out.secrets),
    ] {
        for generator in array_at(&k, &format!("/{field}")) {
            let name = str_at(generator, "/name")
                .expect("generator name")
                .to_owned();
            let ns = str_at(generator, "/namespace")
                .map(str::to_owned)
                .or_else(|| namespace.clone())
                .unwrap_or_default();
            let data = generator_data(dir, generator);
            let key = (ns, name);
            match str_at(generator, "/behavior").unwrap_or("create") {
                "merge" => target
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("{}: merge into unknown {key:?}", dir.display()))
                    .extend(data),
                "replace" => {
                    assert!(
                        target.contains_key(&key),
                        "{}: replace of unknown {key:?}",
                        dir.display()
                    );
                    target.insert(key, data);
                }
                _ => {
                    assert!(
                        !target.contains_key(&key),
                        "{}: {key:?} generated twice",
                        dir.display()
                    );
                    target.insert(key, data);
                }
            }
        }
    }
    for patch in array_at(&k, "/patches") {
        if let Some(file) = str_at(patch, "/path") {
            let path = canonical(&dir.join(file));
            for doc in yaml_docs(&path) {
                let ns = str_at(&doc, "/metadata/namespace")
                    .unwrap_or_default()
                    .to_owned();
                out.patches.push(Manifest {
                    path: path.clone(),
                    namespace: ns,
                    doc,
                });
            }
        }
    }
    out
}

fn rename_namespace(map: Generated, ns: &str) -> Generated {
    map.into_iter()
        .map(|((_, name), data)| ((ns.to_owned(), name), data))
        .collect()
}

/// The data of one generator: `literals` (KEY=VALUE), `files` (name = file name, or KEY=path)
/// and `envs` (KEY=VALUE lines, `#` comments).
fn generator_data(dir: &Path, generator: &Value) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    for literal in strings(&generator["literals"]) {
        let (key, value) = literal.split_once('=').expect("literal KEY=VALUE");
        data.insert(key.to_owned(), value.to_owned());
    }
    for file in strings(&generator["files"]) {
        let (key, path) = match file.split_once('=') {
            Some((key, path)) => (key.to_owned(), path.to_owned()),
            None => (file_name(&file), file.clone()),
        };
        data.insert(key, read(&dir.join(path)));
    }
    for env in strings(&generator["envs"]) {
        data.extend(env_file(&dir.join(env)));
    }
    data
}

pub(crate) fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn env_file(path: &Path) -> BTreeMap<String, String> {
    read(path)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("{}: not KEY=VALUE: {l}", path.display()));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

pub(crate) fn k8s() -> PathBuf {
    deploy().join("k8s")
}

pub(crate) fn dev_overlay() -> Rendered {
    render(&k8s().join("overlays/dev"))
}

/// Every manifest the Kubernetes kustomizations can produce: each directory rendered on its own
/// (so a base is checked even where no overlay uses it), deduplicated by file and name.
pub(crate) fn all_k8s_resources() -> Vec<Manifest> {
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    for k in files_under(&k8s(), &["kustomization.yaml"]) {
        let dir = k.parent().expect("kustomization directory");
        for m in render(dir).resources {
            if seen.insert((m.path.clone(), m.kind().to_owned(), m.name().to_owned())) {
                all.push(m);
            }
        }
    }
    all
}

pub(crate) fn workloads(resources: &[Manifest]) -> impl Iterator<Item = &Manifest> {
    resources
        .iter()
        .filter(|m| WORKLOAD_KINDS.contains(&m.kind()))
}

pub(crate) fn deployment<'a>(resources: &'a [Manifest], name: &str) -> &'a Manifest {
    resources
        .iter()
        .find(|m| m.kind() == "Deployment" && m.name() == name)
        .unwrap_or_else(|| panic!("no Deployment {name}"))
}
