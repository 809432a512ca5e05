//! A proving daemon that speaks Curio's `cuzk.v1.ProvingEngine` protocol over gRPC
//! (`proto/cuzk/v1/proving.proto`), so that Curio's task engine can send its SNARK work to any
//! GPU wgpu reaches.
//!
//! - [`scheduler`]: the queue (idempotent request ids, priorities, a bound on pending jobs,
//!   cancellation, outcomes kept for late awaits) and one worker per lane.
//! - [`backend`]: what proves: Filecoin's PoRep C2, Winning and Window PoSt and SnapDeals
//!   through wgpu-groth16, parameters resident; [`circuits`]: the circuit ids naming them.
//! - [`service`]: the RPCs over the scheduler.
//! - [`load`]: a load generator, many clients' jobs against a running daemon; [`soak`]: many
//!   small jobs, some bad, cancelled or sent twice, then a flood, each job's answer checked.

pub mod backend;
pub mod circuits;
pub mod load;
pub mod peers;
pub mod scheduler;
pub mod service;
pub mod soak;

/// The generated protocol: messages, server and client.
pub mod pb {
    tonic::include_proto!("cuzk.v1");
}

use std::net::SocketAddr;
use std::sync::Arc;

use peers::Peers;
use scheduler::{Backend, Scheduler};
use tokio_stream::StreamExt;

/// Serves `backend` on `listener` to `peers` until `shutdown` resolves; then pending jobs
/// are cancelled, and running ones finish before this returns. A connection from another peer
/// is closed as it is accepted, with a logged warning.
pub async fn serve(
    listener: tokio::net::TcpListener,
    peers: Peers,
    backend: Arc<dyn Backend>,
    max_pending: usize,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let scheduler = Scheduler::start(backend, max_pending);
    let service = pb::proving_engine_server::ProvingEngineServer::new(service::Service::new(
        scheduler.clone(),
    ))
    // Curio's C1 outputs are ~50 MB at 32 GiB.
    .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let incoming =
        tokio_stream::wrappers::TcpListenerStream::new(listener).filter(move |accepted| {
            let Ok(stream) = accepted else {
                return true;
            };
            match stream.peer_addr() {
                Ok(peer) if peers.admits(peer.ip()) => true,
                Ok(peer) => {
                    log::warn!(
                        "closed a connection from {peer}: not among the allowed peers ({peers})"
                    );
                    false
                }
                Err(e) => {
                    log::warn!("closed a connection whose peer is unknown: {e}");
                    false
                }
            }
        });
    // Pending jobs are cancelled as the signal comes, so that calls awaiting them return
    // and the server can finish its calls in flight.
    let stopping = scheduler.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.stop();
    };
    let served = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    let stopping = scheduler.clone();
    let _ = tokio::task::spawn_blocking(move || stopping.shutdown()).await;
    served
}

/// Host blocks of this many bytes and more are mapped for themselves and unmapped as they are
/// freed, once [`fix_mmap_threshold`] has run: glibc's default threshold, kept.
pub const MMAP_THRESHOLD: usize = 128 << 10;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`] for this process; whether it was set
/// (false off glibc). Left to itself, glibc raises the threshold to the size of each mapped
/// block freed (up to 32 MiB, and the trim threshold to twice that), so that a prover's
/// vectors then come from the arena of whichever thread allocates them, which keeps them
/// once freed. Each job's batch starts threads (its synthesis pool, its steps), which take
/// up to 8 arenas a core in turn: a daemon's resident set grew with every job it proved
/// (2,409 to 2,567 MiB over a 2,000-job soak on an H100) while its live heap did not.
pub fn fix_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // Setting it also stops glibc from moving it (and the trim threshold).
        // SAFETY: mallopt takes any parameter and value, and refuses those it does not know.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The largest request accepted: a 64 GiB sector's C1 output with room to spare.
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// The address a listener is bound to, for logs.
pub fn describe(addr: SocketAddr) -> String {
    format!("grpc://{addr}")
}
