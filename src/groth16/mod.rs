//! Groth16 over BLS12-381: circuits in (bellperson's `Circuit`), parameters in (bellperson
//! `.params` files or in-memory `Parameters`), proofs out equal to bellperson's byte for byte.
//!
//! [`synthesis`] runs circuits into proving assignments, [`params`] reads and checks
//! parameters, [`circuits`] holds the built-in circuits (tests, demo, benchmarks).

pub mod circuits;
pub mod params;
pub mod synthesis;
