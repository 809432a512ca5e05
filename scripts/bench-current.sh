#!/usr/bin/env bash
# Measures every row of BENCHMARKS.md's table of current figures, each beside the baseline
# its command runs on the same machine (blstrs, bellperson, filecoin-proofs on the CPU).
#
#   scripts/bench-current.sh BIN OUT [kernels] [partitions] [c2]
#
# BIN holds release builds of wgpu-groth16, wgpu-groth16-filecoin and wgpu-groth16-daemon;
# OUT receives one log per part and the runs' traces. Parameters are made here, never downloaded: random points
# of the right shape (`bench prove`) or seeded ones (`setup`), in /tmp. The parts:
#   kernels     the field product, MSMs (G1 2^24 and 2^27, uniform and with the real PoRep
#               partition's scalar mix at 2^27, G2 2^22), NTTs, the parameter files'
#               subgroup checks (G1 2^21, G2 2^20) and proofs at
#               2^22 and 2^24 (~6 min on an H200 with 16 cores)
#   partitions  ten 2^27 partitions of FilecoinLike, recorded synthesis, peak VRAM, its
#               aux values half bits and then in the real PoRep partition's mix (~10 min)
#   c2          the real 2 KiB PoRep C2 and the daemon's throughput (~7 min)
#   budgets     small proofs (2^18) checked against bellperson within budgets that stream
#               bases and scalars, then ten 2^27 partitions within the device's default
#               budget and 32, 24, 16, 12 and 8 GiB, one process (~10 min); each batch's
#               peak VRAM from nvidia-smi samples inside its window
#   real32      the real 32 GiB PoRep circuit: random-point parameters of its shape and its
#               recorded system (`setup --random-points`, ~47 GB on disk), a benchmark-only
#               C1 output (`seal --benchmark-only`), then `c2 --benchmark` with the file
#               recorded as checked and with every point checked (on the GPU; REAL32_RUNS
#               picks "recorded", "unrecorded" or both), and three
#               sectors back to back; peak RSS and VRAM (~15 min est.; ~60 GiB of memory and
#               ~60 GiB of disk, est.), and three sectors through the daemon
#               (`serve --benchmark-jobs`); real32_setup, real32_c2, real32_sectors and
#               real32_daemon are its parts; real32_cold (not in real32) runs `c2` with the
#               file recorded as checked after evicting every file it reads from the page
#               cache (posix_fadvise DONTNEED through dd's nocache flag; no root needed):
#               a read from disk
#   soak        the daemon under SOAK_JOBS (2,000) jobs, 2 KiB C2 and Winning PoSt in turn,
#               from 32 clients, 10% of them cut short, cancelled or sent twice, then a
#               flood of 200 past --max-pending 64: answers against the daemon's counters,
#               latency, RSS and VRAM over time
#               (`wgpu-groth16-daemon soak`; ~3 min of setup, then est. ~10 min);
#               soak_setup and soak_run are its parts
#   streamed    G1 MSMs of 2^27 with every base streamed, by chunk size and window count,
#               beside resident runs cut alike; then two and four streamed MSMs together,
#               and G2 at 2^26 (~10 min)
set -euo pipefail
bin=$(cd "$1" && pwd)
out=$2
shift 2
parts=${*:-kernels partitions c2}
mkdir -p "$out"
work=/tmp/wgpu-groth16-bench
mkdir -p "$work"
export WGPU_GROTH16_PARAMS_CACHE=$work/cache
export FIL_PROOFS_PARAMETER_CACHE=$work/fil-params

wg() { "$bin/wgpu-groth16" "$@"; }
wgf() { "$bin/wgpu-groth16-filecoin" "$@"; }

# Samples the GPU's memory in use every second into $1 until the returned pid is killed.
sample_vram() {
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -l 1 >"$1" &
        echo $!
    fi
}
peak_of() { sort -n "$1" | tail -1; }
# How many bytes of the files given are in the page cache (where util-linux has fincore).
cached_bytes() {
    command -v fincore >/dev/null || return 0
    echo "$(fincore --bytes --noheadings --output RES "$@" | awk '{s += $1} END {print s + 0}') bytes in the page cache"
}

# Starts the daemon with the arguments after $1, its log in $1, and waits until it serves;
# sets $daemon to its pid.
start_daemon() {
    local log=$1
    shift
    "$bin/wgpu-groth16-daemon" serve "$@" >"$log" 2>&1 &
    daemon=$!
    for _ in $(seq 900); do
        grep -q "serving" "$log" && return
        if ! kill -0 "$daemon" 2>/dev/null; then
            echo "the daemon stopped before serving:" >&2
            tail -5 "$log" >&2
            return 1
        fi
        sleep 1
    done
}

kernels() {
    wg info
    wg bench field
    wg bench msm --curve g1 --log-n 24 --runs 3
    wg bench msm --curve g1 --log-n 27 --no-check --runs 2
    wg bench msm --curve g1 --log-n 27 --scalars porep --no-check --runs 2
    wg bench msm --curve g2 --log-n 22 --runs 3
    wg bench ntt --log-n 24 --runs 3
    wg bench subgroup --curve g1 --log-n 21 --runs 3
    wg bench subgroup --curve g2 --log-n 20 --runs 3
    wg bench ntt --log-n 27 --no-check --runs 3
    wg bench prove --log-n 22,24 --batch 1 --synthesis recorded
}

partitions() {
    local vram
    vram=$(sample_vram "$work/vram.txt")
    /usr/bin/time -v "$bin/wgpu-groth16" bench prove --log-n 27 --batch 10 \
        --aux-mix half-bits,porep --synthesis recorded --no-check \
        --trace "$out/partitions.trace.json"
    [ -n "$vram" ] && kill "$vram" && echo "peak VRAM: $(peak_of "$work/vram.txt") MiB"
}

budgets() {
    local samples=$work/vram-budgets.csv vram=""
    if command -v nvidia-smi >/dev/null; then
        # What the device holds with no process of ours: the peaks below include it.
        echo "idle VRAM: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits) MiB (nvidia-smi)"
        nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -l 1 \
            >"$samples" &
        vram=$!
    fi
    wg bench prove --log-n 18 --batch 1 --synthesis full,recorded \
        --vram-budget-mib "${SMALL:-0,1024,512}"
    # BUDGETS_TIMEOUT bounds the big run where a device call is short; what it finished counts.
    RUST_LOG=${RUST_LOG:-wgpu_groth16=info} timeout "${BUDGETS_TIMEOUT:-7200}" "$bin/wgpu-groth16" bench prove --log-n 27 \
        --batch 10 --synthesis recorded --no-check \
        --vram-budget-mib "${BUDGETS:-0,32768,24576,16384,12288,8192}" \
        --trace "$out/budgets.trace.json" | tee "$work/budgets.out" || true
    [ -n "$vram" ] && kill "$vram"
    # Each batch's peak: the samples inside the window its plan line names.
    while IFS=, read -r stamp used; do
        echo "$(date -d "$stamp" +%s) $used"
    done <"$samples" >"$samples.unix"
    grep -o 'budget [0-9]* MiB; batch from [0-9]* to [0-9]*' "$work/budgets.out" |
        while read -r _ budget _ _ _ from _ to; do
            awk -v from="$from" -v to="$to" -v budget="$budget" \
                '$1 >= from && $1 <= to && $2 > peak { peak = $2 }
                 END { print "budget " budget " MiB: peak VRAM " peak " MiB (nvidia-smi)" }' \
                "$samples.unix"
        done
}

real32() {
    real32_setup
    real32_c2
    real32_sectors
    real32_daemon
}

# real32 in parts, for device calls too short for all of it; each part after the first
# needs the files real32_setup left in $work, on the same machine.
real32_setup() {
    mkdir -p "$FIL_PROOFS_PARAMETER_CACHE"
    df -h "$work"
    /usr/bin/time -v "$bin/wgpu-groth16-filecoin" setup --proof StackedDrg32GiBV1_1 \
        --random-points --seed 1
    wgf seal --proof StackedDrg32GiBV1_1 --miner-id 1000 --sector-id 7 --benchmark-only \
        --out "$work/c1-32g.json"
    df -h "$work"
}

# Stops a part at once where real32_setup's files are missing (a fresh machine), instead of
# waiting on a daemon that cannot start.
real32_files() {
    if [ ! -f "$work/c1-32g.json" ]; then
        echo "no $work/c1-32g.json: run real32_setup first, on this machine" >&2
        return 1
    fi
}

# One C2 of real32_setup's C1 output, timed, its trace named by $1.
c2_32g() {
    RUST_LOG=wgpu_groth16=info /usr/bin/time -v "$bin/wgpu-groth16-filecoin" c2 \
        --c1 "$work/c1-32g.json" --miner-id 1000 --sector-id 7 --benchmark \
        --trace "$out/c2-32g-$1.trace.json"
}

real32_c2() {
    real32_files
    local vram
    vram=$(sample_vram "$work/vram-32g.txt")
    # The file is recorded as made here: the first run reads it as checked before; the
    # second, its record removed, checks every point (on the GPU) as a file from elsewhere.
    for run in ${REAL32_RUNS:-recorded unrecorded}; do
        [ "$run" = unrecorded ] && rm -rf "$WGPU_GROTH16_PARAMS_CACHE/checked-params"
        echo "c2 of the 32 GiB shape, parameters $run:"
        c2_32g "$run"
    done
    [ -n "$vram" ] && kill "$vram" && echo "peak VRAM: $(peak_of "$work/vram-32g.txt") MiB"
}

real32_cold() {
    real32_files
    local files
    mapfile -t files < <(find "$work" -type f -size +1M)
    echo "${#files[@]} files the C2 may read, $(du -ch "${files[@]}" | tail -1 | cut -f1)"
    cached_bytes "${files[@]}"
    sync
    for f in "${files[@]}"; do dd if="$f" iflag=nocache count=0 status=none; done
    cached_bytes "${files[@]}"
    echo "c2 of the 32 GiB shape, parameters recorded, its files read from disk:"
    c2_32g cold
}

real32_sectors() {
    real32_files
    local vram
    vram=$(sample_vram "$work/vram-32g-three.txt")
    echo "three sectors back to back:"
    /usr/bin/time -v "$bin/wgpu-groth16-filecoin" c2 --c1 "$work/c1-32g.json" \
        --miner-id 1000 --sector-id 7 --benchmark --sectors 3 \
        --trace "$out/c2-32g-three.trace.json"
    [ -n "$vram" ] && kill "$vram" && echo "peak VRAM: $(peak_of "$work/vram-32g-three.txt") MiB"
}

real32_daemon() {
    real32_files
    local vram
    vram=$(sample_vram "$work/vram-32g-daemon.txt")
    start_daemon "$work/daemon-32g.log" --listen 127.0.0.1:9822 --benchmark-jobs \
        --preload porep-32g
    echo "three sectors through the daemon, one after another:"
    "$bin/wgpu-groth16-daemon" load --address http://127.0.0.1:9822 --c1 "$work/c1-32g.json" \
        --miner-id 1000 --sector-id 7 --clients 3 --jobs 3 || true
    kill "$daemon"
    wait "$daemon" || true
    tail -5 "$work/daemon-32g.log"
    [ -n "$vram" ] && kill "$vram" && echo "peak VRAM: $(peak_of "$work/vram-32g-daemon.txt") MiB"
}

streamed() {
    local g1="wg bench msm --curve g1 --log-n 27 --no-check --profile"
    for chunk in 1290496 2580992 5161984; do
        for windows in 13 14 15 16; do
            # Narrower windows measured slower at 1.3M and 2.6M points: only those two above.
            [ "$chunk" -gt 1290496 ] && [ "$windows" -gt 14 ] && continue
            [ "$chunk" -gt 2580992 ] && [ "$windows" -gt 13 ] && continue
            $g1 --runs 2 --windows "$windows" --chunk-points "$chunk" \
                --streamed-chunk-points "$chunk"
        done
    done
    $g1 --runs 2 --streamed-chunk-points 1290496 --together 2
    $g1 --runs 1 --streamed-chunk-points 1290496 --together 4
    wg bench msm --curve g2 --log-n 26 --no-check --runs 2 --streamed-chunk-points 1290496 \
        --together 2
}

c2() {
    local sector=$work/sector c1=$work/c1.json
    rm -rf "$sector" && mkdir -p "$sector" "$FIL_PROOFS_PARAMETER_CACHE"
    time wgf setup --proof StackedDrg2KiBV1_1 --seed 1
    wgf seal --proof StackedDrg2KiBV1_1 --miner-id 1000 --sector-id 7 --dir "$sector" --out "$c1"
    for run in first second; do
        echo "c2, $run process:"
        time wgf c2 --c1 "$c1" --miner-id 1000 --sector-id 7 --out "$work/proof-$run"
    done
    wgf bench c2 --c1 "$c1" --miner-id 1000 --sector-id 7 --runs 3
    start_daemon "$work/daemon.log" --listen 127.0.0.1:9820 --jobs-per-gpu 2 --preload porep-2k
    "$bin/wgpu-groth16-daemon" load --c1 "$c1" --miner-id 1000 --sector-id 7 \
        --clients 16 --jobs 16
    "$bin/wgpu-groth16-daemon" load --c1 "$c1" --miner-id 1000 --sector-id 7 \
        --clients 16 --jobs 48
    kill "$daemon"
    wait "$daemon" || true
    tail -5 "$work/daemon.log"
}

soak() {
    soak_setup
    soak_run
}

# soak in parts, for device calls too short for all of it; soak_run needs the files
# soak_setup left in $work, on the same machine.
soak_setup() {
    local sector=$work/sector
    rm -rf "$sector" && mkdir -p "$sector" "$FIL_PROOFS_PARAMETER_CACHE"
    wgf setup --proof StackedDrg2KiBV1_1 --seed 1
    wgf setup --proof StackedDrg2KiBV1_1 --winning-post --seed 1
    wgf seal --proof StackedDrg2KiBV1_1 --miner-id 1000 --sector-id 7 --dir "$sector" \
        --out "$work/c1.json"
}

soak_run() {
    if [ ! -f "$work/c1.json" ]; then
        echo "no $work/c1.json: run soak_setup first, on this machine" >&2
        return 1
    fi
    start_daemon "$work/soak-daemon.log" --listen 127.0.0.1:9821 --jobs-per-gpu 2 \
        --max-pending 64 --preload porep-2k
    "$bin/wgpu-groth16-daemon" soak --address http://127.0.0.1:9821 --c1 "$work/c1.json" \
        --miner-id 1000 --sector-id 7 --winning-sector "$work/sector" --clients 32 \
        --jobs "${SOAK_JOBS:-2000}" --anomalies 10 --flood 200 --sample-every 10 || true
    kill "$daemon"
    wait "$daemon" || true
}

for part in $parts; do
    echo "== $part"
    "$part" 2>&1 | tee "$out/$part.log"
done
