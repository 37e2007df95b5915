//! The key sets of `fireblocks_jws` endpoints: fetched from each endpoint's `jwks_url`, cached,
//! and fetched again when older than `jwks_max_age_secs` or when a signature names a key id the
//! cached set does not hold (the provider rotated its key). Whatever asks for it (an unknown key
//! id, a stale set, a failed fetch), one key set is fetched at most once per
//! `jwks_refresh_min_interval_ms`, so a flood of forged signatures under made-up key ids costs the
//! provider's key server one request per interval. Concurrent requests for one set wait for the
//! fetch in flight and use its result.
//!
//! [`should_fetch`] is the whole policy, pure; [`JwksCache`] applies it.

use opledger_custodian::{Jwks, JwksFetcher};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How key sets are fetched and kept.
#[derive(Debug, Clone)]
pub struct JwksSettings {
    /// One fetch's budget.
    pub timeout: Duration,
    /// At most one fetch of a key set per this interval.
    pub refresh_interval: Duration,
    /// A key set older than this is fetched again before use.
    pub max_age: Duration,
    /// PEM CA alone trusted for `https` key set URLs; `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
}

/// Why a key set is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// To verify a signature: the cached set unless it is missing or too old.
    Current,
    /// A signature named a key id the cached set does not hold: a fresh set.
    Refresh,
}

/// Whether to fetch the key set now: never within `refresh_interval` of the last attempt
/// (successful or not); otherwise when there is none, when it is older than `max_age`, or when a
/// key id was unknown. `since_fetch` and `since_attempt` are `None` when nothing was fetched or
/// tried yet.
pub fn should_fetch(
    want: Want,
    since_fetch: Option<Duration>,
    since_attempt: Option<Duration>,
    settings: &JwksSettings,
) -> bool {
    if since_attempt.is_some_and(|d| d < settings.refresh_interval) {
        return false;
    }
    match (want, since_fetch) {
        (_, None) | (Want::Refresh, _) => true,
        (Want::Current, Some(age)) => age >= settings.max_age,
    }
}

/// No key set could be obtained (never fetched, and the fetch failed or is rate-limited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the provider's webhook key set is unavailable")]
pub struct Unavailable;

/// One URL's key set.
#[derive(Debug, Default)]
struct Slot {
    fetcher: Option<JwksFetcher>,
    keys: Option<Arc<Jwks>>,
    fetched_at: Option<Instant>,
    attempted_at: Option<Instant>,
}

/// The key sets by URL (one slot per configured URL, so the map stays as small as the endpoints).
#[derive(Debug)]
pub struct JwksCache {
    settings: JwksSettings,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
}

impl JwksCache {
    /// An empty cache.
    pub fn new(settings: JwksSettings) -> JwksCache {
        JwksCache {
            settings,
            slots: Mutex::default(),
        }
    }

    /// The key set of `url` for `want`: fetched first when [`should_fetch`] says so, else the
    /// cached one (also when a fetch failed: the last good set stays in use).
    pub async fn keys(&self, url: &str, want: Want) -> Result<Arc<Jwks>, Unavailable> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(url.to_owned()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        let now = Instant::now();
        let since = |at: Option<Instant>| at.map(|at| now.saturating_duration_since(at));
        if should_fetch(
            want,
            since(slot.fetched_at),
            since(slot.attempted_at),
            &self.settings,
        ) {
            slot.attempted_at = Some(now);
            match self.fetch(&mut slot, url).await {
                Ok(keys) => {
                    slot.keys = Some(Arc::new(keys));
                    slot.fetched_at = Some(now);
                }
                // The URL is configuration, not an identifier, but it is not logged either.
                Err(e) => tracing::warn!(error = %e, "webhook key set not fetched"),
            }
        }
        slot.keys.clone().ok_or(Unavailable)
    }

    async fn fetch(&self, slot: &mut Slot, url: &str) -> Result<Jwks, String> {
        if slot.fetcher.is_none() {
            let fetcher =
                JwksFetcher::new(url, self.settings.timeout, self.settings.ca_file.as_deref())
                    .map_err(|e| e.to_string())?;
            slot.fetcher = Some(fetcher);
        }
        match &slot.fetcher {
            Some(fetcher) => fetcher.fetch().await.map_err(|e| e.to_string()),
            None => Err("no fetcher".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> JwksSettings {
        JwksSettings {
            timeout: Duration::from_secs(5),
            refresh_interval: Duration::from_secs(30),
            max_age: Duration::from_secs(600),
            ca_file: None,
        }
    }

    fn ago(secs: u64) -> Option<Duration> {
        Some(Duration::from_secs(secs))
    }

    #[test]
    fn a_key_set_is_fetched_first_when_there_is_none() {
        let s = settings();
        assert!(should_fetch(Want::Current, None, None, &s));
        assert!(should_fetch(Want::Refresh, None, None, &s));
        // A failed first fetch is tried again only after the interval.
        assert!(!should_fetch(Want::Current, None, ago(29), &s));
        assert!(should_fetch(Want::Current, None, ago(30), &s));
    }

    #[test]
    fn a_cached_key_set_is_used_until_it_is_too_old() {
        let s = settings();
        assert!(!should_fetch(Want::Current, ago(599), ago(599), &s));
        assert!(should_fetch(Want::Current, ago(600), ago(600), &s));
        // A failed refetch of an old set is not tried again before the interval.
        assert!(!should_fetch(Want::Current, ago(700), ago(10), &s));
    }

    #[test]
    fn an_unknown_key_id_refreshes_once_per_interval() {
        let s = settings();
        assert!(should_fetch(Want::Refresh, ago(31), ago(31), &s));
        assert!(!should_fetch(Want::Refresh, ago(5), ago(5), &s));
        assert!(!should_fetch(Want::Refresh, ago(300), ago(29), &s));
        assert!(should_fetch(Want::Refresh, ago(300), ago(30), &s));
    }

    #[tokio::test]
    async fn an_unreachable_key_set_is_unavailable_and_tried_once_per_interval() {
        let cache = JwksCache::new(JwksSettings {
            timeout: Duration::from_millis(200),
            ..settings()
        });
        // Nothing listens on port 9 of loopback (discard): the fetch fails fast.
        let url = "http://127.0.0.1:9/.well-known/jwks.json";
        assert_eq!(cache.keys(url, Want::Current).await, Err(Unavailable));
        let started = Instant::now();
        assert_eq!(cache.keys(url, Want::Refresh).await, Err(Unavailable));
        // Rate-limited: no second connection attempt, so no wait at all.
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(
            cache.keys("not a url", Want::Current).await,
            Err(Unavailable)
        );
    }
}
