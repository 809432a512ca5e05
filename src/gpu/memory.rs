//! How much device memory an adapter has, where its backend says: the default VRAM budget.
//!
//! wgpu has no portable query, so this reads the backend beneath it: on Vulkan the
//! device-local heaps and, where the driver has `VK_EXT_memory_budget`, the share of them this
//! process may still use (other processes' allocations taken out). Metal's recommended
//! working set and DXGI's video memory info are not read yet: on those backends, and on GL,
//! the memory is unknown and the budget is the device's (allocations fail where it ends).

/// What an adapter reports about its device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Bytes of the largest device-local heap.
    pub heap_bytes: u64,
    /// Bytes of that heap this process may still allocate, where the driver says
    /// (`VK_EXT_memory_budget`: its budget less its usage, other processes' use counted).
    pub available_bytes: Option<u64>,
    /// Bytes of that heap this process uses now, where the driver says
    /// (`VK_EXT_memory_budget`): what the VRAM budget's pool counts and what it does not.
    pub used_bytes: Option<u64>,
}

/// Memory left beside the default budget: the driver's own allocations, pipelines, command
/// buffers and staging memory the pool does not count, and other processes' growth.
pub const HEADROOM_MIN: u64 = 512 << 20;
/// The headroom is at least this share of the memory (1/16).
pub const HEADROOM_SHARE: u64 = 16;

impl DeviceMemory {
    /// Bytes the prover may use by default: what is available (or the heap, where the
    /// driver does not say), less the headroom.
    pub fn default_budget(&self) -> u64 {
        let usable = self.available_bytes.unwrap_or(self.heap_bytes);
        usable.saturating_sub(HEADROOM_MIN.max(usable / HEADROOM_SHARE))
    }

    /// One line: "141,559 MiB heap, 140,946 MiB available, default budget 132,137 MiB".
    pub fn describe(&self) -> String {
        let available = match self.available_bytes {
            Some(bytes) => format!("{} available", mib(bytes)),
            None => "availability unknown".into(),
        };
        format!(
            "{} heap, {available}, default budget {}",
            mib(self.heap_bytes),
            mib(self.default_budget())
        )
    }
}

fn mib(bytes: u64) -> String {
    let mut digits = (bytes >> 20).to_string();
    let mut at = digits.len();
    while at > 3 {
        at -= 3;
        digits.insert(at, ',');
    }
    format!("{digits} MiB")
}

/// The device memory of `adapter`, or `None` where its backend does not tell.
pub fn device_memory(adapter: &wgpu::Adapter) -> Option<DeviceMemory> {
    match adapter.get_info().backend {
        #[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
        wgpu::Backend::Vulkan => vulkan::device_memory(adapter),
        _ => None,
    }
}

/// wgpu builds its Vulkan backend on every target but the web and Apple's.
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
mod vulkan {
    use super::DeviceMemory;
    use ash::vk;

    pub fn device_memory(adapter: &wgpu::Adapter) -> Option<DeviceMemory> {
        // SAFETY: the instance and physical device are only queried, while the guard keeps
        // the adapter alive.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let shared = hal.shared_instance();
        let instance = shared.raw_instance();
        let physical = hal.raw_physical_device();
        // The budget extension's query is Vulkan 1.1's: the instance and device must have it.
        let device = hal.physical_device_capabilities();
        let has_budget = shared.instance_api_version() >= vk::API_VERSION_1_1
            && device.properties().api_version >= vk::API_VERSION_1_1
            && device.supports_extension(ash::ext::memory_budget::NAME);
        let (properties, budgets) = if has_budget {
            let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
            let mut properties2 =
                vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
            unsafe { instance.get_physical_device_memory_properties2(physical, &mut properties2) };
            let properties = properties2.memory_properties;
            (properties, Some((budget.heap_budget, budget.heap_usage)))
        } else {
            let properties = unsafe { instance.get_physical_device_memory_properties(physical) };
            (properties, None)
        };
        let heaps = &properties.memory_heaps[..properties.memory_heap_count as usize];
        let (index, heap) = heaps
            .iter()
            .enumerate()
            .filter(|(_, heap)| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .max_by_key(|(_, heap)| heap.size)?;
        let available_bytes = budgets
            .map(|(budget, usage)| budget[index].min(heap.size).saturating_sub(usage[index]));
        Some(DeviceMemory {
            heap_bytes: heap.size,
            available_bytes,
            used_bytes: budgets.map(|(_, usage)| usage[index]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_leaves_a_sixteenth_or_512_mib() {
        let gib = 1u64 << 30;
        let big = DeviceMemory {
            heap_bytes: 144 * gib,
            available_bytes: Some(128 * gib),
            used_bytes: Some(gib),
        };
        assert_eq!(big.default_budget(), 120 * gib);
        let small = DeviceMemory {
            heap_bytes: 4 * gib,
            available_bytes: None,
            used_bytes: None,
        };
        assert_eq!(small.default_budget(), 4 * gib - HEADROOM_MIN);
        let tiny = DeviceMemory {
            heap_bytes: 256 << 20,
            available_bytes: None,
            used_bytes: None,
        };
        assert_eq!(tiny.default_budget(), 0);
        assert_eq!(
            big.describe(),
            "147,456 MiB heap, 131,072 MiB available, default budget 122,880 MiB"
        );
    }
}
