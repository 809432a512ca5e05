//! Signals end the process cleanly: SIGINT, SIGTERM and SIGHUP remove the temporaries of
//! the files being written ([`wgpu_groth16::files`]) before the process dies of them.

use std::io;

/// Makes SIGINT, SIGTERM and SIGHUP remove this process's temporaries before it dies of
/// them. Call it before any thread starts: the signals are blocked in every thread and
/// waited for by one of their own, which runs ordinary code (no async-signal-safety limits)
/// and waits for a reservation or commit in progress to finish.
#[cfg(unix)]
pub fn remove_temporaries_on_signals() -> io::Result<()> {
    use std::mem::MaybeUninit;
    // SAFETY: sigemptyset initializes the set; sigaddset and pthread_sigmask read it.
    let signals = unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        let mut set = set.assume_init();
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        set
    };
    // SAFETY: as above; the old mask is not wanted.
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };
    if blocked != 0 {
        return Err(io::Error::from_raw_os_error(blocked));
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: sigwait on an initialized set; it fails only for an invalid set.
            while unsafe { libc::sigwait(&signals, &mut signal) } != 0 {}
            wgpu_groth16::files::remove_temporaries_before_exit();
            // Die of the signal as if it had not been caught, so the parent sees it.
            // SAFETY: resets the disposition and unblocks the one signal in this thread.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                let mut one = MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(one.as_mut_ptr());
                let mut one = one.assume_init();
                libc::sigaddset(&mut one, signal);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(signal);
            }
            std::process::exit(128 + signal);
        })?;
    Ok(())
}

#[cfg(not(unix))]
pub fn remove_temporaries_on_signals() -> io::Result<()> {
    Ok(())
}
