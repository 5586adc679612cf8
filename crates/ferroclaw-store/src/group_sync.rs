//! `session.durability: "batch"`: one sync makes the writes of many sessions durable
//! (group commit). A flush that arrives while a sync is under way waits for the next
//! one, which covers every write finished before it started, so under load the number
//! of syncs follows the time a sync takes, not the number of turns. Turns are
//! acknowledged only after a sync that covers them, as with `fsync`.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub(crate) struct GroupSync {
    /// Flushes requested so far; a flush's number is taken after its writes finished.
    requested: AtomicU64,
    /// Every flush numbered up to this is durable.
    synced: AtomicU64,
    /// One sync at a time; waiters queue here.
    running: tokio::sync::Mutex<()>,
}

impl GroupSync {
    /// Returns once the caller's earlier writes are durable, by `sync` (which must make
    /// durable everything written before it starts) run by this caller or another.
    pub(crate) async fn flush<F, Fut, E>(&self, sync: F) -> Result<(), E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let mine = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        let _turn = self.running.lock().await;
        if self.synced.load(Ordering::Acquire) >= mine {
            // A sync that started after this flush was numbered covered it.
            return Ok(());
        }
        // Everything numbered so far had finished its writes when it was numbered.
        let covered = self.requested.load(Ordering::Acquire);
        sync().await?;
        self.synced.fetch_max(covered, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_flushes_share_syncs_and_each_is_covered() {
        let group = Arc::new(GroupSync::default());
        let syncs = Arc::new(AtomicU64::new(0));
        // The number of the last flush each sync covered, in order.
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let (group, syncs) = (group.clone(), syncs.clone());
            tasks.push(tokio::spawn(async move {
                let before = syncs.load(Ordering::SeqCst);
                group
                    .flush(|| async {
                        syncs.fetch_add(1, Ordering::SeqCst);
                        // What a sync costs on a disk without a write cache.
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        Ok::<(), ()>(())
                    })
                    .await
                    .expect("sync");
                // Some sync ran after this flush began.
                assert!(syncs.load(Ordering::SeqCst) > before);
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let n = syncs.load(Ordering::SeqCst);
        assert!((1..64).contains(&n), "64 flushes took {n} syncs");
    }

    #[tokio::test]
    async fn a_failed_sync_fails_its_flush_and_the_next_flush_syncs_again() {
        let group = GroupSync::default();
        let err = group.flush(|| async { Err::<(), &str>("disk full") }).await;
        assert_eq!(err, Err("disk full"));
        let calls = AtomicU64::new(0);
        group
            .flush(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<(), &str>(())
            })
            .await
            .expect("sync");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "not skipped as already covered"
        );
    }
}
