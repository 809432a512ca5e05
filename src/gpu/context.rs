//! Adapter choice and device creation.
//!
//! The selection honours `WGPU_BACKEND` (comma list: vulkan, gl, metal, dx12),
//! `WGPU_ADAPTER_NAME` (case-insensitive substring) and `WGPU_POWER_PREF` (low, high, none),
//! and an explicit [`AdapterSelector`] from the API or the CLI overrides them field by field.
//! The device is created with the adapter's own limits: wgpu's defaults (128 MiB storage
//! bindings) are far too small for proving.

use crate::error::{Error, Result};
use crate::gpu::pipeline_cache::PipelineCacheFile;
use crate::gpu::program::WideMul;
use crate::gpu::MAX_LOOP_TRIPS;
use std::fmt;
use std::sync::Arc;

/// Which adapter to use. Unset fields impose nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdapterSelector {
    /// Backends to consider; `None` means every backend compiled in.
    pub backends: Option<wgpu::Backends>,
    /// Case-insensitive substring of the adapter name.
    pub name: Option<String>,
    /// Preference between integrated and discrete adapters.
    pub power: Option<wgpu::PowerPreference>,
}

impl AdapterSelector {
    /// The selection named by `WGPU_BACKEND`, `WGPU_ADAPTER_NAME` and `WGPU_POWER_PREF`.
    pub fn from_env() -> Result<Self> {
        let var = |name| {
            std::env::var(name)
                .ok()
                .filter(|v: &String| !v.trim().is_empty())
        };
        Ok(AdapterSelector {
            backends: var("WGPU_BACKEND")
                .map(|v| parse_backends("WGPU_BACKEND", &v))
                .transpose()?,
            name: var("WGPU_ADAPTER_NAME"),
            power: var("WGPU_POWER_PREF")
                .map(|v| parse_power("WGPU_POWER_PREF", &v))
                .transpose()?,
        })
    }

    /// `self` with every field that `explicit` sets replaced by it.
    pub fn overridden_by(self, explicit: &AdapterSelector) -> Self {
        AdapterSelector {
            backends: explicit.backends.or(self.backends),
            name: explicit.name.clone().or(self.name),
            power: explicit.power.or(self.power),
        }
    }

    /// The environment's selection overridden by `explicit`.
    pub fn resolve(explicit: &AdapterSelector) -> Result<Self> {
        Ok(Self::from_env()?.overridden_by(explicit))
    }

    fn backends_or_all(&self) -> wgpu::Backends {
        self.backends.unwrap_or(wgpu::Backends::all())
    }

    fn matches(&self, info: &wgpu::AdapterInfo) -> bool {
        self.name
            .as_ref()
            .is_none_or(|n| info.name.to_lowercase().contains(&n.to_lowercase()))
    }
}

impl fmt::Display for AdapterSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backends = self
            .backends
            .map_or("any backend".to_string(), |b| format!("backends {b:?}"));
        write!(f, "{backends}")?;
        if let Some(name) = &self.name {
            write!(f, ", name containing {name:?}")?;
        }
        if let Some(power) = self.power {
            write!(f, ", power preference {power:?}")?;
        }
        Ok(())
    }
}

/// Parses a comma-separated backend list such as `vulkan,gl`.
pub fn parse_backends(setting: &'static str, value: &str) -> Result<wgpu::Backends> {
    let mut backends = wgpu::Backends::empty();
    for word in value.split(',').map(|w| w.trim().to_lowercase()) {
        backends |= match word.as_str() {
            "vulkan" | "vk" => wgpu::Backends::VULKAN,
            "gl" | "gles" | "opengl" => wgpu::Backends::GL,
            "metal" | "mtl" => wgpu::Backends::METAL,
            "dx12" | "d3d12" => wgpu::Backends::DX12,
            "all" => wgpu::Backends::all(),
            _ => {
                return Err(Error::InvalidSetting {
                    name: setting,
                    value: value.to_string(),
                    expected: "a comma list of vulkan, gl, metal, dx12, all",
                })
            }
        };
    }
    Ok(backends)
}

/// Parses `low`, `high` or `none`.
pub fn parse_power(setting: &'static str, value: &str) -> Result<wgpu::PowerPreference> {
    match value.trim().to_lowercase().as_str() {
        "low" | "low-power" | "lowpower" => Ok(wgpu::PowerPreference::LowPower),
        "high" | "high-performance" | "highperformance" => {
            Ok(wgpu::PowerPreference::HighPerformance)
        }
        "none" => Ok(wgpu::PowerPreference::None),
        _ => Err(Error::InvalidSetting {
            name: setting,
            value: value.to_string(),
            expected: "low, high or none",
        }),
    }
}

/// Prepares the process for opening adapters quietly; runs once, before the first instance.
///
/// Mesa's Vulkan device-select layer (an implicit layer of every Mesa install) asks the display
/// servers which GPU is the default, and without `XDG_RUNTIME_DIR` libwayland prints "error:
/// XDG_RUNTIME_DIR is invalid or not set in the environment." for each probe: two to four
/// lines on stderr in every container, ssh command, cron job and service. We choose adapters
/// ourselves ([`select_adapters`]), so the layer adds nothing; when there is no runtime
/// directory (so no display to ask) and the layer is not configured (`NODEVICE_SELECT`,
/// `MESA_VK_DEVICE_SELECT`), it is switched off through its own `NODEVICE_SELECT=1`.
///
/// The Vulkan loader reads the variable when an instance is created, so it is set then, once.
/// Setting a variable races with C code reading the environment on other threads: programs
/// should call this first thing in `main` (the CLI does), before they start threads.
pub fn prepare_environment() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let unset = |name| std::env::var_os(name).is_none();
        if unset("XDG_RUNTIME_DIR") && unset("NODEVICE_SELECT") && unset("MESA_VK_DEVICE_SELECT") {
            std::env::set_var("NODEVICE_SELECT", "1");
        }
    });
}

fn new_instance(backends: wgpu::Backends) -> wgpu::Instance {
    prepare_environment();
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    // No indirect-call validation: the kernels dispatch nothing indirectly, and its compute
    // pipeline, built with every device, failed on NVIDIA's GL adapter with a logged ERROR
    // before the device request did.
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    wgpu::Instance::new(desc)
}

/// Every adapter the selection's backends expose, in no particular order (the name filter is
/// not applied: `info` shows them all).
pub fn enumerate_adapters(selector: &AdapterSelector) -> Vec<wgpu::Adapter> {
    let instance = new_instance(selector.backends_or_all());
    pollster::block_on(instance.enumerate_adapters(selector.backends_or_all()))
}

/// Higher is better: hardware before software, then the preferred power class, then the
/// native APIs before GL (GL has neither int64 nor subgroups).
fn rank(
    device_type: wgpu::DeviceType,
    backend: wgpu::Backend,
    power: wgpu::PowerPreference,
) -> (u8, u8) {
    use wgpu::DeviceType as T;
    let device = match (device_type, power) {
        (T::IntegratedGpu, wgpu::PowerPreference::LowPower) => 5,
        (T::DiscreteGpu, _) => 4,
        (T::IntegratedGpu, _) => 3,
        (T::VirtualGpu, _) => 2,
        (T::Other, _) => 1,
        (T::Cpu, _) => 0,
    };
    let backend = match backend {
        wgpu::Backend::Gl => 0,
        wgpu::Backend::BrowserWebGpu => 1,
        _ => 2,
    };
    (device, backend)
}

/// Whether the adapter runs compute shaders at all (NVIDIA's GL adapter through EGL offers
/// only GL 3.3, which does not).
pub fn has_compute(adapter: &wgpu::Adapter) -> bool {
    adapter
        .get_downlevel_capabilities()
        .flags
        .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
}

/// The best adapter for the selection, or [`Error::NoAdapter`].
pub fn select_adapter(selector: &AdapterSelector) -> Result<wgpu::Adapter> {
    Ok(select_adapters(selector)?.remove(0))
}

/// Every adapter the selection matches that runs compute shaders, best first (at least one,
/// or [`Error::NoAdapter`]): several GPUs of one machine for one batch.
pub fn select_adapters(selector: &AdapterSelector) -> Result<Vec<wgpu::Adapter>> {
    let power = selector
        .power
        .unwrap_or(wgpu::PowerPreference::HighPerformance);
    let mut adapters: Vec<_> = enumerate_adapters(selector)
        .into_iter()
        .filter(|a| selector.matches(&a.get_info()) && has_compute(a))
        .collect();
    adapters.sort_by_key(|a| {
        let info = a.get_info();
        std::cmp::Reverse(rank(info.device_type, info.backend, power))
    });
    if adapters.is_empty() {
        return Err(Error::NoAdapter {
            selection: selector.to_string(),
        });
    }
    Ok(adapters)
}

/// What the device offers that our kernels care about.
#[derive(Clone, Debug)]
pub struct Capabilities {
    /// 64-bit integers in shaders (the faster wide multiply).
    pub int64: bool,
    pub subgroups: bool,
    pub timestamps: bool,
    pub pipeline_cache: bool,
}

impl Capabilities {
    pub fn of(features: wgpu::Features) -> Self {
        Capabilities {
            int64: features.contains(wgpu::Features::SHADER_INT64),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            pipeline_cache: features.contains(wgpu::Features::PIPELINE_CACHE),
        }
    }
}

/// An open device on one adapter: everything kernels need to run.
///
/// Cheap to clone; clones share the device.
#[derive(Clone)]
pub struct GpuContext {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub capabilities: Capabilities,
    /// Where compiled pipelines persist between processes, if enabled.
    pub pipeline_cache: Option<Arc<PipelineCacheFile>>,
    /// Reusable staging buffers for uploads and read-backs (see `transfer`).
    pub(crate) staging: Arc<super::transfer::Staging>,
    /// Held by every submission and every poll of this device (see `GpuContext::submit`).
    pub(crate) maintenance: Arc<std::sync::Mutex<()>>,
    lost: Arc<std::sync::Mutex<Option<String>>>,
}

impl fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuContext")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish()
    }
}

impl GpuContext {
    /// Opens the best adapter for `explicit` overriding the environment's selection.
    pub fn new(explicit: &AdapterSelector) -> Result<Self> {
        let selector = AdapterSelector::resolve(explicit)?;
        Self::from_adapter(select_adapter(&selector)?)
    }

    /// Opens a device on `adapter` with its own limits and every feature we can use.
    pub fn from_adapter(adapter: wgpu::Adapter) -> Result<Self> {
        let info = adapter.get_info();
        let wanted = wgpu::Features::SHADER_INT64
            | wgpu::Features::SUBGROUP
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::PIPELINE_CACHE;
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("wgpu-groth16"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            // wgpu's allocator puts buffers smaller than a block into shared blocks and
            // keeps an empty one per memory type; with `Performance`'s 128-256 MiB blocks the
            // driver counted 243-323 MiB past what the VRAM budget counts at 16 and 8 GiB
            // (H100, 5cccd2f). Blocks of 8-64 MiB bound that slack; the large buffers (vectors,
            // bases, buckets) get memory of their own either way.
            memory_hints: wgpu::MemoryHints::MemoryUsage,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|source| Error::RequestDevice {
            adapter: info.name.clone(),
            source,
        })?;

        let lost = Arc::new(std::sync::Mutex::new(None));
        let lost_slot = lost.clone();
        let name = info.name.clone();
        device.set_device_lost_callback(move |reason, message| {
            log::error!("device {name:?} lost ({reason:?}): {message}");
            *lost_slot.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(format!("{reason:?}: {message}"));
        });
        device.on_uncaptured_error(Arc::new(|err| log::error!("uncaptured wgpu error: {err}")));
        log::info!(
            "opened {} ({:?}, {:?}, driver {} {})",
            info.name,
            info.backend,
            info.device_type,
            info.driver,
            info.driver_info
        );
        let mut gpu = GpuContext {
            adapter,
            capabilities: Capabilities::of(device.features()),
            limits: device.limits(),
            device,
            queue,
            info,
            pipeline_cache: None,
            staging: Default::default(),
            maintenance: Default::default(),
            lost,
        };
        if let Some(dir) = std::env::var_os("WGPU_GROTH16_PIPELINE_CACHE") {
            gpu.use_pipeline_cache(std::path::Path::new(&dir))?;
        }
        Ok(gpu)
    }

    /// Keeps compiled pipelines in `dir` (Vulkan): later processes on the same driver load
    /// them instead of compiling. A no-op on backends without pipeline caches.
    pub fn use_pipeline_cache(&mut self, dir: &std::path::Path) -> Result<()> {
        self.pipeline_cache = PipelineCacheFile::open(&self.device, &self.info, dir)?.map(Arc::new);
        Ok(())
    }

    /// The wide-multiply variant this device runs fastest.
    pub fn preferred_wide_mul(&self) -> WideMul {
        if self.capabilities.int64 {
            WideMul::Int64
        } else {
            WideMul::Portable
        }
    }

    /// The loop trips an invocation may make in all: llvmpipe's [`MAX_LOOP_TRIPS`] on
    /// software adapters (the one software adapter measured), none on GPUs.
    pub fn loop_cap(&self) -> Option<u32> {
        (self.info.device_type == wgpu::DeviceType::Cpu).then_some(MAX_LOOP_TRIPS)
    }

    /// Every wide-multiply variant this device can run.
    pub fn supported_wide_muls(&self) -> Vec<WideMul> {
        WideMul::ALL
            .into_iter()
            .filter(|w| !w.needs_int64() || self.capabilities.int64)
            .collect()
    }

    /// `Err` once the device has been lost.
    pub fn check_alive(&self) -> Result<()> {
        match &*self.lost.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(reason) => Err(Error::Device(format!(
                "device {:?} was lost: {reason}",
                self.info.name
            ))),
            None => Ok(()),
        }
    }

    /// Short description for logs and tables.
    pub fn describe(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_lists_parse_and_unknown_names_are_refused() {
        let b = parse_backends("WGPU_BACKEND", "Vulkan, gl").unwrap();
        assert_eq!(b, wgpu::Backends::VULKAN | wgpu::Backends::GL);
        let err = parse_backends("WGPU_BACKEND", "vulkan,cuda").unwrap_err();
        assert!(
            err.to_string().contains("WGPU_BACKEND=\"vulkan,cuda\""),
            "{err}"
        );
    }

    #[test]
    fn power_preferences_parse_and_unknown_values_are_refused() {
        assert_eq!(
            parse_power("p", "LOW").unwrap(),
            wgpu::PowerPreference::LowPower
        );
        assert_eq!(
            parse_power("p", "high").unwrap(),
            wgpu::PowerPreference::HighPerformance
        );
        assert!(parse_power("p", "fast").is_err());
    }

    #[test]
    fn explicit_selection_overrides_the_environment_field_by_field() {
        let env = AdapterSelector {
            backends: Some(wgpu::Backends::GL),
            name: Some("llvmpipe".into()),
            power: None,
        };
        let explicit = AdapterSelector {
            name: Some("H200".into()),
            ..Default::default()
        };
        let merged = env.overridden_by(&explicit);
        assert_eq!(merged.backends, Some(wgpu::Backends::GL));
        assert_eq!(merged.name.as_deref(), Some("H200"));
    }

    #[test]
    fn hardware_adapters_rank_above_software_and_native_above_gl() {
        let high = wgpu::PowerPreference::HighPerformance;
        let gpu_vk = rank(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Vulkan, high);
        let gpu_gl = rank(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Gl, high);
        let cpu_vk = rank(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan, high);
        assert!(gpu_vk > gpu_gl && gpu_gl > cpu_vk);
    }

    #[test]
    fn a_selection_nothing_matches_names_the_fixes() {
        let selector = AdapterSelector {
            name: Some("no adapter is called this".into()),
            ..Default::default()
        };
        let err = select_adapter(&selector).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, Error::NoAdapter { .. }));
        assert!(
            message.contains("mesa-vulkan-drivers") && message.contains("BELLMAN_NO_GPU"),
            "{message}"
        );
    }
}
