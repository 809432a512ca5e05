//! Driver pipeline cache kept in a file, so a second process on the same driver skips the
//! shader compile (G1 and G2 MSM pipelines take tens of seconds cold on NVIDIA's Vulkan
//! driver). Enabled by `WGPU_GROTH16_PIPELINE_CACHE=<dir>` or `GpuContext::use_pipeline_cache`;
//! Vulkan only (wgpu's `PIPELINE_CACHE` feature).

use crate::error::{Error, Result};
use std::io::Read;
use std::path::{Path, PathBuf};

pub struct PipelineCacheFile {
    pub cache: wgpu::PipelineCache,
    path: PathBuf,
}

impl PipelineCacheFile {
    /// Opens (or starts) the cache for this adapter in `dir`; `None` where the backend has no
    /// pipeline cache.
    pub fn open(
        device: &wgpu::Device,
        info: &wgpu::AdapterInfo,
        dir: &Path,
    ) -> Result<Option<Self>> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return Ok(None);
        }
        let Some(key) = wgpu::util::pipeline_cache_key(info) else {
            return Ok(None);
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::device(format!("creating {}", dir.display()), e))?;
        let path = dir.join(key);
        let data = read_bounded(&path);
        // SAFETY: the file is named by wgpu's cache key for this adapter and was written from
        // `get_data` by `save` below; wgpu checks its header against the adapter and driver
        // and, with `fallback`, starts empty when the data does not fit.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("wgpu-groth16 pipeline cache"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        log::info!(
            "pipeline cache {} ({} bytes loaded)",
            path.display(),
            data.map_or(0, |d| d.len())
        );
        Ok(Some(PipelineCacheFile { cache, path }))
    }

    /// Writes the cache's current contents whole ([`crate::files`]): a reader never sees
    /// half a file, and two processes saving at once cannot interleave their bytes.
    pub fn save(&self) -> Result<()> {
        let Some(data) = self.cache.get_data() else {
            return Ok(());
        };
        crate::files::write_cache("the pipeline cache", &self.path, |w| w.write_all(&data))
    }
}

/// Most bytes read from a cache file: a driver's cache for our pipelines is a few MiB; a
/// larger file is not ours and is ignored (the cache starts empty).
const MAX_CACHE_BYTES: u64 = 256 << 20;

/// The cache file's contents, if it is a regular file within [`MAX_CACHE_BYTES`] (checked
/// before opening it: opening a FIFO would wait for a writer).
fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_CACHE_BYTES {
        log::warn!(
            "pipeline cache {} ignored: not a regular file of at most {MAX_CACHE_BYTES} bytes",
            path.display()
        );
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_CACHE_BYTES).read_to_end(&mut data).ok()?;
    Some(data)
}
