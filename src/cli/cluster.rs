//! Which cluster a command talks to: `--kubeconfig` and `--context` as kubectl has them, else
//! `KUBECONFIG` or `~/.kube/config`, else the in-cluster service account. "No configuration at
//! all" is told apart from a configuration that does not work: only the first may run without a
//! cluster (`run`'s development mode).

use std::ffi::OsStr;
use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The flags of the commands that talk to a cluster.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ClusterFlags {
    /// Path of the kubeconfig file (default: `KUBECONFIG`, else `~/.kube/config`, else the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// A cluster configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("loading the kubeconfig{}: {source}", from.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Kubeconfig { from: Option<PathBuf>, source: kube::config::KubeconfigError },
    #[error("loading the in-cluster configuration: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    #[error("creating a client for {server}: {}", crate::ops::logging::KubeError(.source))]
    Client { server: String, source: kube::Error },
}

/// A client and where it points, for messages that name the server.
pub struct Cluster {
    pub client: Client,
    /// The API server's URL, with the context when one was used.
    pub server: String,
}

impl ClusterFlags {
    /// The configured cluster, or `None` when nothing is configured at all.
    pub async fn connect(&self) -> Result<Option<Cluster>, ClusterError> {
        let Some((config, context)) = self.config().await? else { return Ok(None) };
        let server = match context {
            Some(context) => format!("{} (context {context})", config.cluster_url),
            None => config.cluster_url.to_string(),
        };
        let client = Client::try_from(config)
            .map_err(|source| ClusterError::Client { server: server.clone(), source })?;
        Ok(Some(Cluster { client, server }))
    }

    /// Like [`connect`](Self::connect), for commands that cannot work without a cluster.
    pub async fn require(&self) -> Result<Cluster, String> {
        match self.connect().await {
            Ok(Some(cluster)) => Ok(cluster),
            Ok(None) => Err(
                "no cluster configured: no --kubeconfig, KUBECONFIG or ~/.kube/config, and not running in a pod"
                    .to_owned(),
            ),
            Err(error) => Err(error.to_string()),
        }
    }

    async fn config(&self) -> Result<Option<(Config, Option<String>)>, ClusterError> {
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let kubeconfig = match &self.kubeconfig {
            Some(path) => Some(
                Kubeconfig::read_from(path)
                    .map_err(|source| ClusterError::Kubeconfig { from: Some(path.clone()), source })?,
            ),
            None => read_existing(&default_kubeconfig_paths())?,
        };
        match kubeconfig {
            Some(kubeconfig) => {
                let context = self.context.clone().or_else(|| kubeconfig.current_context.clone());
                let config = Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|source| ClusterError::Kubeconfig { from: self.kubeconfig.clone(), source })?;
                Ok(Some((config, context)))
            }
            None if in_a_pod(
                std::env::var_os("KUBERNETES_SERVICE_HOST").as_deref(),
                std::env::var_os("KUBERNETES_SERVICE_PORT").as_deref(),
            ) =>
            {
                Ok(Some((Config::incluster()?, None)))
            }
            None => Ok(None),
        }
    }
}

/// Whether the Service environment of a pod says this process runs in one, as client-go's
/// `rest.InClusterConfig` decides it: `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`
/// both set and not empty. An empty value (a shell's `KUBERNETES_SERVICE_HOST=`, a container
/// that blanks it) is "not in a cluster", never a broken in-cluster configuration.
fn in_a_pod(service_host: Option<&OsStr>, service_port: Option<&OsStr>) -> bool {
    let set = |value: Option<&OsStr>| value.is_some_and(|value| !value.is_empty());
    set(service_host) && set(service_port)
}

/// Where kubectl looks: the files `KUBECONFIG` lists, else `~/.kube/config`.
fn default_kubeconfig_paths() -> Vec<PathBuf> {
    match std::env::var_os("KUBECONFIG").filter(|value| !value.is_empty()) {
        Some(value) => std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()).collect(),
        None => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".kube").join("config"))
            .into_iter()
            .collect(),
    }
}

/// The kubeconfig files among `paths` that exist, merged as kubectl merges them; files that do
/// not exist are skipped, as kubectl skips them. `None` when none exists.
fn read_existing(paths: &[PathBuf]) -> Result<Option<Kubeconfig>, ClusterError> {
    let mut merged: Option<Kubeconfig> = None;
    for path in paths.iter().filter(|p| p.is_file()) {
        let error = |source| ClusterError::Kubeconfig { from: Some(path.clone()), source };
        let next = Kubeconfig::read_from(path).map_err(error)?;
        merged = Some(match merged {
            Some(merged) => merged.merge(next).map_err(error)?,
            None => next,
        });
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_service_environment_is_not_a_pod() {
        let (host, port) = (Some(OsStr::new("10.96.0.1")), Some(OsStr::new("443")));
        assert!(in_a_pod(host, port));
        let empty = Some(OsStr::new(""));
        assert!(!in_a_pod(empty, port), "KUBERNETES_SERVICE_HOST set but empty");
        assert!(!in_a_pod(host, empty), "KUBERNETES_SERVICE_PORT set but empty");
        assert!(!in_a_pod(None, port));
        assert!(!in_a_pod(host, None));
    }

    #[tokio::test]
    async fn an_unreadable_kubeconfig_is_an_error_naming_it_not_no_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, "this: [is not a kubeconfig").unwrap();
        let flags = ClusterFlags { kubeconfig: Some(path.clone()), context: None };
        let error = flags.connect().await.err().expect("an error");
        assert!(error.to_string().contains(&path.display().to_string()), "{error}");
    }

    #[tokio::test]
    async fn a_kubeconfig_names_its_server_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: dev\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
             contexts:\n- name: dev\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        let flags = ClusterFlags { kubeconfig: Some(path), context: None };
        let cluster = flags.connect().await.unwrap().expect("configured");
        assert_eq!(cluster.server, "https://127.0.0.1:1/ (context dev)");
        let missing = ClusterFlags { context: Some("prod".into()), ..flags };
        assert!(missing.connect().await.err().expect("no such context").to_string().contains("prod"));
    }
}
