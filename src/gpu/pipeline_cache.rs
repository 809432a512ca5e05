//! Driver pipeline cache kept in a file, so a second process on the same driver skips the
//! shader compile (G1 and G2 MSM pipelines take tens of seconds cold on NVIDIA's Vulkan
//! driver). Enabled by `WGPU_GROTH16_PIPELINE_CACHE=<dir>` or `GpuContext::use_pipeline_cache`;
//! Vulkan only (wgpu's `PIPELINE_CACHE` feature).

use crate::error::{Error, Result};
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
        let data = std::fs::read(&path).ok();
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

    /// Writes the cache's current contents, atomically (a reader never sees half a file).
    pub fn save(&self) -> Result<()> {
        let Some(data) = self.cache.get_data() else {
            return Ok(());
        };
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, &data)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| Error::device(format!("writing {}", self.path.display()), e))
    }
}
