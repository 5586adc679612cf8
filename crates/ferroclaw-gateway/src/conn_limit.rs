//! Caps on open connections, in total and per client address. A permit is held for as
//! long as the connection lives and gives its place back when dropped, so the counts
//! cannot drift whatever way a connection ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Which cap refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    Total(usize),
    PerIp(usize),
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitHit::Total(n) => write!(f, "the gateway holds its maximum of {n} connections"),
            LimitHit::PerIp(n) => write!(f, "this address holds its maximum of {n} connections"),
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    /// Most held at once since [`ConnLimiter::reset_peak`].
    peak: usize,
    per_ip: HashMap<IpAddr, usize>,
}

#[derive(Debug, Clone)]
pub struct ConnLimiter {
    max_total: usize,
    max_per_ip: usize,
    counts: Arc<Mutex<Counts>>,
}

/// One admitted connection.
#[derive(Debug)]
pub struct ConnPermit {
    ip: IpAddr,
    counts: Arc<Mutex<Counts>>,
}

impl ConnLimiter {
    /// 0 means no cap.
    pub fn new(max_total: usize, max_per_ip: usize) -> Self {
        ConnLimiter {
            max_total: if max_total == 0 {
                usize::MAX
            } else {
                max_total
            },
            max_per_ip: if max_per_ip == 0 {
                usize::MAX
            } else {
                max_per_ip
            },
            counts: Arc::default(),
        }
    }

    pub fn try_acquire(&self, ip: IpAddr) -> Result<ConnPermit, LimitHit> {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if c.total >= self.max_total {
            return Err(LimitHit::Total(self.max_total));
        }
        let n = c.per_ip.entry(ip).or_insert(0);
        if *n >= self.max_per_ip {
            return Err(LimitHit::PerIp(self.max_per_ip));
        }
        *n += 1;
        c.total += 1;
        c.peak = c.peak.max(c.total);
        Ok(ConnPermit {
            ip,
            counts: self.counts.clone(),
        })
    }

    pub fn open(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// `(open now, most open at once since the last reset)`.
    pub fn open_and_peak(&self) -> (usize, usize) {
        let c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        (c.total, c.peak)
    }

    /// The peak restarts from what is open now.
    pub fn reset_peak(&self) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.peak = c.total;
    }
}

impl Drop for ConnPermit {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                // Addresses come and go; an entry per address ever seen would only grow.
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_release() {
        let l = ConnLimiter::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let p1 = l.try_acquire(a).expect("1");
        let _p2 = l.try_acquire(a).expect("2");
        assert_eq!(l.try_acquire(a).err(), Some(LimitHit::PerIp(2)));
        let _p3 = l.try_acquire(b).expect("3");
        assert_eq!(l.try_acquire(b).err(), Some(LimitHit::Total(3)));
        assert_eq!(l.open_and_peak(), (3, 3));
        drop(p1);
        assert_eq!(l.open_and_peak(), (2, 3), "the peak stays until reset");
        l.reset_peak();
        assert_eq!(l.open_and_peak(), (2, 2));
        let _p4 = l.try_acquire(a).expect("place given back");
        let unlimited = ConnLimiter::new(0, 0);
        let held: Vec<_> = (0..100)
            .map(|_| unlimited.try_acquire(a).expect("no cap"))
            .collect();
        assert_eq!(unlimited.open(), held.len());
    }
}
