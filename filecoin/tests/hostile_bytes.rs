//! Hostile bytes: the decoders of bytes from elsewhere answer every input with a value or an
//! error, with no panic, no hang and no allocation out of proportion to the input. The
//! decoders: C1 outputs (filecoin-proofs-api's JSON, Curio's base64 wrapper) through the
//! checks `c2` and the daemon run, PoSt and SnapDeals vanilla proofs (bincode) as their jobs
//! read them, parameter files (their counts, then every point) and recorded constraint
//! systems' files. The inputs: seeded mutations of valid ones (bits flipped, cut short,
//! bytes inserted, runs repeated, digits changed, 8-byte windows set to huge lengths) and
//! hand-made ones (nesting 100,000 deep, a length of 2^60, truncated base64, 100 MB of junk).
//!
//! The harness (mutants, the runner, `HOSTILE_INPUTS=N`) is `common/hostile.rs`.

mod common;
#[path = "common/hostile.rs"]
mod hostile;

use hostile::{hostile, inputs_per_target, mutants};

#[test]
fn hostile_bytes_get_an_answer_from_every_decoder() {
    use filecoin_proofs_api::RegisteredPoStProof;
    use wgpu_groth16::groth16::params::CpuCurveCheck;
    use wgpu_groth16::groth16::{CheckRecords, ProvingParameters};
    use wgpu_groth16_filecoin::c1::C1Output;
    use wgpu_groth16_filecoin::post::PostJob;
    use wgpu_groth16_filecoin::update::UpdateJob;
    use wgpu_groth16_filecoin::SealCommit;

    let sealed = common::sealed();
    let mut failures = Vec::new();

    // C1 outputs: the sealed 2 KiB sector's, bare and in Curio's wrapper, and hand-made ones.
    let bare = serde_json::to_vec(&sealed.phase1).unwrap();
    let wrap = |inner: &str| {
        format!(r#"{{"SectorNum": 7, "Phase1Out": "{inner}", "SectorSize": 2048}}"#).into_bytes()
    };
    use base64::Engine as _;
    let wrapped = wrap(&base64::engine::general_purpose::STANDARD.encode(&bare));
    let mut made = vec![
        (
            "nested arrays".to_string(),
            "[".repeat(100_000).into_bytes(),
        ),
        (
            "nested objects".to_string(),
            r#"{"a":"#.repeat(100_000).into_bytes(),
        ),
        ("truncated base64".to_string(), wrap("eyJyZWdpc3RlcmVkX3By")),
        ("base64 without padding".to_string(), wrap("eyJ")),
        (
            "a huge number".to_string(),
            br#"{"registered_proof": 184467440737095516160000}"#.to_vec(),
        ),
    ];
    let mut junk = vec![b' '; 100 << 20];
    junk.extend_from_slice(b"{\"registered_proof\": [");
    made.push(("100 MB of junk".to_string(), junk));
    // Read, then checked as c2 and the daemon check it before proving.
    let decode_c1 = |bytes: &[u8]| {
        let c1 = C1Output::from_json(bytes, "hostile")?;
        let commit = SealCommit::new(c1.phase1, sealed.prover_id, sealed.sector_id)?;
        commit.check_vanilla_proofs()
    };
    failures.extend(hostile(
        "c1",
        made.into_iter().chain(mutants(bare, 1)),
        decode_c1,
    ));
    failures.extend(hostile("c1-wrapper", mutants(wrapped, 2), decode_c1));

    // Winning PoSt vanilla proofs as its job reads them.
    let proof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
    let randomness = common::randomness(31);
    let vanilla = common::post_vanilla(proof, &randomness).remove(0);
    let mut huge_length = (1u64 << 60).to_le_bytes().to_vec();
    huge_length.extend_from_slice(&vanilla[8..64]);
    let made = [("a length of 2^60".to_string(), huge_length)];
    failures.extend(hostile(
        "post",
        made.into_iter().chain(mutants(vanilla, 3)),
        |bytes: &[u8]| PostJob::winning(proof, randomness, sealed.prover_id, vec![bytes.to_vec()]),
    ));

    // A SnapDeals update's partition proofs.
    let update = common::snap_update(32);
    failures.extend(hostile(
        "snap",
        mutants(update.vanilla[0].clone(), 4),
        |bytes: &[u8]| {
            UpdateJob::new(
                update.proof,
                vec![bytes.to_vec()],
                update.comm_r_old,
                update.comm_r_new,
                update.comm_d_new,
            )
        },
    ));

    // Parameter files: a small one, its counts first (every mutant is mostly header).
    let shape = wgpu_groth16::groth16::synthesis::synthesize(
        wgpu_groth16::groth16::circuits::FilecoinLike::new(4, 1).unwrap(),
    )
    .unwrap()
    .shape();
    let mut file = Vec::new();
    ProvingParameters::random_for_shape(&shape, 5)
        .write(&mut file)
        .unwrap();
    let path = common::scratch().join("hostile.params");
    failures.extend(hostile(
        "params",
        mutants(file, 5).take(inputs_per_target() / 4),
        |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            ProvingParameters::read_shape(&path)?;
            ProvingParameters::read_checked_once_with(&path, &CheckRecords::none(), &CpuCurveCheck)
        },
    ));

    // A recorded constraint system's file (the matrices cache): cut short by a crash,
    // altered on disk.
    let circuit = wgpu_groth16::groth16::circuits::FilecoinLike::blank(6).unwrap();
    let system = wgpu_groth16::recorded::RecordedSystem::record(circuit).unwrap();
    let key = wgpu_groth16::recorded::RecordedKey::from_vk_bytes("hostile", b"vk");
    let recorded = common::scratch().join("hostile.recorded");
    system.write_to(&recorded, &key).unwrap();
    let file = std::fs::read(&recorded).unwrap();
    failures.extend(hostile("recorded", mutants(file, 6), |bytes: &[u8]| {
        std::fs::write(&recorded, bytes).unwrap();
        wgpu_groth16::recorded::RecordedSystem::read_from(&recorded, &key)
    }));

    // `wgpu-groth16 verify`'s readers: a verifying key, a proof, public inputs.
    let params = ProvingParameters::random_for_shape(&shape, 6);
    let mut vk = Vec::new();
    params.vk.write(&mut vk).unwrap();
    let mut huge_count = vk.clone();
    let count_at = 3 * 96 + 3 * 192;
    huge_count[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    let made = [("an ic count of 2^32 - 1".to_string(), huge_count)];
    let vk_path = common::scratch().join("hostile.vk");
    failures.extend(hostile(
        "vk",
        made.into_iter().chain(mutants(vk, 7)),
        |bytes: &[u8]| {
            std::fs::write(&vk_path, bytes).unwrap();
            wgpu_groth16_cli::read_verifying_key(&vk_path)
        },
    ));
    let mut proof = Vec::new();
    let point = params.a[0];
    bellperson::groth16::Proof::<blstrs::Bls12> {
        a: point,
        b: params.b_g2[0],
        c: point,
    }
    .write(&mut proof)
    .unwrap();
    let proof_path = common::scratch().join("hostile.proof");
    failures.extend(hostile("proof", mutants(proof, 8), |bytes: &[u8]| {
        std::fs::write(&proof_path, bytes).unwrap();
        wgpu_groth16_cli::read_proof(&proof_path)
    }));
    let inputs = "0x0100000000000000000000000000000000000000000000000000000000000000\n\
                  0x2a00000000000000000000000000000000000000000000000000000000000000\n";
    let inputs_path = common::scratch().join("hostile.inputs");
    failures.extend(hostile(
        "inputs",
        mutants(inputs.as_bytes().to_vec(), 9),
        |bytes: &[u8]| {
            std::fs::write(&inputs_path, bytes).unwrap();
            let from_file = wgpu_groth16_cli::parse_inputs(inputs_path.to_str().unwrap(), 2);
            // The same text given as a comma list on the command line.
            let listed = String::from_utf8_lossy(bytes).replace('\n', ",");
            from_file.and(wgpu_groth16_cli::parse_inputs(&listed, 2))
        },
    ));

    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
