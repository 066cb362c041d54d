//! The webhook receiver: every `attempt.ended` delivery, with its delivery id.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};

#[derive(Clone, Debug)]
pub struct Delivery {
    pub id: String,
    pub job_id: i64,
    pub state: String,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    pub log: Arc<Mutex<Vec<Delivery>>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let log: Arc<Mutex<Vec<Delivery>>> = Arc::default();
        let seen = log.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let seen = seen.clone();
                async move {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) else {
                        return StatusCode::BAD_REQUEST;
                    };
                    let id = headers
                        .get("x-judge-delivery")
                        .and_then(|h| h.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    seen.lock().unwrap().push(Delivery {
                        id,
                        job_id: v["job_id"].as_i64().unwrap_or(-1),
                        state: v["state"].as_str().unwrap_or_default().to_string(),
                    });
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { addr, log }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.log.lock().unwrap().clone()
    }
}
