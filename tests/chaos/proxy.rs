//! A TCP proxy between one daemon and the Servers that can delay, lose and
//! partition its traffic. This host's kernel has no `sch_netem`, so `tc netem` in
//! a network namespace is not available; a proxy on loopback does the same to the
//! daemon's HTTP: every byte the daemon exchanges with any Server crosses it.
//! It also spreads connections over the Servers (the first that accepts, starting
//! from the next one each time), as a load balancer in front of several would.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the link does to the traffic crossing it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Link {
    Normal,
    /// Every chunk waits this long before it is passed on.
    Delay(Duration),
    /// Each chunk cuts its connection with this probability.
    Loss(f64),
    /// Nothing crosses: new connections are held silent, open ones are cut.
    Partition,
}

struct State {
    link: Mutex<Link>,
    upstreams: Vec<SocketAddr>,
    next: AtomicUsize,
    rng: Mutex<StdRng>,
    /// Bumped to cut every open connection.
    epoch: watch::Sender<u64>,
}

#[derive(Clone)]
pub struct Proxy {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Proxy {
    pub async fn start(upstreams: Vec<SocketAddr>, seed: u64) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (epoch, _) = watch::channel(0);
        let state = Arc::new(State {
            link: Mutex::new(Link::Normal),
            upstreams,
            next: AtomicUsize::new(0),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            epoch,
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(accepting.clone(), client));
            }
        });
        Proxy { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sets the link; any change cuts the open connections (a partition's held
    /// ones included), as a link going down or coming back does.
    pub fn set(&self, link: Link) {
        *self.state.link.lock().unwrap() = link;
        self.state.epoch.send_modify(|e| *e += 1);
    }
}

fn link(state: &State) -> Link {
    *state.link.lock().unwrap()
}

fn chance(state: &State, p: f64) -> bool {
    state.rng.lock().unwrap().random_bool(p.clamp(0.0, 1.0))
}

async fn serve(state: Arc<State>, client: TcpStream) {
    let mut cut = state.epoch.subscribe();
    if link(&state) == Link::Partition {
        // Held silent until the link changes, then dropped.
        let _ = cut.changed().await;
        return;
    }
    let n = state.upstreams.len();
    let start = state.next.fetch_add(1, Ordering::Relaxed);
    let mut upstream = None;
    for i in 0..n {
        if let Ok(s) = TcpStream::connect(state.upstreams[(start + i) % n]).await {
            upstream = Some(s);
            break;
        }
    }
    let Some(upstream) = upstream else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    tokio::select! {
        _ = pump(state.clone(), cr, uw) => {}
        _ = pump(state.clone(), ur, cw) => {}
        _ = cut.changed() => {}
    }
}

async fn pump(
    state: Arc<State>,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        match link(&state) {
            Link::Normal => {}
            Link::Delay(d) => tokio::time::sleep(d).await,
            Link::Loss(p) => {
                if chance(&state, p) {
                    return;
                }
            }
            Link::Partition => return,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
