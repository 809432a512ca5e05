//! What a set's outputs are: each named file checked (kind, folder, identity against the
//! other outputs and the inputs) and given a temporary beside it before the work.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::destination::{resolve, Destination, Identity, Special, Temporary};
use super::set::{OutputSet, OutputSlot, PlannedFile};
use super::temporaries::{self, FolderLocks, NEXT_NUMBER};
use crate::error::{Error, Result};

/// A file as the command line names it, with the flag (or role) that names it.
struct Named {
    flag: String,
    path: PathBuf,
    special: Special,
}

/// The files a command will read and write, before they are checked.
#[derive(Default)]
pub struct OutputPlan {
    inputs: Vec<Named>,
    outputs: Vec<Named>,
}

impl OutputPlan {
    pub fn new() -> Self {
        Self::default()
    }

    /// A file the command reads: no output may be the same file.
    pub fn input(&mut self, flag: &str, path: &Path) {
        self.inputs.push(Named {
            flag: flag.into(),
            path: path.into(),
            special: Special::WriteThrough,
        });
    }

    /// A file the command writes; `flag` names it in errors. A character device or FIFO
    /// at `path` is written through (`--proof /dev/stdout`).
    pub fn output(&mut self, flag: &str, path: &Path) -> OutputSlot {
        self.named_output(flag, path, Special::WriteThrough)
    }

    /// A file only this crate reads back (a cache, a record): replaced whatever is at
    /// `path`. A device or FIFO there is replaced too, not written to, which would wait for
    /// a reader.
    pub fn cache(&mut self, what: &str, path: &Path) -> OutputSlot {
        self.named_output(what, path, Special::Replace)
    }

    fn named_output(&mut self, flag: &str, path: &Path, special: Special) -> OutputSlot {
        self.outputs.push(Named {
            flag: flag.into(),
            path: path.into(),
            special,
        });
        OutputSlot(self.outputs.len() - 1)
    }

    /// Checks every output (kind, folder, identity against the others and the inputs) and
    /// creates the temporaries: call it before the command's work.
    pub fn reserve(self) -> Result<OutputSet> {
        let inputs: Vec<(String, Identity)> = self
            .inputs
            .into_iter()
            .filter_map(|input| Some((input.flag, Identity::of_input(&input.path)?)))
            .collect();
        let mut set = OutputSet { files: Vec::new() };
        for output in self.outputs {
            let (destination, identity) = resolve(&output.flag, &output.path, output.special)?;
            let named_before = set
                .files
                .iter()
                .map(|file| (&file.flag, &file.identity))
                .chain(inputs.iter().map(|(flag, identity)| (flag, identity)))
                .find(|(_, other)| other.same(&identity));
            if let Some((other, _)) = named_before {
                return Err(Error::Output(format!(
                    "{other} and {} name the same file ({})",
                    output.flag,
                    output.path.display()
                )));
            }
            set.files.push(PlannedFile {
                flag: output.flag,
                path: output.path,
                identity,
                destination,
                written: false,
            });
        }
        // Dropped in reverse order: the locks, the registry, then `set` on an error.
        let mut temporaries = temporaries::registry();
        let locks = FolderLocks::take(set.folders());
        for file in &mut set.files {
            let Destination::Replace {
                folder,
                name,
                temporary,
                ..
            } = &mut file.destination
            else {
                continue;
            };
            if locks.held {
                temporaries::sweep(folder, name);
            }
            let number = NEXT_NUMBER.fetch_add(1, Ordering::Relaxed);
            let path = folder.join(temporaries::sibling(name, number, "tmp"));
            // Registered first: a signal between the two still removes it.
            temporaries.push(path.clone());
            let handle = temporaries::create_locked(&path, locks.held)
                .map_err(|e| Error::file("write", &file.path, e));
            let handle = handle.inspect_err(|_| temporaries.retain(|t| *t != path))?;
            *temporary = Some(Temporary {
                path,
                number,
                handle,
            });
        }
        Ok(set)
    }
}
