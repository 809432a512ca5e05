//! Curio's circuit ids ("porep-32g", "wpost-32g", "winning-32g", "snap-32g"): the parameter
//! files each names, and the registered proofs Curio sends as numbers.
//!
//! The proof versions of one circuit id share their parameter files (their public
//! parameters' cache identifiers are equal), so the newest version names them.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use wgpu_groth16_filecoin::params::ParamsFiles;

/// A Filecoin circuit family: one parameter set per sector size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Circuit {
    Porep,
    WindowPost,
    WinningPost,
    SnapDeals,
}

/// Sector sizes and their names in circuit ids.
const SIZES: [(u64, &str); 5] = [
    (2 << 10, "2k"),
    (8 << 20, "8m"),
    (512 << 20, "512m"),
    (32 << 30, "32g"),
    (64 << 30, "64g"),
];

/// The newest seal proof of each size.
const SEAL_PROOFS: [RegisteredSealProof; 5] = [
    RegisteredSealProof::StackedDrg2KiBV1_1,
    RegisteredSealProof::StackedDrg8MiBV1_1,
    RegisteredSealProof::StackedDrg512MiBV1_1,
    RegisteredSealProof::StackedDrg32GiBV1_1,
    RegisteredSealProof::StackedDrg64GiBV1_1,
];

/// Curio's numeric registered PoSt proofs: Filecoin's actor ABI values 0 to 14, which are
/// filecoin-proofs-api's variants in order (the ABI's Window PoSt V1_1 is the api's V1_2).
const POST_PROOFS: [RegisteredPoStProof; 15] = [
    RegisteredPoStProof::StackedDrgWinning2KiBV1,
    RegisteredPoStProof::StackedDrgWinning8MiBV1,
    RegisteredPoStProof::StackedDrgWinning512MiBV1,
    RegisteredPoStProof::StackedDrgWinning32GiBV1,
    RegisteredPoStProof::StackedDrgWinning64GiBV1,
    RegisteredPoStProof::StackedDrgWindow2KiBV1,
    RegisteredPoStProof::StackedDrgWindow8MiBV1,
    RegisteredPoStProof::StackedDrgWindow512MiBV1,
    RegisteredPoStProof::StackedDrgWindow32GiBV1,
    RegisteredPoStProof::StackedDrgWindow64GiBV1,
    RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
    RegisteredPoStProof::StackedDrgWindow8MiBV1_2,
    RegisteredPoStProof::StackedDrgWindow512MiBV1_2,
    RegisteredPoStProof::StackedDrgWindow32GiBV1_2,
    RegisteredPoStProof::StackedDrgWindow64GiBV1_2,
];

/// Where the newest Window PoSt versions (V1_2, one per size in SIZES' order) begin in
/// POST_PROOFS.
const NEWEST_WINDOW_POSTS: usize = 10;

/// Curio's numeric registered update proofs: the ABI's values 0 to 4, the api's order.
const UPDATE_PROOFS: [RegisteredUpdateProof; 5] = [
    RegisteredUpdateProof::StackedDrg2KiBV1,
    RegisteredUpdateProof::StackedDrg8MiBV1,
    RegisteredUpdateProof::StackedDrg512MiBV1,
    RegisteredUpdateProof::StackedDrg32GiBV1,
    RegisteredUpdateProof::StackedDrg64GiBV1,
];

impl Circuit {
    const ALL: [Circuit; 4] = [
        Circuit::Porep,
        Circuit::WindowPost,
        Circuit::WinningPost,
        Circuit::SnapDeals,
    ];

    fn prefix(self) -> &'static str {
        match self {
            Circuit::Porep => "porep",
            Circuit::WindowPost => "wpost",
            Circuit::WinningPost => "winning",
            Circuit::SnapDeals => "snap",
        }
    }

    /// The circuit id of this family for `sector_size`-byte sectors.
    pub fn id(self, sector_size: u64) -> Result<String, String> {
        SIZES
            .iter()
            .find(|(size, _)| *size == sector_size)
            .map(|(_, name)| format!("{}-{name}", self.prefix()))
            .ok_or_else(|| {
                format!(
                    "no {} parameters for {sector_size}-byte sectors",
                    self.prefix()
                )
            })
    }

    /// The family and sector size a circuit id names.
    pub fn parse(circuit_id: &str) -> Result<(Circuit, u64), String> {
        Circuit::ALL
            .iter()
            .flat_map(|&circuit| SIZES.iter().map(move |&(size, _)| (circuit, size)))
            .find(|&(circuit, size)| circuit.id(size).as_deref() == Ok(circuit_id))
            .ok_or_else(|| {
                format!(
                    "unknown circuit id {circuit_id:?} (this daemon proves {}-{{{}}})",
                    Circuit::ALL.map(Circuit::prefix).join("|"),
                    SIZES.map(|(_, name)| name).join(",")
                )
            })
    }

    /// The parameter files a circuit id names.
    pub fn params_files(circuit_id: &str) -> Result<ParamsFiles, String> {
        let (circuit, size) = Circuit::parse(circuit_id)?;
        let index = SIZES
            .iter()
            .position(|&(s, _)| s == size)
            .expect("parse gives a listed size");
        let files = match circuit {
            Circuit::Porep => ParamsFiles::seal(SEAL_PROOFS[index]),
            Circuit::WinningPost => ParamsFiles::post(POST_PROOFS[index]),
            Circuit::WindowPost => ParamsFiles::post(POST_PROOFS[NEWEST_WINDOW_POSTS + index]),
            Circuit::SnapDeals => ParamsFiles::update(UPDATE_PROOFS[index]),
        };
        files.map_err(|e| format!("{circuit_id}: {e}"))
    }
}

/// The PoSt proof of Curio's `registered_proof` number.
pub fn post_proof(number: u64) -> Result<RegisteredPoStProof, String> {
    usize::try_from(number)
        .ok()
        .and_then(|n| POST_PROOFS.get(n).copied())
        .ok_or_else(|| format!("registered_proof {number} is no RegisteredPoStProof (0 to 14)"))
}

/// Curio's `registered_proof` number of PoSt proof `proof`.
pub fn post_proof_number(proof: RegisteredPoStProof) -> u64 {
    POST_PROOFS
        .iter()
        .position(|&p| p == proof)
        .map_or(u64::MAX, |n| n as u64)
}

/// The update proof of Curio's `registered_proof` number.
pub fn update_proof(number: u64) -> Result<RegisteredUpdateProof, String> {
    usize::try_from(number)
        .ok()
        .and_then(|n| UPDATE_PROOFS.get(n).copied())
        .ok_or_else(|| format!("registered_proof {number} is no RegisteredUpdateProof (0 to 4)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every id names the sizes its proofs are of, and parses back.
    #[test]
    fn circuit_ids_name_their_proofs_sector_sizes() {
        for (index, (size, _)) in SIZES.iter().enumerate() {
            assert_eq!(u64::from(SEAL_PROOFS[index].sector_size()), *size);
            assert_eq!(u64::from(POST_PROOFS[index].sector_size()), *size);
            assert_eq!(u64::from(POST_PROOFS[5 + index].sector_size()), *size);
            assert_eq!(
                u64::from(POST_PROOFS[NEWEST_WINDOW_POSTS + index].sector_size()),
                *size
            );
            assert_eq!(u64::from(UPDATE_PROOFS[index].sector_size()), *size);
            for circuit in Circuit::ALL {
                let id = circuit.id(*size).unwrap();
                assert_eq!(Circuit::parse(&id), Ok((circuit, *size)));
            }
        }
        assert_eq!(Circuit::WindowPost.id(32 << 30).unwrap(), "wpost-32g");
        assert!(Circuit::parse("porep-1t").unwrap_err().contains("porep-1t"));
        assert!(post_proof(15).is_err() && update_proof(5).is_err());
    }
}
